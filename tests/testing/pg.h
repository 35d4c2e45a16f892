// pg.h: a throw-away PostgreSQL database per test (created on the server named by
// QB_TEST_PG_URL, dropped by the destructor), so tests never see each other's rows.
#pragma once

#include <libpq-fe.h>

#include <string>
#include <vector>

namespace queuebox::testing {

class TempPgDatabase {
 public:
  // admin_url: a libpq URI of a role that may CREATE DATABASE.
  explicit TempPgDatabase(const std::string& admin_url);
  ~TempPgDatabase();
  TempPgDatabase(const TempPgDatabase&) = delete;
  TempPgDatabase& operator=(const TempPgDatabase&) = delete;

  // libpq URI of the new database.
  const std::string& url() const { return url_; }
  const std::string& name() const { return name_; }
  // Runs SQL (several statements allowed); aborts the test binary on error.
  void Exec(const std::string& sql);
  // Runs one query and returns the rows as text (NULL -> "<null>").
  std::vector<std::vector<std::string>> Query(const std::string& sql);
  // First column of the first row.
  std::string Scalar(const std::string& sql);

 private:
  std::string admin_url_, name_, url_;
  PGconn* conn_ = nullptr;
};

// admin_url with its database path replaced by `db`.
std::string WithDatabase(const std::string& admin_url, const std::string& db);

}  // namespace queuebox::testing
