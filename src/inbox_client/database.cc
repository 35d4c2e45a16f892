// database.cc: the PostgreSQL (libpq) and SQLite connections of the pull client (database.h).
#include "queuebox/inbox/database.h"

#include <libpq-fe.h>
#include <sqlite3.h>

#include <utility>

#include "core/redaction.h"

namespace queuebox::inbox {

std::string_view DialectName(Dialect dialect) {
  return dialect == Dialect::kPostgreSQL ? "postgresql" : "sqlite";
}

int SqlRows::Column(std::string_view name) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return static_cast<int>(i);
  }
  return -1;
}

namespace {

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// ---- PostgreSQL ----

class PgConnection final : public Connection {
 public:
  explicit PgConnection(PGconn* conn) : conn_(conn), cancel_(PQgetCancel(conn)) {}
  ~PgConnection() override {
    if (cancel_ != nullptr) PQfreeCancel(cancel_);
    PQfinish(conn_);
  }

  Dialect dialect() const override { return Dialect::kPostgreSQL; }
  pg_conn* postgres() override { return conn_; }
  bool healthy() const override { return PQstatus(conn_) == CONNECTION_OK; }

  Result<int64_t> Execute(std::string_view sql, std::span<const SqlValue> params) override {
    QB_ASSIGN_OR_RETURN(PGresult * res, Run(sql, params));
    const char* tuples = PQcmdTuples(res);
    const int64_t changed = (tuples != nullptr && *tuples != '\0') ? std::stoll(tuples) : 0;
    PQclear(res);
    return changed;
  }

  Result<SqlRows> Query(std::string_view sql, std::span<const SqlValue> params) override {
    QB_ASSIGN_OR_RETURN(PGresult * res, Run(sql, params));
    SqlRows out;
    const int fields = PQnfields(res);
    for (int c = 0; c < fields; ++c) out.columns.emplace_back(PQfname(res, c));
    for (int r = 0; r < PQntuples(res); ++r) {
      auto& row = out.rows.emplace_back();
      row.reserve(static_cast<size_t>(fields));
      for (int c = 0; c < fields; ++c) {
        if (PQgetisnull(res, r, c)) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(
              std::string(PQgetvalue(res, r, c), static_cast<size_t>(PQgetlength(res, r, c))));
        }
      }
    }
    PQclear(res);
    return out;
  }

  Status Begin(bool /*write*/) override { return Simple("BEGIN"); }
  Status Commit() override { return Simple("COMMIT"); }
  Status Rollback() override { return Simple("ROLLBACK"); }

  void Interrupt() override {
    if (cancel_ == nullptr) return;
    char error[256];
    PQcancel(cancel_, error, sizeof error);  // best effort: the handler is cancelled anyway
  }

 private:
  Status Simple(const char* sql) {
    auto res = Run(sql, {});
    if (!res.ok()) return res.status();
    PQclear(*res);
    return Status::Ok();
  }

  Result<PGresult*> Run(std::string_view sql, std::span<const SqlValue> params) {
    std::vector<std::string> texts(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    for (size_t i = 0; i < params.size(); ++i) {
      if (const auto* n = std::get_if<int64_t>(&params[i])) {
        texts[i] = std::to_string(*n);
        values[i] = texts[i].c_str();
      } else if (const auto* s = std::get_if<std::string>(&params[i])) {
        values[i] = s->c_str();
      }
    }
    PGresult* res = PQexecParams(conn_, std::string(sql).c_str(), static_cast<int>(params.size()),
                                 nullptr, values.data(), nullptr, nullptr, 0);
    const ExecStatusType st = res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return res;
    const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
    const std::string_view sqlstate = state != nullptr ? state : "";
    std::string message = "PostgreSQL: " + Redact(Trimmed(res != nullptr ? PQresultErrorMessage(res)
                                                                         : PQerrorMessage(conn_)));
    if (res != nullptr) PQclear(res);
    if (PQstatus(conn_) != CONNECTION_OK || sqlstate.substr(0, 2) == "08") {
      return Unavailable(std::move(message));
    }
    if (sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "57014") {
      return Aborted(std::move(message));
    }
    return Internal(std::move(message));
  }

  PGconn* conn_;
  PGcancel* cancel_;
};

class PgFactory final : public ConnectionFactory {
 public:
  explicit PgFactory(std::string conninfo) : conninfo_(std::move(conninfo)) {}
  Dialect dialect() const override { return Dialect::kPostgreSQL; }
  Result<std::unique_ptr<Connection>> Open() override {
    PGconn* conn = PQconnectdb(conninfo_.c_str());
    if (conn == nullptr) return Unavailable("PostgreSQL: out of memory opening a connection");
    if (PQstatus(conn) != CONNECTION_OK) {
      std::string message =
          "PostgreSQL connection failed: " + Redact(Trimmed(PQerrorMessage(conn)));
      PQfinish(conn);
      return Unavailable(std::move(message));
    }
    return std::unique_ptr<Connection>(new PgConnection(conn));
  }

