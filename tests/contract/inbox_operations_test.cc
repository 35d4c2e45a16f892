// Inbox operations end to end through src/admin on SQLite and PostgreSQL: retention.inbox,
// replay and dead list of the inbox, `queuebox status` with the inbox, and the inbox metrics
// fed by the inbox relay (QueueBox reference §5.4-5.5, §13.3).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "admin/cli.h"
#include "admin/metrics.h"
#include "admin/replay.h"
#include "admin/retention.h"
#include "core/inbox_relay.h"
#include "store_test_support.h"
#include "testing/status_matchers.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using testing::StoreDb;
using Kind = InboxStoreOutcome::Kind;

class InboxOperationsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string pg_url;
    if (GetParam() == "postgresql") QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
    db_ = std::make_unique<StoreDb>(GetParam());
    db_->Create(pg_url);
    store_ = db_->Open();
    ASSERT_NE(store_, nullptr);
    auto report = store_->Migrate(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    inbox_ = store_->inbox();
    ASSERT_NE(inbox_, nullptr);
  }

  std::string Add(std::string key, std::string source = "stripe",
                  std::optional<std::string> aggregate = std::nullopt) {
    NewInboxMessage m;
    m.source = std::move(source);
    m.idempotency_key = std::move(key);
    m.aggregate_id = std::move(aggregate);
    m.event_type = "payment.succeeded";
    m.payload = "{}";
    auto out = inbox_->Store(std::span<const NewInboxMessage>(&m, 1));
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok() || out->size() != 1 || (*out)[0].kind != Kind::kStored) return "";
    return (*out)[0].id;
  }
  // Sets a row's state and makes it `hours` old by created_at.
  void Set(const std::string& id, const std::string& state, int hours) {
    db_->Exec("UPDATE inbox SET state = '" + state +
              "', created_at = " + db_->NowPlus(-3600 * hours) + " WHERE id = '" + id + "'");
  }
  std::string StateOf(const std::string& id) {
    return db_->Scalar("SELECT state FROM inbox WHERE id = '" + id + "'");
  }
  std::string Count() { return db_->Scalar("SELECT COUNT(*) FROM inbox"); }

  std::unique_ptr<StoreDb> db_;
  std::unique_ptr<OutboxStore> store_;
  InboxStore* inbox_ = nullptr;
};

TEST_P(InboxOperationsTest, RetentionAgeDeletesOldFinishedInboxRowsByCreatedAtAndNeverActiveOnes) {
  const std::string processed_old = Add("k1"), dead_old = Add("k2"), pending_old = Add("k3"),
                    processing_old = Add("k4"), processed_new = Add("k5");
  Set(processed_old, "processed", 48);
  Set(dead_old, "dead", 48);
  Set(pending_old, "pending", 48);
  Set(processing_old, "processing", 48);
  Set(processed_new, "processed", 0);
  RetentionConfig config;
  config.enabled = true;
  config.inbox.policy = "AGE";
  config.inbox.max_age_ms = 24 * 3600 * 1000;
  config.inbox.batch_size = 1;  // several batches
  Metrics metrics;
  RetentionService service(store_.get(), inbox_, config, &metrics);
  auto deleted = service.RunOnceInbox();
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 2);
  EXPECT_EQ(Count(), "3");
  EXPECT_EQ(StateOf(pending_old), "pending");
  EXPECT_EQ(StateOf(processing_old), "processing");
  EXPECT_EQ(StateOf(processed_new), "processed");
  EXPECT_THAT(metrics.Render(), HasSubstr("table=\"inbox\""));
}

