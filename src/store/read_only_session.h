// read_only_session.h: one READ ONLY transaction over the database of database.*, for checks
// that read the outbox, the inbox and the replica table without writing or locking anything
// (`queuebox verify`). Every statement of a session sees one snapshot: PostgreSQL runs them in a
// REPEATABLE READ READ ONLY transaction (allowed on a hot-standby replica), SQLite in one read
// transaction on a connection opened read-only with query_only set.
//
// Thread-safety: a session is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "queuebox/status.h"
#include "queuebox/store.h"

namespace queuebox {

// A bound parameter (NULL, integer or text) and a result read as text with its column names.
using ReadParam = std::variant<std::monostate, int64_t, std::string>;
struct ReadTable {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;
};

class ReadOnlySession {
 public:
  virtual ~ReadOnlySession() = default;
  virtual std::string_view dialect() const = 0;  // "postgresql" | "sqlite"
  // One statement; parameters $1.. (PostgreSQL) or ?1.. (SQLite). kInternal for a statement the
  // database refused, kUnavailable when the connection is lost.
  virtual Result<ReadTable> Query(const std::string& sql,
                                  const std::vector<ReadParam>& params = {}) = 0;
  // True when a table of this name (any letter case) is visible to the session.
  virtual Result<bool> TableExists(const std::string& table) = 0;
};

// Connects (PostgreSQL: one connection, application_name queuebox-verify; SQLite: the file,
// read-only, never created) and begins the read-only transaction. kUnavailable when the database
// cannot be reached or the file does not exist; kInvalidArgument for a bad URL or type.
Result<std::unique_ptr<ReadOnlySession>> OpenReadOnlySession(const DatabaseConfig& config);

}  // namespace queuebox
