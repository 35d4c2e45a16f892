// The outcome writer (core/outcome_writer.h) against the in-memory store twin.
#include "core/outcome_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>

#include "testing/fake_destination.h"
#include "testing/fake_store.h"

namespace queuebox {
namespace {

using testing::FakeDestination;
using testing::FakeStore;

class OutcomeCountingObserver : public RelayObserver {
 public:
  void OnMessages(std::string_view status, int64_t n) override {
    std::lock_guard<std::mutex> lock(mu);
    messages[std::string(status)] += n;
  }
  void OnClaimsLost(int64_t n) override { lost += n; }
  void OnProcessError() override { ++errors; }
  void OnProcessingDurations(double, int64_t n) override { durations += n; }
  int64_t Count(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    return messages[s];
  }
  std::mutex mu;
  std::map<std::string, int64_t> messages;
  std::atomic<int64_t> lost{0}, errors{0}, durations{0};
};

// The store, but its first `failures` MarkSent calls find the database out.
class FlakyClaims : public OutboxClaims {
 public:
  FlakyClaims(FakeStore& store, int failures) : store_(store), failures_(failures) {}
  Result<std::vector<OutboxRow>> Claim(int limit, int64_t lease_ms) override {
    return store_.Claim(limit, lease_ms);
  }
  Result<std::vector<std::string>> MarkSent(std::span<const Fence> fences) override {
    ++calls;
    if (failures_-- > 0) return Unavailable("connection refused");
    return store_.MarkSent(fences);
  }
  Result<std::vector<std::string>> ScheduleRetry(std::span<const RetryOrder> o) override {
    return store_.ScheduleRetry(o);
  }
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> o) override {
    return store_.MarkDead(o);
  }
  Result<std::vector<std::string>> Release(std::span<const ReleaseOrder> o) override {
    return store_.Release(o);
  }
  Result<std::vector<std::string>> Renew(std::span<const Fence> f, int64_t lease_ms) override {
    return store_.Renew(f, lease_ms);
  }
  Result<int64_t> ReclaimExpired() override { return store_.ReclaimExpired(); }
  int calls = 0;

 private:
  FakeStore& store_;
  int failures_;
};

class OutcomeWriterTest : public ::testing::Test {
 protected:
  void SetUp() override { Use(&store_); }
  void Use(OutboxClaims* claims, int64_t claim_timeout_ms = 30000) {
    writer_ = std::make_unique<OutcomeWriter>(OutcomeWriter::Options{1000, claim_timeout_ms},
                                              claims, &ledger_, &observer_, &limiter_,
                                              [this](int64_t rows) { accounted_ += rows; });
  }
  // A claimed task of n rows (max_attempts 5), held in the ledger as the relay holds it.
  DeliveryTask Task(int n) {
    for (int i = 0; i < n; ++i) {
      NewOutboxRow row;
      row.topic = "t";
      row.payload = "{}";
      EXPECT_TRUE(store_.Insert(row).ok());
    }
    DeliveryTask task;
    task.destination = &destination_;
    task.rows = store_.Claim(n, 30000).value();
    task.claimed_at = RelayClock::now();
    task.cancel = ledger_.HoldForPublish(task.rows);
    task.attempts.resize(task.rows.size());
    return task;
  }
  void Steal(const OutboxRow& row) {
    ASSERT_TRUE(store_.Update(row.id, [](FakeStore::Row& r) { r.row.claim_token += "-theirs"; }));
  }

