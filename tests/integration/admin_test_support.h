// admin_test_support.h: a migrated store of either dialect (StoreDb) plus a running AdminServer
// on ephemeral loopback ports, shared by the admin_* and retention_* integration tests.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "admin/admin_server.h"
#include "admin/metrics.h"
#include "contract/store_test_support.h"
#include "queuebox/config.h"
#include "testing/env.h"

namespace queuebox::testing {

// "sqlite" always runs; "postgresql" needs QB_TEST_PG_URL (skips outside CI without it).
class AdminStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string pg_url;
    if (GetParam() == "postgresql") {
      QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
      pg_url_ = pg_url;
    }
    db_ = std::make_unique<StoreDb>(GetParam());
    db_->Create(pg_url);
    store_ = db_->Open();
    ASSERT_NE(store_, nullptr);
    auto migrated = store_->Migrate(std::nullopt);
    ASSERT_TRUE(migrated.ok()) << migrated.status().ToString();
    config_.server.http_port = 0;
    config_.server.address = "127.0.0.1";
  }
  // Stops the server when destroyed. A test declares one right after the locals its handlers
  // and health checks read: Stop waits for a check that outlived its request, so none reads a
  // local after the body returns (TearDown runs after the locals are gone), even on a failed
  // ASSERT.
  struct StopsServer {
    AdminStoreTest* test;
    ~StopsServer() {
      if (test->server_) test->server_->Stop(std::chrono::milliseconds(0));
    }
  };

  void TearDown() override {
    if (server_) server_->Stop(std::chrono::milliseconds(0));
    server_.reset();
    store_.reset();
  }

  // Inserts a row and moves it to `state`; created_at set when given (ISO text, UTC).
  std::string Row(const std::string& topic, const std::string& state,
                  std::optional<std::string> created_at = std::nullopt) {
    NewOutboxRow r;
    r.topic = topic;
    r.payload = R"({"n":1})";
    auto id = store_->Insert(r);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    if (!id.ok()) return "";
    std::string set = "state = '" + state + "'";
    if (state == "dead" || state == "sent") set += ", attempt = 3, last_error = 'boom'";
    if (state == "processing") {
      set += ", claim_token = '" + std::string("00000000-0000-4000-8000-000000000001") +
             "', claimed_at = " + db_->Now() + ", lease_expires_at = " + db_->NowPlus(3600);
    }
    if (created_at) set += ", created_at = '" + *created_at + "'";
    db_->Exec("UPDATE outbox SET " + set + " WHERE id = '" + *id + "'");
    return *id;
  }

  // Starts the server with config_ and `deps` (store filled in).
  void StartServer(AdminServerDeps deps = {}) {
    deps.store = store_.get();
    auto s = AdminServer::Create(config_, std::move(deps));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
  }

  httplib::Client Data() { return httplib::Client("127.0.0.1", server_->data_port()); }
  httplib::Client Management() {
    return httplib::Client("127.0.0.1", server_->management_port().value_or(-1));
  }

  static nlohmann::json Json(const httplib::Result& r) {
    if (!r) return nullptr;
    return nlohmann::json::parse(r->body, nullptr, false);
  }

  std::string pg_url_;
  std::unique_ptr<StoreDb> db_;
  std::unique_ptr<OutboxStore> store_;
  Config config_;
  std::unique_ptr<AdminServer> server_;
};

inline std::string DialectName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace queuebox::testing
