// pg_server.h: a private PostgreSQL server for one test (scenario S6 stops and starts it, which
// must not disturb the shared test server). initdb into a temp folder, trust auth, loopback,
// a free port; Stop()/Start() toggle it; the destructor stops it and removes the folder.
// Needs root (it runs the server as user postgres, as scripts/services.sh does).
#pragma once

#include <string>

#include "queuebox/status.h"
#include "testing/process.h"

namespace queuebox::testing {

class PrivatePostgres {
 public:
  // `settings`: more server settings, e.g. "-c wal_level=logical" (change capture).
  explicit PrivatePostgres(std::string settings = "");
  ~PrivatePostgres();
  PrivatePostgres(const PrivatePostgres&) = delete;
  PrivatePostgres& operator=(const PrivatePostgres&) = delete;

  Status Init();  // initdb + start; kUnavailable with the log on failure
  Status Start();
  Status Stop();  // fast shutdown: connections are cut
  int port() const { return port_; }
  // libpq URI of database `postgres` as user postgres.
  std::string url() const;

 private:
  std::string dir_;
  std::string settings_;
  int port_ = 0;
  bool running_ = false;
};

}  // namespace queuebox::testing
