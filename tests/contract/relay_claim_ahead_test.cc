// The relay's claim ahead (src/core/relay.cc) on SQLite and PostgreSQL: a claim takes batchSize
// rows whatever `concurrency` is, at most `concurrency` messages are in a publish at once, rows
// queued behind the publishes keep their key order and their leases, and a stop finishes or
// abandons them as docs/guarantees.md §12 says.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "queuebox/relay.h"
#include "store_test_support.h"
#include "testing/join_on_exit.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using namespace std::chrono_literals;

// The real store's claims, recording each claim (limit asked, rows returned) and each renewal.
class RecordingClaims : public OutboxClaims {
 public:
  explicit RecordingClaims(OutboxClaims* real) : real_(real) {}

  Result<std::vector<OutboxRow>> Claim(int limit, int64_t lease_ms) override {
    auto rows = real_->Claim(limit, lease_ms);
    std::lock_guard<std::mutex> lock(mu_);
    if (rows.ok() && !rows->empty()) claims_.push_back({limit, rows->size()});
    cv_.notify_all();
    return rows;
  }
  Result<std::vector<std::string>> MarkSent(std::span<const Fence> fences) override {
    return real_->MarkSent(fences);
  }
  Result<std::vector<std::string>> ScheduleRetry(std::span<const RetryOrder> orders) override {
    return real_->ScheduleRetry(orders);
  }
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) override {
    return real_->MarkDead(orders);
  }
  Result<std::vector<std::string>> Release(std::span<const ReleaseOrder> orders) override {
    return real_->Release(orders);
  }
  Result<std::vector<std::string>> Renew(std::span<const Fence> fences, int64_t lease_ms) override {
    auto renewed = real_->Renew(fences, lease_ms);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (renewed.ok()) {
        for (const std::string& id : *renewed) ++renewals_[id];
      }
    }
    cv_.notify_all();
    return renewed;
  }
  Result<int64_t> ReclaimExpired() override { return real_->ReclaimExpired(); }

  // Claims that returned rows: {limit asked, rows returned}, in order.
  std::vector<std::pair<int, size_t>> claims() {
    std::lock_guard<std::mutex> lock(mu_);
    return claims_;
  }
  // Waits until `n` claims returned rows.
  bool WaitForClaims(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return claims_.size() >= n; });
  }
  // Waits until row `id` was renewed `n` times.
  bool WaitForRenewals(const std::string& id, int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return renewals_[id] >= n; });
  }

 private:
  OutboxClaims* real_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<int, size_t>> claims_;
  std::map<std::string, int> renewals_;
};

// Delivers everything; records the order of publishes, the most messages inside PublishBatch at
// once, a key published while another row of it is in a publish, and can hold every publish at
// a gate until the test opens it.
class GatedDestination : public Destination {
 public:
  // `count`: messages published, kept by the test beyond the relay that owns this destination.
  // `pipelined`: what PipelinesBatch answers.
  explicit GatedDestination(std::shared_ptr<std::atomic<size_t>> count, bool pipelined = false)
      : count_(std::move(count)), pipelined_(pipelined) {}

  const std::string& name() const override { return name_; }
  std::string_view type() const override { return "gated"; }
  Status Start() override { return Status::Ok(); }
  bool PipelinesBatch() const override { return pipelined_; }
  void PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) override {
    std::unique_lock<std::mutex> lock(mu_);
    batch_sizes_.push_back(batch.size());
    in_flight_ += batch.size();
    max_in_flight_ = std::max(max_in_flight_, in_flight_);
    for (const OutboundMessage& m : batch) {
      published_.push_back(m.row->id);
      ++*count_;
      if (m.row->key && !keys_in_flight_.insert(*m.row->key).second) ++key_overlaps_;
    }
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    for (const OutboundMessage& m : batch) {
      if (m.row->key) keys_in_flight_.erase(*m.row->key);
    }
    in_flight_ -= batch.size();
    lock.unlock();
    for (size_t i = 0; i < batch.size(); ++i) sink.Report(i, Outcome::Delivered());
  }

  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  bool WaitForPublished(size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return published_.size() >= n; });
  }
  std::vector<std::string> published() {
    std::lock_guard<std::mutex> lock(mu_);
    return published_;
  }
  size_t max_in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_in_flight_;
  }
  // The size of each PublishBatch call, in call order.
  std::vector<size_t> batch_sizes() {
    std::lock_guard<std::mutex> lock(mu_);
    return batch_sizes_;
  }
  int key_overlaps() {
    std::lock_guard<std::mutex> lock(mu_);
    return key_overlaps_;
  }

 private:
  std::shared_ptr<std::atomic<size_t>> count_;
  const bool pipelined_;
  std::vector<size_t> batch_sizes_;
  std::string name_ = "sink";
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  size_t in_flight_ = 0, max_in_flight_ = 0;
  std::vector<std::string> published_;
  std::set<std::string> keys_in_flight_;
  int key_overlaps_ = 0;
};