  FakeStore store_;
  FakeDestination destination_{"sink"};
  ClaimLedger ledger_;
  OutcomeCountingObserver observer_;
  log::RateLimiter limiter_{std::chrono::milliseconds(5000)};
  std::atomic<int64_t> accounted_{0};
  std::unique_ptr<OutcomeWriter> writer_;
};

TEST_F(OutcomeWriterTest, DecidesEachAttemptAndWritesOneStatementPerKind) {
  DeliveryTask task = Task(5);
  task.attempts[0].outcome = Outcome::Delivered();
  task.attempts[1].outcome = Outcome::Retry("HTTP 503");
  task.attempts[2].outcome = Outcome::Reject("HTTP 400");
  task.attempts[3].outcome = Outcome::Unavailable("Connection refused");
  task.attempts[3].release_delay_ms = 5000;
  task.attempts[4].outcome = Outcome::Delivered();
  OutcomeBatch batch = writer_->Decide(task, 5, /*has_breaker=*/true);
  EXPECT_EQ(batch.destination, "sink");
  ASSERT_EQ(batch.sent.size(), 2u);
  EXPECT_EQ(batch.sent[1].attempt, &task.attempts[4]) << "each decision names its attempt";
  ASSERT_EQ(batch.release.size(), 1u);
  EXPECT_EQ(batch.release[0].decision.delay_ms, 5000);
  const int64_t before = store_.statements();
  writer_->WriteBatch(batch);
  EXPECT_EQ(store_.statements(), before + 4);
  EXPECT_EQ(store_.Get(task.rows[0].id).state, "sent");
  EXPECT_EQ(store_.Get(task.rows[1].id).state, "pending");
  EXPECT_EQ(store_.Get(task.rows[1].id).row.attempt, 1);
  EXPECT_EQ(store_.Get(task.rows[1].id).last_error, "HTTP 503");
  EXPECT_EQ(store_.Get(task.rows[2].id).state, "dead");
  EXPECT_EQ(store_.Get(task.rows[3].id).state, "pending");
  EXPECT_EQ(store_.Get(task.rows[3].id).row.attempt, 0) << "a release spends no attempt";
  EXPECT_EQ(observer_.Count("sent"), 2);
  EXPECT_EQ(observer_.Count("failed"), 1);
  EXPECT_EQ(observer_.Count("dead"), 1);
  EXPECT_EQ(observer_.Count("released"), 1);
  EXPECT_EQ(observer_.durations.load(), 5);
  EXPECT_EQ(accounted_.load(), 5);
  EXPECT_EQ(ledger_.size(), 0u);
}

// The store, keeping the attempt record of every fence each outcome write carried.
class RecordKeepingClaims : public FlakyClaims {
 public:
  explicit RecordKeepingClaims(FakeStore& store) : FlakyClaims(store, 0) {}
  Result<std::vector<std::string>> MarkSent(std::span<const Fence> fences) override {
    for (const Fence& f : fences) Keep("sent", f);
    return FlakyClaims::MarkSent(fences);
  }
  Result<std::vector<std::string>> ScheduleRetry(std::span<const RetryOrder> o) override {
    for (const RetryOrder& r : o) Keep("retry", r.fence);
    return FlakyClaims::ScheduleRetry(o);
  }
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> o) override {
    for (const DeadOrder& d : o) Keep("dead", d.fence);
    return FlakyClaims::MarkDead(o);
  }
  Result<std::vector<std::string>> Release(std::span<const ReleaseOrder> o) override {
    for (const ReleaseOrder& r : o) Keep("released", r.fence);
    return FlakyClaims::Release(o);
  }
  std::map<std::string, std::pair<std::string, std::optional<AttemptRecord>>> kept;  // by id

 private:
  void Keep(const std::string& outcome, const Fence& f) { kept[f.id] = {outcome, f.record}; }
};

TEST_F(OutcomeWriterTest, WithTheHistoryEachFenceCarriesItsAttempt) {
  RecordKeepingClaims claims(store_);
  writer_ = std::make_unique<OutcomeWriter>(OutcomeWriter::Options{1000, 30000, true}, &claims,
                                            &ledger_, &observer_, &limiter_,
                                            [this](int64_t rows) { accounted_ += rows; });
  DeliveryTask task = Task(3);
  task.attempts[0].outcome = Outcome::Delivered();
  task.attempts[0].outcome.answer = "HTTP 204";
  task.attempts[0].publish_start = RelayClock::now();
  task.attempts[0].publish_duration = std::chrono::milliseconds(42);
  task.attempts[1].outcome = Outcome::Retry("HTTP 500: boom");
  task.attempts[1].outcome.answer = "HTTP 500";
  task.attempts[1].publish_start = RelayClock::now();
  task.attempts[2].outcome = Outcome::Unavailable("Not published, its circuit breaker is open");
  writer_->Write(task, 3, /*has_breaker=*/true);
  ASSERT_EQ(claims.kept.size(), 3u);
  const auto& [sent, sent_record] = claims.kept[task.rows[0].id];
  EXPECT_EQ(sent, "sent");
  ASSERT_TRUE(sent_record.has_value());
  EXPECT_EQ(sent_record->attempt, 0);
  EXPECT_EQ(sent_record->destination, "sink");
  EXPECT_EQ(sent_record->duration_ms, 42);
  EXPECT_EQ(sent_record->answer, "HTTP 204");
  const auto& [retry, retry_record] = claims.kept[task.rows[1].id];
  EXPECT_EQ(retry, "retry");
  EXPECT_EQ(retry_record->duration_ms, 0);
  EXPECT_EQ(retry_record->answer, "HTTP 500");
  const auto& [released, released_record] = claims.kept[task.rows[2].id];
  EXPECT_EQ(released, "released");
  EXPECT_EQ(released_record->duration_ms, -1) << "never published";
  EXPECT_EQ(released_record->answer, "");
}

