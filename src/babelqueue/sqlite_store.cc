// sqlite_store.cc: SqliteOutboxStore (see sqlite.h).
#include <algorithm>
#include <utility>
#include <vector>

#include "babelqueue/sqlite.h"
#include "sql_util.h"

namespace babelqueue {
namespace {

using internal::CheckSqlIdentifier;
using internal::WithTable;

// Unix milliseconds on SQLite's clock.
#define BQ_SQLITE_NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"

struct StmtDeleter {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtDeleter>;

Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string text = std::string(what) + ": " + sqlite3_errmsg(db);
  const int primary = rc & 0xFF;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    return queuebox::Unavailable(std::move(text));
  }
  return queuebox::Internal(std::move(text));
}

Result<Stmt> Prepare(sqlite3* db, const std::string& sql, std::string_view what) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &raw, nullptr);
  Stmt stmt(raw);
  if (rc != SQLITE_OK) return SqliteError(db, rc, what);
  return stmt;
}

void BindText(sqlite3_stmt* s, int index, std::string_view text) {
  sqlite3_bind_text(s, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string ColumnText(sqlite3_stmt* s, int col) {
  const auto* p = sqlite3_column_text(s, col);
  return p ? std::string(reinterpret_cast<const char*>(p),
                         static_cast<size_t>(sqlite3_column_bytes(s, col)))
           : std::string();
}

// Steps a statement that returns no rows.
Status RunToDone(sqlite3* db, sqlite3_stmt* s, std::string_view what) {
  const int rc = sqlite3_step(s);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return SqliteError(db, rc, what);
  return Status::Ok();
}

constexpr std::string_view kSqliteOutboxDdl = R"sql(
CREATE TABLE IF NOT EXISTS {t} (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  queue TEXT NOT NULL,
  body BLOB NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'published')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  created_at INTEGER NOT NULL,
  published_at INTEGER,
  failed_at INTEGER,
  claimed_until INTEGER
);
CREATE INDEX IF NOT EXISTS {t}_pending_idx ON {t} (status, id);
)sql";

}  // namespace

Status CreateSqliteOutboxSchema(sqlite3* db, std::string_view table) {
  if (db == nullptr) return queuebox::InvalidArgument("the SQLite connection is null");
  QB_RETURN_IF_ERROR(CheckSqlIdentifier(table));
  char* err = nullptr;
  const int rc =
      sqlite3_exec(db, WithTable(kSqliteOutboxDdl, table).c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string text = std::string("create the outbox table: ") + (err ? err : "unknown error");
    sqlite3_free(err);
    return queuebox::Internal(std::move(text));
  }
  return Status::Ok();
}

SqliteOutboxStore::SqliteOutboxStore(sqlite3* db, SqliteOutboxOptions options)
    : db_(db), options_(std::move(options)) {}

Result<std::unique_ptr<SqliteOutboxStore>> SqliteOutboxStore::Create(sqlite3* db,
                                                                     SqliteOutboxOptions options) {
  if (db == nullptr) return queuebox::InvalidArgument("the SQLite connection is null");
  QB_RETURN_IF_ERROR(CheckSqlIdentifier(options.table));
  if (options.lease_ms <= 0) return queuebox::InvalidArgument("lease_ms must be > 0");
  return std::unique_ptr<SqliteOutboxStore>(new SqliteOutboxStore(db, std::move(options)));
}

Result<std::string> SqliteOutboxStore::Save(std::string_view encoded, std::string_view queue) {
  if (sqlite3_get_autocommit(db_) != 0) {
    return queuebox::FailedPrecondition(
        "outbox save must run inside the caller's open transaction (BEGIN first)");
  }
  QB_ASSIGN_OR_RETURN(
      Stmt s,
      Prepare(
          db_,
          WithTable("INSERT INTO {t} (queue, body, created_at) VALUES (?1, ?2, " BQ_SQLITE_NOW_MS
                    ") RETURNING id",
                    options_.table),
          "save the outbox row"));
  BindText(s.get(), 1, queue);
  sqlite3_bind_blob(s.get(), 2, encoded.data(), static_cast<int>(encoded.size()), SQLITE_TRANSIENT);
  const int rc = sqlite3_step(s.get());
  if (rc != SQLITE_ROW) return SqliteError(db_, rc, "save the outbox row");
  return std::to_string(sqlite3_column_int64(s.get(), 0));
}

Result<std::vector<OutboxRecord>> SqliteOutboxStore::FetchUnpublished(int limit) {
  std::vector<OutboxRecord> out;
  if (limit <= 0) return out;
  QB_ASSIGN_OR_RETURN(Stmt s, Prepare(db_,
                                      WithTable(R"sql(
UPDATE {t} SET claimed_until = )sql" BQ_SQLITE_NOW_MS R"sql( + ?2
WHERE id IN (SELECT id FROM {t}
             WHERE status = 'pending'
               AND (claimed_until IS NULL OR claimed_until <= )sql" BQ_SQLITE_NOW_MS R"sql()
             ORDER BY id LIMIT ?1)
RETURNING id, body, queue, attempts)sql",
                                                options_.table),
                                      "claim outbox rows"));
  sqlite3_bind_int(s.get(), 1, limit);
  sqlite3_bind_int64(s.get(), 2, options_.lease_ms);
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    OutboxRecord rec;
    rec.id = std::to_string(sqlite3_column_int64(s.get(), 0));
    const void* blob = sqlite3_column_blob(s.get(), 1);
    rec.body.assign(static_cast<const char*>(blob),
                    blob ? static_cast<size_t>(sqlite3_column_bytes(s.get(), 1)) : 0);
    rec.queue = ColumnText(s.get(), 2);
    rec.attempts = sqlite3_column_int(s.get(), 3);
    out.push_back(std::move(rec));
  }
  if (rc != SQLITE_DONE) return SqliteError(db_, rc, "claim outbox rows");
  std::sort(out.begin(), out.end(), [](const OutboxRecord& a, const OutboxRecord& b) {
    return internal::ParseRowId(a.id) < internal::ParseRowId(b.id);
  });
  return out;
}

Status SqliteOutboxStore::MarkPublished(const std::vector<std::string>& ids) {
  const std::string array = internal::RowIdList(ids, '[', ']');
  if (array.empty()) return Status::Ok();
  QB_ASSIGN_OR_RETURN(
      Stmt s,
      Prepare(db_,
              WithTable("UPDATE {t} SET status = 'published', published_at = " BQ_SQLITE_NOW_MS
                        ", claimed_until = NULL WHERE status = 'pending' AND id IN "
                        "(SELECT value FROM json_each(?1))",
                        options_.table),
              "mark outbox rows published"));
  BindText(s.get(), 1, array);
  return RunToDone(db_, s.get(), "mark outbox rows published");
}

Status SqliteOutboxStore::MarkFailed(const std::string& id, std::string_view error) {
  const auto row_id = internal::ParseRowId(id);
  if (!row_id) return Status::Ok();  // not a row of this store
  QB_ASSIGN_OR_RETURN(Stmt s,
                      Prepare(db_,
                              WithTable("UPDATE {t} SET attempts = attempts + 1, last_error = ?2, "
                                        "failed_at = " BQ_SQLITE_NOW_MS ", claimed_until = NULL "
                                        "WHERE id = ?1 AND status = 'pending'",
                                        options_.table),
                              "mark an outbox row failed"));
  sqlite3_bind_int64(s.get(), 1, *row_id);
  BindText(s.get(), 2, internal::CutError(error));
  return RunToDone(db_, s.get(), "mark an outbox row failed");
}

}  // namespace babelqueue