// Signals when the relay's Stop has stopped claiming (it leaves the replica set right then).
class StopSignal : public ReplicaMembership {
 public:
  void EnableKeyAffinity(int64_t, const std::string&) override {}
  Result<KeyShare> Heartbeat() override { return KeyShare{}; }
  std::vector<ReplicaInfo> Replicas() override { return {}; }
  void LeaveReplicaSet() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      left_ = true;
    }
    cv_.notify_all();
  }
  bool WaitForLeave(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return left_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool left_ = false;
};

class CountingObserver : public RelayObserver {
 public:
  void OnClaimsLost(int64_t n) override { lost += n; }
  void OnReclaimed(int64_t n) override { reclaimed += n; }
  std::atomic<int64_t> lost{0}, reclaimed{0};
};

class RelayClaimAheadTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string pg_url;
    if (GetParam() == "postgresql") QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
    outbox_ = std::make_unique<testing::SqlOutboxUnderTest>(GetParam());
    outbox_->Create(pg_url);
    if (HasFatalFailure()) return;
    claims_ = std::make_unique<RecordingClaims>(&outbox_->claims());
  }
  void TearDown() override { relay_.reset(); }

  static RelayOptions Options(int batch_size, int concurrency) {
    RelayOptions o;
    o.outbox.poll_interval_ms = 10;
    o.outbox.batch_size = batch_size;
    o.outbox.concurrency = concurrency;
    o.outbox.retry_base_delay_ms = 1;
    o.outbox.claim_timeout_ms = 30000;
    o.outbox.shutdown_timeout_ms = 20000;
    o.routes = {{"**", "sink", {}, ""}};
    return o;
  }

  void Start(const RelayOptions& o) {
    auto d = std::make_unique<GatedDestination>(published_count_, pipelined_);
    destination_ = d.get();
    std::map<std::string, std::unique_ptr<Destination>> ds;
    ds.emplace("sink", std::move(d));
    if (gate_closed_) destination_->Close();
    auto r = Relay::Create(o, claims_.get(), std::move(ds), &observer_, &stop_signal_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    relay_ = std::move(r).value();
    ASSERT_TRUE(relay_->Start().ok());
  }

  std::string State(const std::string& id) { return outbox_->Field(id, "state"); }
  std::vector<std::string> Ids(const std::string& where) {
    std::vector<std::string> ids;
    for (const auto& row :
         outbox_->db().Query("SELECT id FROM outbox WHERE " + where + " ORDER BY sequence")) {
      ids.push_back(row[0]);
    }
    return ids;
  }

  std::unique_ptr<testing::SqlOutboxUnderTest> outbox_;
  std::unique_ptr<RecordingClaims> claims_;
  CountingObserver observer_;
  StopSignal stop_signal_;
  GatedDestination* destination_ = nullptr;  // owned by relay_
  std::shared_ptr<std::atomic<size_t>> published_count_ = std::make_shared<std::atomic<size_t>>(0);
  bool gate_closed_ = false;
  bool pipelined_ = false;  // the destination PipelinesBatch
  std::unique_ptr<Relay> relay_;
};

TEST_P(RelayClaimAheadTest, AtConcurrencyOneEachClaimTakesTheWholeBatch) {
  outbox_->InsertRows(250, [](int) { return std::nullopt; });
  Start(Options(100, 1));
  ASSERT_TRUE(relay_->WaitIdle(60s).ok());
  // The second claim runs while the first batch publishes: one batch ahead, never a claim of
  // `concurrency` rows.
  EXPECT_THAT(claims_->claims(),
              ElementsAre(std::pair<int, size_t>{100, 100}, std::pair<int, size_t>{100, 100},
                          std::pair<int, size_t>{100, 50}));
  EXPECT_EQ(destination_->max_in_flight(), 1u) << "concurrency 1: one message in a publish";
  EXPECT_EQ(destination_->published().size(), 250u);
  EXPECT_THAT(Ids("state <> 'sent'"), ::testing::IsEmpty());
  EXPECT_EQ(relay_->Stop(), 0);
}

