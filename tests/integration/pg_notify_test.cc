// The LISTEN/NOTIFY wake-up (store/postgres/pg_notify.h) against a real PostgreSQL: migration V13's
// trigger notifies, the listener wakes its callback, folds a burst of commits into few wakes,
// reconnects after its backend is terminated, and stops promptly in every state.
#include "store/postgres/pg_notify.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "core/log.h"
#include "queuebox/store.h"
#include "store/open_store.h"
#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/log_capture.h"
#include "testing/pg.h"

namespace queuebox::store {
namespace {

using namespace std::chrono_literals;
using testing::TempPgDatabase;

// Polls `done` until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

class PgNotifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    db_ = std::make_unique<TempPgDatabase>(url);
    config_.type = "postgresql";
    config_.url = db_->url();
    config_.connection_timeout_ms = 5000;
    auto store = OpenStore(config_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto report = (*store)->Migrate(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
  }

  std::unique_ptr<PgNotifyListener> StartListener(PgNotifyOptions options = {}) {
    auto listener = PgNotifyListener::Create(
        config_, [this] { ++calls_; }, options);
    EXPECT_TRUE(listener.ok()) << listener.status().ToString();
    if (!listener.ok()) return nullptr;
    EXPECT_TRUE((*listener)->Start().ok());
    return std::move(listener).value();
  }

  void InsertOne() { db_->Exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{}')"); }

  std::string ListenerPid() {
    return db_->Scalar(
        "SELECT coalesce(max(pid)::text, '') FROM pg_stat_activity WHERE application_name = "
        "'queuebox-listener' AND datname = current_database()");
  }

  std::unique_ptr<TempPgDatabase> db_;
  DatabaseConfig config_;
  std::atomic<int64_t> calls_{0};
};

TEST_F(PgNotifyTest, MigrationAddsADisabledStatementTriggerThatTheListenerEnables) {
  EXPECT_EQ(db_->Scalar("SELECT action_orientation || ' ' || action_timing || ' ' || "
                        "event_manipulation FROM information_schema.triggers WHERE "
                        "trigger_name = 'queuebox_outbox_notify'"),
            "STATEMENT AFTER INSERT");
  const std::string enabled =
      "SELECT tgenabled::text FROM pg_trigger WHERE tgname = 'queuebox_outbox_notify'";
  EXPECT_EQ(db_->Scalar(enabled), "D");  // no producer cost until the wake-up is turned on
  auto listener = StartListener();
  ASSERT_NE(listener, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return listener->listening(); }, 10s));
  EXPECT_EQ(db_->Scalar(enabled), "O");
}

TEST_F(PgNotifyTest, AMissingTriggerIsLoggedAndTheListenerStillListens) {
  testing::LogCapture logs;
  db_->Exec("DROP TRIGGER queuebox_outbox_notify ON outbox");
  auto listener = StartListener();
  ASSERT_NE(listener, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return listener->listening(); }, 10s));
  listener->Stop();
  const std::string lines = logs.All();
  EXPECT_THAT(lines, ::testing::HasSubstr("cannot use its trigger"));
  EXPECT_THAT(lines, ::testing::HasSubstr("is missing (migration V13)"));
  EXPECT_THAT(lines, ::testing::HasSubstr(
                         "ALTER TABLE \\\"outbox\\\" ENABLE TRIGGER queuebox_outbox_notify"));
}

TEST_F(PgNotifyTest, AnInsertWakesTheCallback) {
  auto listener = StartListener();
  ASSERT_NE(listener, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return listener->listening(); }, 10s));
  // The LISTEN itself wakes once (rows may have arrived while no one listened).
  EXPECT_EQ(listener->wakes(), 1);
  EXPECT_EQ(calls_.load(), 1);
  InsertOne();
  EXPECT_TRUE(WaitUntil([&] { return calls_.load() >= 2; }, 10s));
  EXPECT_EQ(listener->connections(), 1);
}