 private:
  std::string conninfo_;
};

// ---- SQLite ----

Status SqliteError(sqlite3* db, int rc) {
  std::string message = "SQLite: " + Redact(sqlite3_errmsg(db));
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return Unavailable(std::move(message));
  if (primary == SQLITE_INTERRUPT) return Aborted(std::move(message));
  return Internal(std::move(message));
}

class SqliteConnection final : public Connection {
 public:
  explicit SqliteConnection(sqlite3* db) : db_(db) {}
  ~SqliteConnection() override { sqlite3_close_v2(db_); }

  Dialect dialect() const override { return Dialect::kSQLite; }
  sqlite3* sqlite() override { return db_; }
  bool healthy() const override { return true; }

  Result<int64_t> Execute(std::string_view sql, std::span<const SqlValue> params) override {
    QB_RETURN_IF_ERROR(Run(sql, params, nullptr));
    return static_cast<int64_t>(sqlite3_changes64(db_));
  }
  Result<SqlRows> Query(std::string_view sql, std::span<const SqlValue> params) override {
    SqlRows out;
    QB_RETURN_IF_ERROR(Run(sql, params, &out));
    return out;
  }
  Status Begin(bool write) override {
    return Run(write ? "BEGIN IMMEDIATE" : "BEGIN", {}, nullptr);
  }
  Status Commit() override { return Run("COMMIT", {}, nullptr); }
  Status Rollback() override {
    if (sqlite3_get_autocommit(db_) != 0) return Status::Ok();  // already rolled back
    return Run("ROLLBACK", {}, nullptr);
  }
  void Interrupt() override { sqlite3_interrupt(db_); }

 private:
  Status Run(std::string_view sql, std::span<const SqlValue> params, SqlRows* out) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db_, rc);
    for (size_t i = 0; i < params.size() && rc == SQLITE_OK; ++i) {
      const int at = static_cast<int>(i) + 1;
      if (const auto* n = std::get_if<int64_t>(&params[i])) {
        rc = sqlite3_bind_int64(stmt, at, *n);
      } else if (const auto* s = std::get_if<std::string>(&params[i])) {
        rc = sqlite3_bind_text(stmt, at, s->data(), static_cast<int>(s->size()), SQLITE_TRANSIENT);
      } else {
        rc = sqlite3_bind_null(stmt, at);
      }
    }
    if (rc != SQLITE_OK) {
      Status error = SqliteError(db_, rc);
      sqlite3_finalize(stmt);
      return error;
    }
    if (out != nullptr) {
      for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
        out->columns.emplace_back(sqlite3_column_name(stmt, c));
      }
    }
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      if (out == nullptr) continue;
      auto& row = out->rows.emplace_back();
      for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
        const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
        if (text == nullptr) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(std::string(text, static_cast<size_t>(sqlite3_column_bytes(stmt, c))));
        }
      }
    }
    Status status = rc == SQLITE_DONE ? Status::Ok() : SqliteError(db_, rc);
    sqlite3_finalize(stmt);
    return status;
  }

  sqlite3* db_;
};

class SqliteFactory final : public ConnectionFactory {
 public:
  SqliteFactory(std::string path, int64_t busy_timeout_ms)
      : path_(std::move(path)), busy_timeout_ms_(busy_timeout_ms) {}
  Dialect dialect() const override { return Dialect::kSQLite; }
  Result<std::unique_ptr<Connection>> Open() override {
    if (path_.empty()) return InvalidArgument("the SQLite database path is empty");
    sqlite3* db = nullptr;
    const int rc = sqlite3_open_v2(
        path_.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
        nullptr);
    if (rc != SQLITE_OK) {
      std::string message = "SQLite: cannot open the database: " +
                            Redact(db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
      sqlite3_close_v2(db);
      return Unavailable(std::move(message));
    }
    sqlite3_busy_timeout(db, static_cast<int>(busy_timeout_ms_));
    auto conn = std::make_unique<SqliteConnection>(db);
    auto wal = conn->Query("PRAGMA journal_mode=WAL", {});
    if (!wal.ok()) return wal.status();
    return std::unique_ptr<Connection>(std::move(conn));
  }

 private:
  std::string path_;
  int64_t busy_timeout_ms_;
};

}  // namespace

std::unique_ptr<ConnectionFactory> PostgresConnections(std::string conninfo) {
  return std::make_unique<PgFactory>(std::move(conninfo));
}

std::unique_ptr<ConnectionFactory> SqliteConnections(std::string path, int64_t busy_timeout_ms) {
  return std::make_unique<SqliteFactory>(std::move(path), busy_timeout_ms);
}

}  // namespace queuebox::inbox
