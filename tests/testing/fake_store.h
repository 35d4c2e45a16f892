// fake_store.h: an in-memory twin of the relay's side of the outbox (OutboxClaims), plus
// inserts, for fast unit tests of the relay. Its claim, key-order, fence, lease and reclaim rules
// are the stores' own: the claims contract suite (tests/contract/store_contract_test.cc,
// OutboxClaimsContractTest) runs it next to SQLite and PostgreSQL. It has no operations side
// (stats, replay, retention): those are proved on the real stores only.
//
// The clock is the process's system clock plus `skew_ms`, which a test may move forward to expire
// leases or make retries due.
//
// Thread-safety: every method locks one mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/store.h"

namespace queuebox::testing {

class FakeStore final : public OutboxClaims {
 public:
  // A row as the table would hold it; times in ms on the fake clock (NowMs), nullopt for NULL.
  struct Row {
    OutboxRow row;  // row.claim_token empty: NULL
    std::string state = "pending";
    int64_t created_at_ms = 0, scheduled_at_ms = 0, updated_at_ms = 0;
    std::optional<int64_t> claimed_at_ms, lease_expires_at_ms;
    std::string last_error;  // empty: NULL
  };

  // OutboxClaims. Claim: kInvalidArgument unless limit > 0 and lease_ms > 0.
  Result<std::vector<OutboxRow>> Claim(int limit, int64_t lease_ms) override;
  Result<std::vector<std::string>> MarkSent(std::span<const Fence> fences) override;
  Result<std::vector<std::string>> ScheduleRetry(std::span<const RetryOrder> orders) override;
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) override;
  Result<std::vector<std::string>> Release(std::span<const ReleaseOrder> orders) override;
  Result<std::vector<std::string>> Renew(std::span<const Fence> fences, int64_t lease_ms) override;
  Result<int64_t> ReclaimExpired() override;
  Result<int64_t> NextWakeDelayMs(int64_t max_wait_ms) override;

  // The application's insert (OutboxStore::Insert's defaults; the payload is not checked).
  Result<std::string> Insert(const NewOutboxRow& row);
  // Several rows in one "statement", in order: all or none (the inbox twin's forward).
  Result<std::vector<std::string>> InsertAll(std::span<const NewOutboxRow> rows);

  // Test controls.
  void set_down(bool down) { down_ = down; }  // every call answers kUnavailable
  // An insert of a row of `topic` fails with kInternal and inserts nothing (as a trigger that
  // refuses it would); empty: none refused.
  void set_refused_topic(std::string topic) {
    std::lock_guard<std::mutex> lock(mu_);
    refused_topic_ = std::move(topic);
  }
  void AdvanceClock(int64_t ms) { skew_ms_ += ms; }
  int64_t NowMs() const;
  Row Get(const std::string& id);  // a default Row when there is none
  std::vector<Row> All();
  // Changes row `id` behind the store's back (as another process's UPDATE would); false when
  // there is no such row.
  bool Update(const std::string& id, const std::function<void(Row&)>& change);
  int64_t statements() const { return statements_; }  // calls that reached the "database"
  // Waits until at least `n` calls were refused because the store is down; false on timeout.
  bool WaitForRefused(int64_t n, std::chrono::milliseconds timeout);

 private:
  Status RefuseWhileDown();
  Row* Find(const std::string& id);
  std::string InsertLocked(const NewOutboxRow& row, int64_t now);
  Status Refused(std::span<const NewOutboxRow> rows) const;
  bool Owned(const Row& r, const Fence& f) const;
  template <typename Order, typename FenceOf, typename Change>
  Result<std::vector<std::string>> ApplyFenced(std::span<const Order> orders, FenceOf fence_of,
                                               Change change);

  mutable std::mutex mu_;
  std::vector<Row> rows_;
  std::string refused_topic_;
  int64_t next_sequence_ = 1;
  std::atomic<bool> down_{false};
  std::atomic<int64_t> skew_ms_{0};
  std::atomic<int64_t> statements_{0};
  std::mutex refused_mu_;
  std::condition_variable refused_cv_;
  int64_t refused_ = 0;
};

}  // namespace queuebox::testing