TEST_F(PgNotifyTest, ABurstOfCommitsWakesFarFewerTimesThanCommits) {
  auto listener = StartListener();  // default debounce: 5 ms
  ASSERT_NE(listener, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return listener->listening(); }, 10s));
  const int64_t before = calls_.load();
  // 1,000 single-row inserts, each its own transaction, sent as one script so they commit back
  // to back.
  std::string script;
  for (int i = 0; i < 1000; ++i) {
    script += "BEGIN; INSERT INTO outbox (topic, payload) VALUES ('t', '{}'); COMMIT;\n";
  }
  db_->Exec(script);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "1000");
  ASSERT_TRUE(WaitUntil([&] { return calls_.load() > before; }, 10s));
  // Wait for the trailing wake: the count stays put for 200 ms (far above the debounce).
  int64_t seen = -1;
  WaitUntil(
      [&] {
        int64_t now = calls_.load();
        if (now != seen) {
          seen = now;
          std::this_thread::sleep_for(200ms);
          return false;
        }
        return true;
      },
      20s);
  const int64_t wakes = calls_.load() - before;
  EXPECT_GE(wakes, 1);
  EXPECT_LT(wakes, 1000);
  RecordProperty("wakes_for_1000_commits", std::to_string(wakes));
}

TEST_F(PgNotifyTest, ReconnectsAfterItsBackendIsTerminatedAndWakesAgain) {
  auto listener = StartListener({.reconnect_initial_ms = 20});
  ASSERT_NE(listener, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return listener->listening(); }, 10s));
  std::string pid = ListenerPid();
  ASSERT_FALSE(pid.empty()) << "no backend with application_name queuebox-listener";
  EXPECT_EQ(db_->Scalar("SELECT pg_terminate_backend(" + pid + ")"), "t");
  // A new connection LISTENs again and wakes once for rows inserted while it was deaf.
  ASSERT_TRUE(
      WaitUntil([&] { return listener->connections() >= 2 && listener->listening(); }, 20s));
  EXPECT_EQ(calls_.load(), 2);
  EXPECT_NE(ListenerPid(), pid);
  InsertOne();
  EXPECT_TRUE(WaitUntil([&] { return calls_.load() >= 3; }, 10s));
}

TEST_F(PgNotifyTest, StopReturnsPromptlyWhileListening) {
  // A long keepalive: without the stop event the thread would sit in poll() for a minute.
  auto listener = StartListener({.keepalive = 60000ms});
  ASSERT_NE(listener, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return listener->listening(); }, 10s));
  auto stopped = std::async(std::launch::async, [&] { listener->Stop(); });
  ASSERT_EQ(stopped.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(listener->listening());
  EXPECT_TRUE(WaitUntil([&] { return ListenerPid().empty(); }, 10s)) << "connection left open";
  listener->Stop();  // idempotent
}

TEST_F(PgNotifyTest, StopReturnsPromptlyWhileWaitingToReconnect) {
  // Nothing listens on this port: every connect is refused, and the next try is a minute away.
  config_.url = "postgresql://127.0.0.1:" + std::to_string(testing::UnusedLoopbackPort()) + "/x";
  auto listener = StartListener({.reconnect_initial_ms = 120000, .reconnect_cap_ms = 120000});
  ASSERT_NE(listener, nullptr);
  EXPECT_FALSE(listener->listening());
  auto stopped = std::async(std::launch::async, [&] { listener->Stop(); });
  ASSERT_EQ(stopped.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(listener->connections(), 0);
  EXPECT_EQ(calls_.load(), 0);
}

TEST_F(PgNotifyTest, CreateRejectsABadUrlAndSecondStart) {
  DatabaseConfig bad = config_;
  bad.url = "mysql://nope";
  auto refused = PgNotifyListener::Create(bad, [] {});
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  auto listener = StartListener();
  ASSERT_NE(listener, nullptr);
  EXPECT_EQ(listener->Start().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace queuebox::store
