// open_store.h: the store of the configured dialect, and the dialect's insert notifications.
// This is qb_store's public header: the app and the tests reach a dialect only through it.
//
// Thread-safety: the functions may be called from any thread; see OutboxStore and
// InsertListener for their objects.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "queuebox/status.h"
#include "queuebox/store.h"

namespace queuebox {

// Opens the store named by config.type ("postgresql" | "sqlite"; empty: the kind of config.url,
// store::DatabaseKindOfUrl). Does not wait for the database (see WaitForDatabase in core).
// kInvalidArgument for an unknown or unsupported type or a bad URL.
Result<std::unique_ptr<OutboxStore>> OpenStore(const DatabaseConfig& config);

// Calls its `on_wake` soon after rows are inserted, so the relay claims without waiting for the
// next poll (outbox.notify.enabled). A hint only: polling stays the source of truth, and a
// listener never fails the relay once started.
class InsertListener {
 public:
  virtual ~InsertListener() = default;
  // Starts listening in the background. kFailedPrecondition when already started.
  virtual Status Start() = 0;
  // Stops listening; idempotent.
  virtual void Stop() = 0;
};

// The insert listener of config.type: PostgreSQL LISTEN/NOTIFY (store/postgres/pg_notify.h);
// nullptr, and no error, for a dialect without one (SQLite). `on_wake` runs on the listener's
// thread and must be cheap. kInvalidArgument for a bad URL; no connection is made here.
Result<std::unique_ptr<InsertListener>> OpenInsertListener(const DatabaseConfig& config,
                                                           std::function<void()> on_wake);

namespace store {

// The database kind `database.url` names (with `database.type` unset, the URL decides, so
// QueueBox's three-variable deployment works):
//   postgresql://, postgres://, jdbc:postgresql://          -> "postgresql"
//   jdbc:sqlserver://                                       -> "sqlserver" (refused by this build)
//   sqlite:, jdbc:sqlite:, file:, or a path without a scheme -> "sqlite"
// Any other scheme (mysql://, jdbc:mysql:, http://) is kInvalidArgument naming the scheme and the
// kinds this build takes; an empty URL is kInvalidArgument. Messages never repeat the URL (it may
// hold a password).
Result<std::string> DatabaseKindOfUrl(std::string_view url);

// MigrationGuard (QueueBox reference §13.6 step 8): kFailedPrecondition, naming every renamed
// setting, when the configuration renames a table or a column (outbox or inbox), since the
// bundled migrations create the default schema only. Needs no database: `run` checks it before
// migrating, `check-config` when database.migrate is true.
Status RequireDefaultSchema(const DatabaseConfig& config);

// The message for a SQL Server database: this build has no SQL Server dialect yet.
inline constexpr char kSqlServerUnsupported[] =
    "SQL Server is not supported by this build; QueueBox C++ runs on PostgreSQL "
    "(postgresql://, postgres:// or jdbc:postgresql:// URLs) or SQLite (a file path)";

}  // namespace store

}  // namespace queuebox
