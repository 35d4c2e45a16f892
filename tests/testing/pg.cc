#include "testing/pg.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace queuebox::testing {
namespace {

[[noreturn]] void Die(const std::string& what, PGconn* c) {
  std::fprintf(stderr, "TempPgDatabase: %s: %s\n", what.c_str(),
               c != nullptr ? PQerrorMessage(c) : "no connection");
  std::abort();
}

PGconn* Connect(const std::string& url) {
  PGconn* c = PQconnectdb(url.c_str());
  if (PQstatus(c) != CONNECTION_OK) Die("connect " + url, c);
  return c;
}

void ExecOn(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  ExecStatusType s = PQresultStatus(r);
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    std::string err = PQresultErrorMessage(r);
    PQclear(r);
    std::fprintf(stderr, "TempPgDatabase: %s\n  in: %s\n", err.c_str(), sql.c_str());
    std::abort();
  }
  PQclear(r);
}

}  // namespace

std::string WithDatabase(const std::string& admin_url, const std::string& db) {
  // postgresql://user@host:port/dbname?params
  std::string base = admin_url, query;
  if (auto q = base.find('?'); q != std::string::npos) {
    query = base.substr(q);
    base = base.substr(0, q);
  }
  auto scheme = base.find("://");
  auto slash = base.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  if (slash != std::string::npos) base = base.substr(0, slash);
  return base + "/" + db + query;
}

TempPgDatabase::TempPgDatabase(const std::string& admin_url) : admin_url_(admin_url) {
  std::random_device rd;
  std::mt19937_64 gen(rd());
  char buf[32];
  std::snprintf(buf, sizeof buf, "qb_test_%016llx", static_cast<unsigned long long>(gen()));
  name_ = buf;
  PGconn* admin = Connect(admin_url_);
  ExecOn(admin, "CREATE DATABASE " + name_);
  PQfinish(admin);
  url_ = WithDatabase(admin_url_, name_);
  conn_ = Connect(url_);
}

TempPgDatabase::~TempPgDatabase() {
  if (conn_ != nullptr) PQfinish(conn_);
  PGconn* admin = PQconnectdb(admin_url_.c_str());
  if (PQstatus(admin) == CONNECTION_OK) {
    // A logical replication slot (change capture) keeps WAL on the shared server and blocks
    // DROP DATABASE: end its sender and drop it first (a terminated sender frees it shortly).
    const std::string slots = "FROM pg_replication_slots WHERE database = '" + name_ + "'";
    for (int attempt = 0; attempt < 50; ++attempt) {
      PGresult* r = PQexec(admin, ("SELECT pg_terminate_backend(active_pid) " + slots +
                                   " AND active_pid IS NOT NULL; SELECT pg_drop_replication_slot("
                                   "slot_name) " +
                                   slots + " AND NOT active")
                                      .c_str());
      PQclear(r);
      r = PQexec(admin, ("SELECT count(*) " + slots).c_str());
      const bool none =
          PQresultStatus(r) == PGRES_TUPLES_OK && std::string(PQgetvalue(r, 0, 0)) == "0";
      PQclear(r);
      if (none) break;
      usleep(100 * 1000);
    }
    PGresult* r = PQexec(admin, ("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)").c_str());
    PQclear(r);
  }
  PQfinish(admin);
}

void TempPgDatabase::Exec(const std::string& sql) { ExecOn(conn_, sql); }

std::vector<std::vector<std::string>> TempPgDatabase::Query(const std::string& sql) {
  PGresult* r = PQexec(conn_, sql.c_str());
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    std::string err = PQresultErrorMessage(r);
    PQclear(r);
    std::fprintf(stderr, "TempPgDatabase: %s\n  in: %s\n", err.c_str(), sql.c_str());
    std::abort();
  }
  std::vector<std::vector<std::string>> rows;
  for (int i = 0; i < PQntuples(r); ++i) {
    std::vector<std::string> row;
    for (int j = 0; j < PQnfields(r); ++j) {
      row.push_back(PQgetisnull(r, i, j) ? "<null>" : PQgetvalue(r, i, j));
    }
    rows.push_back(std::move(row));
  }
  PQclear(r);
  return rows;
}

std::string TempPgDatabase::Scalar(const std::string& sql) {
  auto rows = Query(sql);
  return rows.empty() || rows[0].empty() ? std::string() : rows[0][0];
}

}  // namespace queuebox::testing