// A destination that pipelines a batch (RabbitMQ) takes each claimed task whole, and the call
// counts as one publish: at concurrency 1 one call at a time, 100 messages in it.
TEST_P(RelayClaimAheadTest, APipeliningDestinationTakesEachTaskInOneCall) {
  outbox_->InsertRows(
      250, [](int n) -> std::optional<std::string> { return "key-" + std::to_string(n % 50); });
  pipelined_ = true;
  Start(Options(100, 1));
  ASSERT_TRUE(relay_->WaitIdle(60s).ok());
  // 50 keys: each claim takes one row of each key (a key's next row waits for its outcome).
  EXPECT_THAT(destination_->batch_sizes(), ::testing::Each(50u));
  EXPECT_EQ(destination_->max_in_flight(), 50u) << "one call at a time, the whole task in it";
  EXPECT_EQ(destination_->key_overlaps(), 0);
  EXPECT_EQ(destination_->published().size(), 250u);
  EXPECT_THAT(Ids("state <> 'sent'"), ::testing::IsEmpty());
  EXPECT_EQ(relay_->Stop(), 0);
}

// With a destination that pipelines a batch, a whole batch is in flight, so the claim-ahead
// limit holds three batches (2 x 100 + max(100, 8)) where it holds two otherwise (2 x 100 + 8):
// with the first task's publish held, a third claim is made.
TEST_P(RelayClaimAheadTest, APipeliningDestinationKeepsABatchQueuedBesideTheOneInFlight) {
  outbox_->InsertRows(500, [](int) { return std::nullopt; });
  pipelined_ = true;
  gate_closed_ = true;
  Start(Options(100, 8));
  ASSERT_TRUE(destination_->WaitForPublished(100, 30s));
  ASSERT_TRUE(claims_->WaitForClaims(3, 30s)) << claims_->claims().size();
  EXPECT_LE(claims_->claims().size(), 3u) << "300 rows held: no room for a fourth batch";
  destination_->Open();
  ASSERT_TRUE(relay_->WaitIdle(60s).ok());
  EXPECT_EQ(destination_->published().size(), 500u);
  EXPECT_THAT(Ids("state <> 'sent'"), ::testing::IsEmpty());
  EXPECT_EQ(relay_->Stop(), 0);
}

TEST_P(RelayClaimAheadTest, RowsQueuedAheadKeepTheirKeysInsertOrder) {
  // 20 keys of 12 rows each, interleaved, plus unkeyed rows: every claim takes the heads of
  // the keys, queues them behind two publish slots, and a key's next row waits for its outcome.
  outbox_->InsertRows(300, [](int n) -> std::optional<std::string> {
    if (n % 5 == 4) return std::nullopt;
    return "key-" + std::to_string(n % 20);
  });
  Start(Options(100, 2));
  ASSERT_TRUE(relay_->WaitIdle(60s).ok());
  std::map<std::string, int64_t> sequence_of;
  std::map<std::string, std::string> key_of;
  for (const auto& row : outbox_->db().Query("SELECT id, sequence, key FROM outbox")) {
    sequence_of[row[0]] = std::stoll(row[1]);
    key_of[row[0]] = row[2];
  }
  const std::vector<std::string> published = destination_->published();
  ASSERT_EQ(published.size(), 300u) << "each row once";
  std::map<std::string, int64_t> last;
  for (const std::string& id : published) {
    const std::string& key = key_of[id];
    if (key == "<null>") continue;
    EXPECT_GT(sequence_of[id], last[key]) << "key " << key << " out of order";
    last[key] = sequence_of[id];
  }
  EXPECT_EQ(destination_->key_overlaps(), 0);
  EXPECT_LE(destination_->max_in_flight(), 2u);
  std::vector<std::pair<int, size_t>> claims = claims_->claims();
  ASSERT_FALSE(claims.empty());
  EXPECT_GT(claims.front().second, 2u) << "the first claim takes every head, not two";
  for (const auto& [limit, rows] : claims) EXPECT_EQ(limit, 100);
}

