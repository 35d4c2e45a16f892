// Retention of the outbox against a real store (QueueBox reference §5.5): AGE deletes sent and
// dead rows older than maxAge in batches and never an active row of any age; COUNT keeps the
// newest maxCount per state; the service loop runs, records metrics and stops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "admin/retention.h"
#include "integration/admin_test_support.h"

namespace queuebox::testing {
namespace {

class RetentionTest : public AdminStoreTest {
 protected:
  // A row in `state` whose updated_at (and created_at) lies `age_s` seconds in the past.
  std::string Aged(const std::string& state, int64_t age_s) {
    std::string id = Row("order.created", state);
    db_->Exec("UPDATE outbox SET updated_at = " + db_->NowPlus(-age_s) +
              ", created_at = " + db_->NowPlus(-age_s) + " WHERE id = '" + id + "'");
    return id;
  }
  bool Exists(const std::string& id) {
    return db_->Scalar("SELECT count(*) FROM outbox WHERE id = '" + id + "'") == "1";
  }
  RetentionConfig Age(int64_t max_age_ms, int batch) {
    RetentionConfig c;
    c.enabled = true;
    c.outbox.policy = "AGE";
    c.outbox.max_age_ms = max_age_ms;
    c.outbox.batch_size = batch;
    return c;
  }
};

TEST_P(RetentionTest, AgeDeletesOldSentAndDeadInBatchesButNeverActiveRows) {
  std::vector<std::string> old_done;
  for (int i = 0; i < 5; ++i) old_done.push_back(Aged("sent", 7200));
  for (int i = 0; i < 3; ++i) old_done.push_back(Aged("dead", 7200));
  std::string old_pending = Aged("pending", 86400 * 30);
  std::string old_processing = Aged("processing", 86400 * 30);
  std::string recent_sent = Aged("sent", 60);
  std::string recent_dead = Aged("dead", 60);

  Metrics metrics;
  RetentionService service(store_.get(), Age(3600 * 1000, 2), &metrics);
  auto deleted = service.RunOnce();
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 8);  // batches of 2 repeat while full
  for (const auto& id : old_done) EXPECT_FALSE(Exists(id));
  EXPECT_TRUE(Exists(old_pending));
  EXPECT_TRUE(Exists(old_processing));
  EXPECT_TRUE(Exists(recent_sent));
  EXPECT_TRUE(Exists(recent_dead));
  std::string text = metrics.Render();
  EXPECT_THAT(text,
              ::testing::HasSubstr("queuebox_cleanup_messages_deleted_total{table=\"outbox\"} 8"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("queuebox_cleanup_duration_seconds_count{table=\"outbox\"} 1"));
  EXPECT_THAT(text, ::testing::HasSubstr("queuebox_cleanup_last_run_timestamp{table=\"outbox\"}"));

  // Even with maxAge 0 an active row is never deleted.
  RetentionService zero(store_.get(), Age(0, 100), nullptr);
  ASSERT_TRUE(zero.RunOnce().ok());
  EXPECT_TRUE(Exists(old_pending));
  EXPECT_TRUE(Exists(old_processing));
  EXPECT_FALSE(Exists(recent_sent));
  EXPECT_FALSE(Exists(recent_dead));
}

TEST_P(RetentionTest, CountKeepsTheNewestPerState) {
  std::vector<std::string> sent, dead;
  for (int i = 0; i < 5; ++i) sent.push_back(Aged("sent", 1000 - i * 100));  // sent[4] newest
  for (int i = 0; i < 3; ++i) dead.push_back(Aged("dead", 1000 - i * 100));
  std::string pending = Aged("pending", 5000);
  RetentionConfig c;
  c.enabled = true;
  c.outbox.policy = "COUNT";
  c.outbox.max_count = 2;
  c.outbox.batch_size = 1;
  RetentionService service(store_.get(), c, nullptr);
  auto deleted = service.RunOnce();
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 4);
  EXPECT_FALSE(Exists(sent[0]));
  EXPECT_FALSE(Exists(sent[1]));
  EXPECT_FALSE(Exists(sent[2]));
  EXPECT_TRUE(Exists(sent[3]));
  EXPECT_TRUE(Exists(sent[4]));
  EXPECT_FALSE(Exists(dead[0]));
  EXPECT_TRUE(Exists(dead[1]));
  EXPECT_TRUE(Exists(dead[2]));
  EXPECT_TRUE(Exists(pending));
}

TEST_P(RetentionTest, ServiceLoopRunsReportsHealthAndStops) {
  std::string old = Aged("dead", 7200);
  Metrics metrics;
  RetentionConfig c = Age(3600 * 1000, 100);
  c.outbox.cleanup_interval_ms = 3600 * 1000;  // one run, then a long sleep that Stop cuts
  RetentionService service(store_.get(), c, &metrics);
  EXPECT_FALSE(service.Healthy());
  ASSERT_TRUE(service.Start().ok());
  EXPECT_TRUE(service.Healthy());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (service.runs() < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(service.runs(), 1);
  EXPECT_FALSE(Exists(old));
  service.Stop();
  EXPECT_FALSE(service.Healthy());

  // Disabled: Start is a no-op and the component is not running.
  RetentionConfig off;
  RetentionService disabled(store_.get(), off, nullptr);
  ASSERT_TRUE(disabled.Start().ok());
  EXPECT_FALSE(disabled.Healthy());
}

INSTANTIATE_TEST_SUITE_P(Dialects, RetentionTest, ::testing::Values("sqlite", "postgresql"),
                         DialectName);

}  // namespace
}  // namespace queuebox::testing
