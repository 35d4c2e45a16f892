// sqlite.h: the SQLite outbox store of the BabelQueue SDK. The caller owns the sqlite3 handle and
// every BEGIN/COMMIT.
//
// Table (CreateSqliteOutboxSchema), default `babelqueue_outbox`: id INTEGER PRIMARY KEY
// AUTOINCREMENT (oldest first = id order), queue TEXT, body BLOB (the envelope bytes verbatim),
// status 'pending' | 'published', attempts, last_error (cut to 500 characters), created_at /
// published_at / failed_at / claimed_until as Unix ms INTEGER, index (status, id).
//
// Claims: SQLite has one writer at a time. FetchUnpublished is one UPDATE ... RETURNING that
// leases the oldest pending, unleased rows (claimed_until = now + lease); it runs under the write
// lock, so a second relay on another connection cannot take the same rows. Set a busy timeout on
// every connection (sqlite3_busy_timeout) so writers wait instead of failing with SQLITE_BUSY
// (returned as kUnavailable). Times come from SQLite's clock (julianday('now')).
//
// Thread-safety: use one store (and connection) per thread.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "babelqueue/outbox.h"

namespace babelqueue {

Status CreateSqliteOutboxSchema(sqlite3* db, std::string_view table = kDefaultOutboxTable);

struct SqliteOutboxOptions {
  std::string table = kDefaultOutboxTable;
  int64_t lease_ms = 60000;  // ms, > 0
};

class SqliteOutboxStore final : public OutboxStore {
 public:
  static Result<std::unique_ptr<SqliteOutboxStore>> Create(sqlite3* db,
                                                           SqliteOutboxOptions options = {});
  // Requires an open transaction on the connection (kFailedPrecondition in autocommit mode).
  Result<std::string> Save(std::string_view encoded, std::string_view queue) override;
  Result<std::vector<OutboxRecord>> FetchUnpublished(int limit) override;
  Status MarkPublished(const std::vector<std::string>& ids) override;
  Status MarkFailed(const std::string& id, std::string_view error) override;

 private:
  SqliteOutboxStore(sqlite3* db, SqliteOutboxOptions options);
  sqlite3* db_;
  SqliteOutboxOptions options_;
};

}  // namespace babelqueue