TEST_P(RelayClaimAheadTest, QueuedRowsKeepTheirLeasePastItsLength) {
  outbox_->InsertRows(3, [](int) { return std::nullopt; });
  const std::vector<std::string> ids = Ids("true");
  RelayOptions o = Options(100, 1);
  // Renewed every 1.5 s: a renewal may come 3 s late (a stalled sanitizer run) and still hold.
  o.outbox.claim_timeout_ms = 4500;
  gate_closed_ = true;  // the first row's publish waits; the other two queue
  Start(o);
  ASSERT_TRUE(destination_->WaitForPublished(1, 20s));
  const std::string queued = ids[2];
  ASSERT_EQ(State(queued), "processing");
  // Queued for longer than one lease on the database clock, renewed meanwhile.
  for (int i = 0;
       i < 2000 && !outbox_->db().Holds(queued, "claimed_at < " + outbox_->db().NowPlus(-5)); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(outbox_->db().Holds(queued, "claimed_at < " + outbox_->db().NowPlus(-5)));
  ASSERT_TRUE(claims_->WaitForRenewals(queued, 2, 20s));
  EXPECT_TRUE(outbox_->IsLaterThanNowPlus(queued, "lease_expires_at", 0));
  // Another replica finds nothing to reclaim and nothing to claim.
  std::shared_ptr<OutboxClaims> other = outbox_->OpenAnother();
  ASSERT_NE(other, nullptr);
  auto reclaimed = other->ReclaimExpired();
  ASSERT_TRUE(reclaimed.ok()) << reclaimed.status().ToString();
  EXPECT_EQ(*reclaimed, 0);
  auto taken = other->Claim(100, 30000);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_TRUE(taken->empty());
  EXPECT_EQ(destination_->published().size(), 1u) << "one message in flight, two queued";
  destination_->Open();
  ASSERT_TRUE(relay_->WaitIdle(60s).ok());
  EXPECT_THAT(Ids("state <> 'sent'"), ::testing::IsEmpty());
  EXPECT_EQ(observer_.lost.load(), 0);
  EXPECT_EQ(destination_->published().size(), 3u);
}

TEST_P(RelayClaimAheadTest, StopPublishesTheQueuedRowsWithinTheShutdownTimeout) {
  outbox_->InsertRows(5, [](int) { return std::nullopt; });
  gate_closed_ = true;
  Start(Options(100, 1));
  ASSERT_TRUE(destination_->WaitForPublished(1, 20s));
  int64_t abandoned = -1;
  std::thread stopper([&] { abandoned = relay_->Stop(); });
  queuebox::testing::JoinOnExit join_stopper(stopper, [&] { destination_->Open(); });
  ASSERT_TRUE(stop_signal_.WaitForLeave(20s)) << "Stop stopped claiming";
  destination_->Open();
  stopper.join();
  EXPECT_EQ(abandoned, 0);
  EXPECT_EQ(destination_->published().size(), 5u);
  EXPECT_THAT(Ids("state <> 'sent'"), ::testing::IsEmpty());
}

TEST_P(RelayClaimAheadTest, StopLeavesQueuedRowsToTheirLeaseAfterTheShutdownTimeout) {
  outbox_->InsertRows(5, [](int) { return std::nullopt; });
  const std::vector<std::string> ids = Ids("true");
  RelayOptions o = Options(100, 1);
  o.outbox.shutdown_timeout_ms = 100;
  gate_closed_ = true;
  Start(o);
  ASSERT_TRUE(destination_->WaitForPublished(1, 20s));
  EXPECT_EQ(relay_->Stop(), 5) << "the message in flight and the four queued";
  destination_->Open();
  // The worker finishes its publish and writes that one outcome, then starts nothing more.
  for (int i = 0; i < 2000 && State(ids[0]) != "sent"; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(State(ids[0]), "sent");
  relay_.reset();  // joins the workers
  EXPECT_EQ(published_count_->load(), 1u) << "no queued row is published after the timeout";
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_EQ(State(ids[i]), "processing") << i;
}

INSTANTIATE_TEST_SUITE_P(Dialects, RelayClaimAheadTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace queuebox
