// database.h: the database seam of the QueueBox inbox pull client (queuebox::inbox, library
// `queuebox_inbox`): connections to PostgreSQL (libpq) and SQLite, and the dialect-neutral
// Transaction handle a pull handler writes its business rows through.
//
// Ownership: a ConnectionFactory opens connections; the PullWorker owns those it opens (one for
// claims, one for lease renewals, one per handler slot) and closes them when it is destroyed.
// A Transaction handed to a handler is borrowed for the duration of that call only.
//
// Thread-safety: a ConnectionFactory is thread-safe. A Connection is used by one thread at a time,
// except Interrupt(), which any thread may call while another runs a statement.
//
// Parameters are positional, in the dialect's own markers: $1, $2 ... on PostgreSQL; ?1, ?2 ...
// (or ?) on SQLite. Values are NULL, a 64-bit integer or text.
//
// Errors (Status codes): kUnavailable when the connection is broken or the database is busy
// (PostgreSQL SQLSTATE class 08, SQLITE_BUSY / SQLITE_LOCKED), kAborted for a serialization
// failure, a deadlock or a statement stopped by Interrupt(), kInvalidArgument for a bad connection
// string or path, kInternal for any other database error. Messages are the
// database's, passed through the project's redaction (no password of a connection string reaches
// a message).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "queuebox/status.h"

struct pg_conn;
struct sqlite3;

namespace queuebox::inbox {

enum class Dialect { kPostgreSQL, kSQLite };

// "postgresql" or "sqlite".
std::string_view DialectName(Dialect dialect);

// A parameter value: SQL NULL, an integer or text.
using SqlValue = std::variant<std::monostate, int64_t, std::string>;

// The rows of a query as text (PostgreSQL's text format; SQLite's text of each value); a NULL is
// nullopt.
struct SqlRows {
  std::vector<std::string> columns;
  std::vector<std::vector<std::optional<std::string>>> rows;
  // The position of column `name`, or -1 when the result has none.
  int Column(std::string_view name) const;
};

// The open transaction a handler works in. The worker began it on the handler's connection and
// alone commits or rolls it back: never run BEGIN, COMMIT or ROLLBACK through it.
class Transaction {
 public:
  virtual ~Transaction() = default;
  virtual Dialect dialect() const = 0;
  // Runs one statement; the number of rows it changed (0 for a query).
  virtual Result<int64_t> Execute(std::string_view sql, std::span<const SqlValue> params = {}) = 0;
  // Runs one statement and returns its rows.
  virtual Result<SqlRows> Query(std::string_view sql, std::span<const SqlValue> params = {}) = 0;
  // The native connection, for code that uses libpq or sqlite3 directly (same transaction);
  // nullptr for the other dialect. Borrowed: do not close it or end its transaction.
  virtual pg_conn* postgres() { return nullptr; }
  virtual sqlite3* sqlite() { return nullptr; }
};

// One database connection. Outside Begin() .. Commit()/Rollback() every statement commits on its
// own.
class Connection : public Transaction {
 public:
  // BEGIN. `write` = true takes SQLite's write lock at once (BEGIN IMMEDIATE); PostgreSQL ignores
  // it.
  virtual Status Begin(bool write = false) = 0;
  virtual Status Commit() = 0;
  virtual Status Rollback() = 0;
  // Asks the database to stop the statement that runs now on this connection (PQcancel,
  // sqlite3_interrupt); that statement then fails. Thread-safe; a no-op when nothing runs.
  virtual void Interrupt() = 0;
  // False once the connection is broken (it must be replaced).
  virtual bool healthy() const = 0;
};

class ConnectionFactory {
 public:
  virtual ~ConnectionFactory() = default;
  virtual Dialect dialect() const = 0;
  // A new connection; thread-safe.
  virtual Result<std::unique_ptr<Connection>> Open() = 0;
};

// Connections to PostgreSQL from a libpq connection string or URI
// ("postgresql://user:secret@host:5432/db"). Nothing connects until Open().
std::unique_ptr<ConnectionFactory> PostgresConnections(std::string conninfo);

// Connections to the SQLite database file at `path`, each with a busy timeout of busy_timeout_ms
// (writers wait for the write lock instead of failing) and WAL journal mode (readers never block
// the writer). kInvalidArgument from Open() for an empty path.
std::unique_ptr<ConnectionFactory> SqliteConnections(std::string path,
                                                     int64_t busy_timeout_ms = 30000);

}  // namespace queuebox::inbox
