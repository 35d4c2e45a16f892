// memory_inbox_store.h: an in-memory twin of the inbox store (queuebox/inbox.h), the inbox's
// counterpart of FakeStore (fake_store.h), for fast tests of what writes or relays the inbox.
// Its rules are the SQL stores' own: the message checks and the batch's outcomes are the stores'
// code (store/inbox_common.h); dedup on (source, idempotency_key) and on the id; the claim takes
// due pending push rows in (scheduled_at, created_at, arrival) order, one per aggregate in
// flight; every terminal write and renewal is fenced by id, token, `processing` and a live lease.
// The inbox contract suites (tests/contract/inbox_store_contract_test.cc) run it beside SQLite
// and PostgreSQL. It has one lane and no schema (CheckSchema is always OK).
//
// The outbox it forwards into is a FakeStore, which also gives the clock (FakeStore::NowMs: the
// system clock plus a skew a test may advance). A forward writes both as one transaction.
//
// Thread-safety: every method locks one mutex (then the FakeStore's: never the other way).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/inbox.h"
#include "testing/fake_store.h"

namespace queuebox::testing {

class MemoryInboxStore final : public InboxStore {
 public:
  // A row as the table would hold it; times in ms on the outbox's clock, nullopt for NULL.
  struct Row {
    std::string id, source, idempotency_key;
    std::optional<std::string> aggregate_id, event_type, correlation_id;
    std::string payload, headers = "{}";
    std::string state = kInboxStatePending;
    InboxConsumption consumption = InboxConsumption::kPush;
    int attempt = 0;
    std::string claim_token;  // empty: NULL
    std::optional<std::string> last_error;
    int64_t created_at_ms = 0, scheduled_at_ms = 0;
    std::optional<int64_t> claimed_at_ms, processed_at_ms, lease_expires_at_ms;
    int64_t arrival = 0;  // insertion order: breaks ties of equal times (SQLite's rowid)
  };

  // `outbox` outlives this store.
  explicit MemoryInboxStore(FakeStore& outbox) : outbox_(outbox) {}

  // InboxIntake
  Result<std::vector<InboxStoreOutcome>> Store(std::span<const NewInboxMessage> messages) override;
  // InboxRelayClaims
  Result<std::vector<ClaimedInboxRow>> ClaimPush(int limit, int64_t lease_ms) override;
  bool HasForwardDue() const override { return true; }
  Result<InboxForwardDue> ForwardDue(int limit, const InboxForwardPlanner& plan) override;
  Result<std::vector<std::string>> Forward(std::span<const InboxForward> forwards) override;
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) override;
  Result<std::vector<std::string>> Renew(std::span<const Fence> fences, int64_t lease_ms) override;
  Result<int64_t> ReclaimExpired() override;
  // InboxOperations
  Result<InboxStats> Stats() override;
  Result<double> OldestPendingAgeSeconds() override;
  Result<int64_t> Replay(const InboxReplayFilter& filter) override;
  Result<std::vector<DeadInboxRow>> ListDead(int limit) override;
  Result<int64_t> DeleteOlderThan(const std::string& state, int64_t max_age_ms, int batch) override;
  Result<int64_t> DeleteBeyondCount(const std::string& state, int64_t max_count,
                                    int batch) override;
  Status CheckSchema() override { return Status::Ok(); }

  // Test controls.
  void set_down(bool down) { down_ = down; }  // every call answers kUnavailable
  // Like a unique index on the aggregate of push rows in `processing`: a claim that would put a
  // second row of an aggregate in flight fails with kInternal and changes nothing.
  void set_check_one_in_flight(bool check) { check_one_in_flight_ = check; }
  int64_t NowMs() const { return outbox_.NowMs(); }
  std::optional<Row> Get(const std::string& id);
  std::vector<Row> All();
  // Changes row `id` behind the store's back (as another process's UPDATE would); false when
  // there is no such row.
  bool Update(const std::string& id, const std::function<void(Row&)>& change);

 private:
  Row* Find(const std::string& id);
  bool Owned(const Row& r, const Fence& f, int64_t now) const;
  Result<std::vector<InboxStoreOutcome>> Insert(const std::vector<const NewInboxMessage*>& batch);
  // The rows a claim takes now, in claim order.
  std::vector<Row*> Pick(int limit, int64_t now);
  Status CheckOneInFlight(const std::vector<Row*>& picked) const;
  template <typename Order, typename FenceOf, typename Change>
  Result<std::vector<std::string>> ApplyFenced(std::span<const Order> orders, FenceOf fence_of,
                                               Change change);
  // Deletes the rows of `victims` (pointers into rows_).
  int64_t Erase(const std::vector<const Row*>& victims);

  FakeStore& outbox_;
  mutable std::mutex mu_;
  std::vector<Row> rows_;
  int64_t next_arrival_ = 1;
  std::atomic<bool> down_{false};
  std::atomic<bool> check_one_in_flight_{false};
};

}  // namespace queuebox::testing
