// fake_store.h: an in-memory OutboxStore with the real claim, key-order and fence rules, for
// fast unit tests of the relay. The clock is the process's system clock plus `skew_ms`, which a
// test may move forward to expire leases or make retries due.
//
// Thread-safety: every method locks one mutex.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "queuebox/store.h"

namespace queuebox::testing {

class FakeStore : public OutboxStore {
 public:
  struct Row {
    OutboxRow row;
    std::string state = "pending";
    int64_t scheduled_at_ms = 0, updated_at_ms = 0, lease_expires_at_ms = 0;
    std::string last_error;
  };

  std::string_view dialect() const override { return "fake"; }
  Result<MigrateReport> Migrate(std::optional<int>) override { return MigrateReport{}; }
  Status Ping() override;
  Result<std::vector<OutboxRow>> Claim(int limit, int64_t lease_ms) override;
  Result<std::vector<std::string>> MarkSent(std::span<const Fence> fences) override;
  Result<std::vector<std::string>> ScheduleRetry(std::span<const RetryOrder> orders) override;
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) override;
  Result<std::vector<std::string>> Renew(std::span<const Fence> fences, int64_t lease_ms) override;
  Result<int64_t> ReclaimExpired() override;
  Result<std::string> Insert(const NewOutboxRow& row) override;
  Result<OutboxStats> Stats() override;
  Result<std::vector<std::string>> DistinctTopics() override;
  Result<int64_t> Replay(const ReplayFilter& filter) override;
  Result<std::vector<DeadRow>> ListDead(int limit) override;
  Result<int64_t> DeleteOlderThan(const std::string& state, int64_t max_age_ms, int batch) override;
  Result<int64_t> DeleteBeyondCount(const std::string& state, int64_t max_count,
                                    int batch) override;

  // Test controls.
  void set_down(bool down) { down_ = down; }  // every call answers kUnavailable
  void AdvanceClock(int64_t ms) { skew_ms_ += ms; }
  Row Get(const std::string& id);
  std::vector<Row> All();
  int64_t statements() const { return statements_; }  // calls that reached the "database"

 private:
  int64_t NowMs() const;
  Row* Find(const std::string& id);
  bool Owned(const Row& r, const Fence& f) const;
  template <typename Order, typename FenceOf, typename Change>
  Result<std::vector<std::string>> ApplyFenced(std::span<const Order> orders, FenceOf fence_of,
                                               Change change);

  mutable std::mutex mu_;
  std::vector<Row> rows_;
  int64_t next_sequence_ = 1;
  std::atomic<bool> down_{false};
  std::atomic<int64_t> skew_ms_{0};
  std::atomic<int64_t> statements_{0};
};

}  // namespace queuebox::testing