TEST_P(InboxOperationsTest, RetentionCountKeepsTheNewestFinishedInboxRowsPerState) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(Add("k" + std::to_string(i)));
    Set(ids.back(), "processed", 10 - i);  // ids[3] is the newest
  }
  const std::string pending = Add("p");
  Set(pending, "pending", 100);
  RetentionConfig config;
  config.enabled = true;
  config.inbox.policy = "COUNT";
  config.inbox.max_count = 2;
  RetentionService service(store_.get(), inbox_, config, nullptr);
  auto deleted = service.RunOnceInbox();
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 2);
  EXPECT_EQ(db_->Scalar("SELECT COUNT(*) FROM inbox WHERE id IN ('" + ids[2] + "', '" + ids[3] +
                        "', '" + pending + "')"),
            "3");
}

TEST_P(InboxOperationsTest, ReplayOfTheInboxBySourceMovesOnlyFinishedRowsOfThatSource) {
  const std::string dead_a = Add("k1", "a"), dead_b = Add("k2", "b"), processing_a = Add("k3", "a");
  Set(dead_a, "dead", 1);
  Set(dead_b, "dead", 1);
  Set(processing_a, "processing", 1);
  auto request = ParseReplayRequest(R"({"table":"inbox","source":"a"})");
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  auto moved = RunInboxReplay(*request, *inbox_);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 1);
  EXPECT_EQ(StateOf(dead_a), "pending");
  EXPECT_EQ(StateOf(dead_b), "dead");
  EXPECT_EQ(StateOf(processing_a), "processing");
  // Outbox filters do not apply to the inbox.
  EXPECT_FALSE(ParseReplayRequest(R"({"table":"inbox","topic":"x"})").ok());
}

TEST_P(InboxOperationsTest, DeadListAndStatusShowTheInbox) {
  const std::string dead = Add("k1", "stripe");
  Set(dead, "dead", 1);
  db_->Exec("UPDATE inbox SET last_error = 'topic rendered empty' WHERE id = '" + dead + "'");
  Add("k2", "stripe");
  Add("k3", "github");
  std::ostringstream out, err;
  EXPECT_EQ(RunInboxDeadListCommand(*inbox_, 10, true, out, err), 0) << err.str();
  auto list = nlohmann::json::parse(out.str());
  ASSERT_EQ(list.size(), 1u) << out.str();
  EXPECT_THAT(out.str(), HasSubstr(dead));
  EXPECT_THAT(out.str(), HasSubstr("topic rendered empty"));

  std::ostringstream status_out, status_err;
  Config config;
  config.database = db_->config();
  EXPECT_EQ(RunStatusCommand(*store_, nullptr, config, true, status_out, status_err, inbox_), 0)
      << status_err.str();
  auto status = nlohmann::json::parse(status_out.str());
  ASSERT_TRUE(status.contains("inbox")) << status_out.str();
  EXPECT_THAT(status["inbox"].dump(), HasSubstr("stripe"));
  EXPECT_THAT(status["inbox"].dump(), HasSubstr("github"));
}

TEST_P(InboxOperationsTest, TheInboxRelayFeedsTheInboxMetrics) {
  Add("k1", "stripe", "cus_1");
  Add("k2", "stripe");
  NewInboxMessage blank;  // no event type: the default template renders empty
  blank.source = "stripe";
  blank.idempotency_key = "k3";
  blank.payload = "{}";
  ASSERT_TRUE(inbox_->Store(std::span<const NewInboxMessage>(&blank, 1)).ok());
  Metrics metrics;
  InboxRelayOptions options;
  auto relay = InboxRelay::Create(options, inbox_, inbox_, &metrics);
  ASSERT_TRUE(relay.ok());
  auto n = (*relay)->RunCycle();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2);
  const std::string text = metrics.Render();
  EXPECT_THAT(text, HasSubstr("queuebox_inbox_messages_total{status=\"forwarded\"} 2"));
  EXPECT_THAT(text, HasSubstr("queuebox_inbox_relay_errors_total 1"));
  EXPECT_THAT(text, HasSubstr("queuebox_inbox_oldest_pending_age_seconds"));
}

INSTANTIATE_TEST_SUITE_P(Dialects, InboxOperationsTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace queuebox