TEST_F(OutcomeWriterTest, WithoutTheHistoryNoFenceCarriesARecordAndUnroutableRowsHaveNoAttempt) {
  RecordKeepingClaims claims(store_);
  Use(&claims);
  DeliveryTask task = Task(1);
  task.attempts[0].outcome = Outcome::Delivered();
  writer_->Write(task, 1, true);
  EXPECT_FALSE(claims.kept[task.rows[0].id].second.has_value());
  writer_ = std::make_unique<OutcomeWriter>(OutcomeWriter::Options{1000, 30000, true}, &claims,
                                            &ledger_, &observer_, &limiter_,
                                            [this](int64_t rows) { accounted_ += rows; });
  DeliveryTask unroutable = Task(1);
  writer_->WriteUnroutable(unroutable.rows, {"no route"}, RelayClock::now());
  const auto& [dead, record] = claims.kept[unroutable.rows[0].id];
  EXPECT_EQ(dead, "dead");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->destination, "");
  EXPECT_EQ(record->duration_ms, -1);
}

TEST_F(OutcomeWriterTest, WithoutABreakerAnOutageSpendsAnAttempt) {
  DeliveryTask task = Task(1);
  task.attempts[0].outcome = Outcome::Unavailable("Connection refused");
  writer_->Write(task, 1, /*has_breaker=*/false);
  EXPECT_EQ(store_.Get(task.rows[0].id).row.attempt, 1);
  EXPECT_EQ(observer_.Count("failed"), 1);
}

TEST_F(OutcomeWriterTest, OnlyTheFirstRowsAreWritten) {
  DeliveryTask task = Task(3);
  for (auto& a : task.attempts) a.outcome = Outcome::Delivered();
  writer_->Write(task, 2, false);
  EXPECT_EQ(store_.Get(task.rows[1].id).state, "sent");
  EXPECT_EQ(store_.Get(task.rows[2].id).state, "processing") << "abandoned: left to its lease";
  EXPECT_EQ(accounted_.load(), 2);
}

TEST_F(OutcomeWriterTest, ACancelledAttemptWritesNothingAndIsAccountedFor) {
  DeliveryTask task = Task(1);
  task.attempts[0].outcome = Outcome::Cancelled();
  const int64_t before = store_.statements();
  writer_->Write(task, 1, false);
  EXPECT_EQ(store_.statements(), before);
  EXPECT_EQ(store_.Get(task.rows[0].id).state, "processing");
  EXPECT_EQ(observer_.lost.load(), 0) << "the lease keeper counted it";
  EXPECT_EQ(accounted_.load(), 1);
  EXPECT_EQ(ledger_.size(), 0u);
}

TEST_F(OutcomeWriterTest, ALostClaimIsCountedOnceWhetherTheLeaseKeeperOrTheWriteFoundIt) {
  DeliveryTask task = Task(2);
  Steal(task.rows[0]);
  ASSERT_EQ(ledger_.Renew(store_, 30000).lost, 1);  // the lease keeper counts row 0
  ledger_.StartWriting(task.rows);
  Steal(task.rows[1]);  // lost after its write started: the write finds it
  for (auto& a : task.attempts) a.outcome = Outcome::Delivered();
  writer_->Write(task, 2, false);
  EXPECT_EQ(observer_.lost.load(), 1);
  EXPECT_EQ(observer_.Count("sent"), 0);
  EXPECT_EQ(accounted_.load(), 2);
}

TEST_F(OutcomeWriterTest, AnOutageIsRetriedUntilTheWriteGoesThrough) {
  FlakyClaims flaky(store_, 2);
  Use(&flaky);
  DeliveryTask task = Task(1);
  task.attempts[0].outcome = Outcome::Delivered();
  writer_->Write(task, 1, false);
  EXPECT_EQ(flaky.calls, 3);
  EXPECT_EQ(store_.Get(task.rows[0].id).state, "sent");
  EXPECT_EQ(observer_.errors.load(), 0);
}

TEST_F(OutcomeWriterTest, PastTheLeaseTheRowsAreLeftToTheReclaim) {
  Use(&store_, /*claim_timeout_ms=*/1);
  DeliveryTask task = Task(1);
  task.attempts[0].outcome = Outcome::Delivered();
  store_.set_down(true);
  writer_->Write(task, 1, false);
  store_.set_down(false);
  EXPECT_EQ(store_.Get(task.rows[0].id).state, "processing");
  EXPECT_EQ(observer_.errors.load(), 1);
  EXPECT_EQ(accounted_.load(), 1);
  EXPECT_EQ(ledger_.size(), 0u);
}

TEST_F(OutcomeWriterTest, UnroutableRowsGoDeadWithTheirReason) {
  DeliveryTask task = Task(1);
  writer_->WriteUnroutable(task.rows, {"No route matches topic 't'"}, task.claimed_at);
  EXPECT_EQ(store_.Get(task.rows[0].id).state, "dead");
  EXPECT_EQ(store_.Get(task.rows[0].id).last_error, "No route matches topic 't'");
  EXPECT_EQ(observer_.Count("dead"), 1);
}

}  // namespace
}  // namespace queuebox
