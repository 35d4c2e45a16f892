#include "store/postgres/pg_connection.h"

#include <cstring>
#include <utility>

namespace queuebox::store {
namespace {

bool StartsWith(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool IsTransientState(std::string_view state) {
  return state.substr(0, 2) == "08" || state == "57P01" || state == "57P02" || state == "57P03" ||
         state == "53300" || state == "40001" || state == "40P01";
}

}  // namespace

Result<std::string> ToLibpqUrl(const std::string& url) {
  if (url.empty()) {
    return InvalidArgument(
        "database.url is empty: give a postgresql:// or jdbc:postgresql:// URL.");
  }
  if (!StartsWith(url, "jdbc:")) {
    if (StartsWith(url, "postgresql://") || StartsWith(url, "postgres://") ||
        url.find('=') != std::string::npos) {
      return url;
    }
    return InvalidArgument(
        "database.url must be a postgresql://, jdbc:postgresql:// URL or a "
        "libpq key=value string.");
  }
  constexpr std::string_view kJdbc = "jdbc:postgresql:";
  if (!StartsWith(url, kJdbc)) {
    return InvalidArgument("database.url: only jdbc:postgresql: URLs are supported.");
  }
  std::string rest = url.substr(kJdbc.size());
  std::string query;
  if (auto q = rest.find('?'); q != std::string::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  // jdbc:postgresql://host:port/db, jdbc:postgresql:db (local), jdbc:postgresql:/ (defaults).
  std::string out =
      StartsWith(rest, "//") ? "postgresql:" + rest : "postgresql:///" + (rest == "/" ? "" : rest);
  std::vector<std::string> params;
  size_t start = 0;
  while (start <= query.size() && !query.empty()) {
    size_t amp = query.find('&', start);
    std::string pair =
        query.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    start = amp == std::string::npos ? query.size() + 1 : amp + 1;
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string key = pair.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    if (key == "user" || key == "password" || key == "sslmode") {
      params.push_back(key + "=" + value);
    } else if (key == "ssl") {
      if (value == "true") params.push_back("sslmode=require");
    } else if (key == "ApplicationName" || key == "applicationName") {
      params.push_back("application_name=" + value);
    } else if (key == "connectTimeout" || key == "loginTimeout") {
      params.push_back("connect_timeout=" + value);
    } else if (key == "currentSchema") {
      params.push_back("options=-c%20search_path%3D" + value);
    } else {
      return InvalidArgument("database.url: the JDBC parameter '" + key +
                             "' has no libpq equivalent; remove it or use a postgresql:// URL.");
    }
  }
  for (size_t i = 0; i < params.size(); ++i) out += (i == 0 ? "?" : "&") + params[i];
  return out;
}

Result<PgSettings> PgSettingsFor(const DatabaseConfig& config) {
  QB_ASSIGN_OR_RETURN(std::string url, ToLibpqUrl(config.url));
  PgSettings settings;
  settings.url = std::move(url);
  settings.username = config.username;
  settings.password = config.password;
  settings.connection_timeout_ms = config.connection_timeout_ms;
  settings.pool_size = config.pool_size;
  return settings;
}

Result<std::unique_ptr<PgConnection>> PgConnection::Connect(const PgSettings& s) {
  int64_t ms = s.connection_timeout_ms > 0 ? s.connection_timeout_ms : 30000;
  std::string timeout = std::to_string((ms + 999) / 1000);
  std::vector<const char*> keys{"dbname", "fallback_application_name", "connect_timeout"};
  std::vector<const char*> values{s.url.c_str(), "queuebox", timeout.c_str()};
  if (!s.username.empty()) {
    keys.push_back("user");
    values.push_back(s.username.c_str());
  }
  if (!s.password.empty()) {
    keys.push_back("password");
    values.push_back(s.password.c_str());
  }
  if (!s.application_name.empty()) {
    keys.push_back("application_name");
    values.push_back(s.application_name.c_str());
  }
  // After the URL, so they win; only the first dbname is expanded as a URL.
  for (const auto& [key, value] : {std::pair<const char*, const std::string*>{"host", &s.host},
                                   {"port", &s.port},
                                   {"dbname", &s.dbname},
                                   {"replication", &s.replication}}) {
    if (value->empty()) continue;
    keys.push_back(key);
    values.push_back(value->c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  std::unique_ptr<PgConnection> c(new PgConnection(conn, s.password));
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    return c->ConnectionError("Cannot connect to PostgreSQL");
  }
  return c;
}

PgConnection::~PgConnection() {
  if (conn_ != nullptr) PQfinish(conn_);
}

std::string PgConnection::Scrub(std::string text) const {
  if (!password_.empty()) {
    for (size_t p = text.find(password_); p != std::string::npos; p = text.find(password_, p + 3)) {
      text.replace(p, password_.size(), "***");
    }
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

Status PgConnection::ConnectionError(const char* what) const {
  std::string msg = conn_ != nullptr ? PQerrorMessage(conn_) : "out of memory";
  if (msg.find("password authentication failed") != std::string::npos) {
    return PermissionDenied(std::string(what) + ": " + Scrub(msg));
  }
  return Unavailable(std::string(what) + ": " + Scrub(msg));
}

bool PgConnection::Unusable() const {
  return conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK ||
         PQtransactionStatus(conn_) != PQTRANS_IDLE;
}

Status PgConnection::FromResult(PGresult* res, const char* what) const {
  ExecStatusType st = PQresultStatus(res);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Status::Ok();
  if (res == nullptr || PQstatus(conn_) != CONNECTION_OK) {
    return ConnectionError("The connection to PostgreSQL was lost");
  }
  const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
  const char* primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
  std::string sqlstate = state != nullptr ? state : "";
  std::string msg = std::string(what) + ": " +
                    Scrub(primary != nullptr ? primary : PQresultErrorMessage(res)) +
                    (sqlstate.empty() ? "" : " (SQLSTATE " + sqlstate + ")");
  if (IsTransientState(sqlstate)) return Unavailable(msg);
  if (StartsWith(sqlstate, "22") || StartsWith(sqlstate, "23")) return InvalidArgument(msg);
  return Internal(msg);
}

Result<SqlRows> PgConnection::Query(const std::string& sql, const std::vector<SqlParam>& params,
                                    int64_t* changes, Plan plan) {
  QB_ASSIGN_OR_RETURN(SqlTable table, QueryTable(sql, params, changes, plan));
  return std::move(table.rows);
}

Result<SqlTable> PgConnection::QueryTable(const std::string& sql,
                                          const std::vector<SqlParam>& params, int64_t* changes,
                                          Plan plan) {
  std::string name;
  if (plan == Plan::kPerCall) {
    // The unnamed statement: planned with these parameter values (see Plan).
  } else if (auto it = prepared_.find(sql); it != prepared_.end()) {
    name = it->second;
  } else {
    name = "qb" + std::to_string(prepared_.size() + 1);
    PGresult* res = PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr);
    Status s = FromResult(res, "PostgreSQL");
    PQclear(res);
    if (!s.ok()) return s;
    prepared_.emplace(sql, name);
  }
  std::vector<std::string> text(params.size());
  std::vector<const char*> values(params.size(), nullptr);
  for (size_t i = 0; i < params.size(); ++i) {
    if (const auto* n = std::get_if<int64_t>(&params[i])) {
      text[i] = std::to_string(*n);
      values[i] = text[i].c_str();
    } else if (const auto* t = std::get_if<std::string>(&params[i])) {
      values[i] = t->c_str();
    }
  }
  PGresult* res = plan == Plan::kPerCall
                      ? PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                                     values.data(), nullptr, nullptr, 0)
                      : PQexecPrepared(conn_, name.c_str(), static_cast<int>(params.size()),
                                       values.data(), nullptr, nullptr, 0);
  Status s = FromResult(res, "PostgreSQL");
  if (!s.ok()) {
    PQclear(res);
    return s;
  }
  SqlTable table;
  SqlRows& rows = table.rows;
  int n = PQntuples(res), f = PQnfields(res);
  for (int j = 0; j < f; ++j) table.columns.emplace_back(PQfname(res, j));
  rows.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    SqlRow row;
    row.reserve(static_cast<size_t>(f));
    for (int j = 0; j < f; ++j) {
      if (PQgetisnull(res, i, j)) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(
            std::string(PQgetvalue(res, i, j), static_cast<size_t>(PQgetlength(res, i, j))));
      }
    }
    rows.push_back(std::move(row));
  }
  if (changes != nullptr) *changes = ParseInt(PQcmdTuples(res)).value_or(0);
  PQclear(res);
  return table;
}

Status PgConnection::Exec(const std::string& sql) {
  PGresult* res = PQexec(conn_, sql.c_str());
  Status s = FromResult(res, "PostgreSQL");
  PQclear(res);
  return s;
}

PgPool::~PgPool() = default;

PgPool::Lease::~Lease() {
  if (pool_ != nullptr && conn_ != nullptr) pool_->Return(std::move(conn_));
}

Result<PgPool::Lease> PgPool::Acquire() {
  const int size = settings_.pool_size > 0 ? settings_.pool_size : 1;
  const int64_t wait_ms =
      settings_.connection_timeout_ms > 0 ? settings_.connection_timeout_ms : 30000;
  std::unique_lock<std::mutex> lock(mu_);
  auto available = [&] { return !idle_.empty() || open_ < size; };
  bool free = available();
  if (!free) {
    ++waiting_;
    free = cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), available);
    --waiting_;
  }
  if (!free) {
    ++timeouts_;
    return Unavailable("All " + std::to_string(size) +
                       " PostgreSQL connections (database.poolSize) stayed busy for " +
                       std::to_string(wait_ms) + " ms.");
  }
  if (!idle_.empty()) {
    std::unique_ptr<PgConnection> conn = std::move(idle_.back());
    idle_.pop_back();
    return Lease(this, std::move(conn));
  }
  ++open_;
  lock.unlock();
  Result<std::unique_ptr<PgConnection>> conn = PgConnection::Connect(settings_);
  if (!conn.ok()) {
    lock.lock();
    --open_;
    cv_.notify_one();
    return conn.status();
  }
  return Lease(this, std::move(conn).value());
}

ConnectionPoolStats PgPool::Stats() {
  std::lock_guard<std::mutex> lock(mu_);
  ConnectionPoolStats s;
  s.idle = static_cast<int>(idle_.size());
  s.active = open_ - s.idle;
  s.pending = waiting_;
  s.max = settings_.pool_size > 0 ? settings_.pool_size : 1;
  s.timeouts = timeouts_;
  return s;
}

void PgPool::Return(std::unique_ptr<PgConnection> conn) {
  bool drop = conn->Unusable();
  if (drop) conn.reset();  // closed outside the lock; the next Acquire reconnects
  std::lock_guard<std::mutex> lock(mu_);
  if (drop) {
    --open_;
  } else {
    idle_.push_back(std::move(conn));
  }
  cv_.notify_one();
}

}  // namespace queuebox::store
