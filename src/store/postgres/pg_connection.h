// pg_connection.h: libpq connections for the PostgreSQL outbox store: URL handling, one
// connection with its prepared statements, and a small bounded pool.
//
// database.url forms (QueueBox reference §12.2 uses JDBC URLs):
//   postgresql://user:pw@host:port/db?sslmode=disable   (libpq URI, also postgres://)
//   host=127.0.0.1 port=5432 dbname=app                   (libpq key=value string)
//   jdbc:postgresql://host:port/db?user=..&password=..    (converted; see ToLibpqUrl)
// database.username / database.password override the URL's; connect_timeout comes from
// connection_timeout_ms (rounded up to seconds). The password never appears in a Status.
//
// Errors: a connection failure (connect, lost connection, SQLSTATE class 08, 57P0x, 53300) and a
// serialization failure / deadlock (40001, 40P01) are kUnavailable; bad input the database refused
// (SQLSTATE classes 22 and 23) is kInvalidArgument; any other refused statement is kInternal with
// the database's primary message (never its DETAIL, which can quote row values).
//
// Thread-safety: PgConnection is used by one thread at a time (the pool hands it out);
// PgPool is thread-safe.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "queuebox/status.h"
#include "store/common.h"

namespace queuebox::store {

// The libpq form of database.url: JDBC URLs become libpq URIs (user, password, sslmode,
// ssl=true, ApplicationName, connectTimeout, currentSchema are mapped; any other JDBC parameter
// is kInvalidArgument naming it). libpq URIs and key=value strings pass unchanged.
Result<std::string> ToLibpqUrl(const std::string& url);

struct PgSettings {
  std::string url;       // libpq form (ToLibpqUrl)
  std::string username;  // overrides the URL's when set
  std::string password;  // overrides the URL's when set; secret
  int64_t connection_timeout_ms = 30000;
  int pool_size = 10;
  // application_name of the session; empty: the URL's, else "queuebox". The LISTEN/NOTIFY
  // listener sets "queuebox-listener" so operators can find its backend in pg_stat_activity.
  std::string application_name;
  // Overrides of the URL's host, port and database (outbox.capture.connection.*); empty: the
  // URL's.
  std::string host, port, dbname;
  // "database" opens a logical replication connection (walsender; simple queries and
  // replication commands only), for change capture (store/postgres/capture/pg_capture.h).
  std::string replication;
};

// The settings of database.* as the store uses them: ToLibpqUrl(url), the username/password
// overrides, connectionTimeoutMs and poolSize. kInvalidArgument for a bad URL.
Result<PgSettings> PgSettingsFor(const DatabaseConfig& config);

class PgConnection {
 public:
  // kUnavailable when the server cannot be reached or refuses the login.
  static Result<std::unique_ptr<PgConnection>> Connect(const PgSettings& settings);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // How a statement is planned.
  //  - kCached: prepared once per connection (by its text); after five executions PostgreSQL may
  //    keep one generic plan for every parameter value.
  //  - kPerCall: sent as libpq's unnamed statement, so PostgreSQL plans it with the actual
  //    parameter values every time (a custom plan, well under a millisecond of planning). For
  //    the batch statements driven by arrays (`unnest($1::uuid[], ...)`): a generic plan cannot
  //    see the array's length and may join a large batch by a nested loop
  //    (docs/claim-plans.md, "Acknowledgement plan").
  enum class Plan { kCached, kPerCall };

  // One statement with $n parameters, executed with the extended protocol. `changes` gets the
  // command's row count (UPDATE/DELETE).
  Result<SqlRows> Query(const std::string& sql, const std::vector<SqlParam>& params = {},
                        int64_t* changes = nullptr, Plan plan = Plan::kCached);
  // Query, with the result's column names (read by name: SqlTable::Column).
  Result<SqlTable> QueryTable(const std::string& sql, const std::vector<SqlParam>& params = {},
                              int64_t* changes = nullptr, Plan plan = Plan::kCached);
  // SQL text that may hold several statements (simple protocol, no parameters).
  Status Exec(const std::string& sql);
  // True when the connection is gone or left inside a transaction; the pool drops it.
  bool Unusable() const;
  // The libpq handle, for the socket-level work of LISTEN (store/postgres/pg_notify.h). Owned by
  // this object; never null after a successful Connect.
  PGconn* native() const { return conn_; }

 private:
  PgConnection(PGconn* conn, std::string password) : conn_(conn), password_(std::move(password)) {}
  Status FromResult(PGresult* res, const char* what) const;
  Status ConnectionError(const char* what) const;
  std::string Scrub(std::string text) const;

  PGconn* conn_;
  std::string password_;                         // to scrub from messages
  std::map<std::string, std::string> prepared_;  // SQL text -> statement name
};

class PgPool {
 public:
  explicit PgPool(PgSettings settings) : settings_(std::move(settings)) {}
  ~PgPool();
  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;

  // A connection on loan; returned to the pool (or closed when unusable) by the destructor.
  class Lease {
   public:
    Lease(PgPool* pool, std::unique_ptr<PgConnection> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease();
    PgConnection* operator->() { return conn_.get(); }
    PgConnection& operator*() { return *conn_; }

   private:
    PgPool* pool_;
    std::unique_ptr<PgConnection> conn_;
  };

  // An idle connection, a new one while fewer than pool_size are open, or waits up to
  // connection_timeout_ms for one to come back (then kUnavailable).
  Result<Lease> Acquire();

  // Active, idle, waiting callers, size and timeouts so far (min 0: connections open on demand).
  ConnectionPoolStats Stats();

 private:
  void Return(std::unique_ptr<PgConnection> conn);

  PgSettings settings_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<PgConnection>> idle_;
  int open_ = 0;  // idle + on loan + being opened
  int waiting_ = 0;
  int64_t timeouts_ = 0;
};

}  // namespace queuebox::store
