// postgres_store.h: the outbox store on PostgreSQL 13+ (libpq), the seed's table exactly.
//
// Every statement names the mapped table and columns (double-quoted) and uses clock_timestamp()
// for every time decision. Claims are one UPDATE joined to a candidate subquery with
// FOR UPDATE OF head SKIP LOCKED (reference §4.1); fenced writes are one UPDATE ... FROM
// unnest(arrays) per batch. Connections come from a pool of database.poolSize (pg_connection.h).
//
// Terminal writes (sent, retry, dead) clear claim_token and lease_expires_at; reclaim keeps them
// like QueueBox does (the state change already makes the old token useless).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "queuebox/store.h"
#include "store/postgres/pg_connection.h"

namespace queuebox::store {

// Where the claim's window starts reading idx_outbox_pending_due (docs/claim-plans.md, "Window
// start"). Rows leave that partial index only when VACUUM removes their entries, so after a large
// drain the index begins with a long run of dead entries that every claim would step over (a
// cost that grows with the rows sent since the last VACUUM). Each claim reports the first due
// pending row its window read, (scheduled_at, sequence), and the next claim starts there.
// Rows can become pending behind that position: a reclaimed lease (Reset), a row inserted with
// a past scheduled_at or committed by a transaction that started before the backlog's head, a
// replay. So at most every kFromBeginningEvery a claim starts from the beginning again: such a
// row waits at most that long more than it would have, and per-key order is never at stake (the
// head check, not the window, decides what is claimable). Thread-safe.
class ClaimWindowStart {
 public:
  struct Position {
    std::string at = "-infinity";  // timestamptz text
    int64_t sequence = 0;
    // The fallback's walk over key heads starts after this key and wraps around to it ("": all
    // keys from the first), so successive fallbacks visit the keys round-robin.
    std::string key_after;
    // False for kFromBeginningEvery after a claim that needed the fallback: behind a hot key the
    // window is full of its blocked rows, so reading it again would only cost time.
    bool use_window = true;
    // False after a claim that returned nothing, until this store writes an outcome (a key head
    // may be free again), a retry it scheduled falls due, the key share changes, or
    // kFromBeginningEvery passes: the key walk would only visit the same busy keys again. The
    // window is still read (rows that became due or arrived at its front are claimed at once); a
    // new key whose rows lie beyond a window of blocked rows waits at most that second.
    bool allow_walk = true;
    // How many keys of this replica's share (with a pending or processing row) the last key walk
    // that went round every key saw, for kFromBeginningEvery after it; -1 when unknown. A claim
    // whose window holds rows of that many keys skips the walk: it could find no head the window
    // missed. A key that appears meanwhile behind a window of blocked rows waits at most that
    // second (as with allow_walk). A head can sort after its key's own later rows (a retry's
    // backoff, a producer's scheduled_at), and a window holding those rows does not hold it, so
    // the count is -1 after a walk that saw a head of the share pending but not yet due, after
    // this store schedules a retry, and after a share change.
    int64_t share_keys = -1;
  };
  static constexpr std::chrono::milliseconds kFromBeginningEvery{1000};

  // The position for the next claim.
  Position Next();
  // Records the first due pending row a claim read: "<timestamp> <sequence>".
  void Advance(const std::string& at_and_sequence);
  // Records that a claim read the window, needed the fallback, and where its key walk stopped.
  void FellBack(const std::string& last_key);
  // Records where the key walk of a claim that skipped the window stopped.
  void VisitedKeysUpTo(const std::string& last_key);
  // The next claim's window starts from the beginning (the key walk keeps its place).
  void Reset();
  // A key walk went round every key and saw this many keys of the share (-1: it did not, or
  // a due unkeyed row waits) (Position::share_keys).
  void SawShareKeys(int64_t keys);
  // A retry was scheduled: its row falls due in about `delay_ms`. A retried head sorts after its
  // key's later rows, so behind a window full of those only the key walk finds it: the share's
  // key count is dropped (Position::share_keys), and the walk's rest after an empty claim ends
  // when the row falls due (Position::allow_walk).
  void Retried(int64_t delay_ms);
  // This replica's key share changed: the window starts from the beginning, the key count is
  // dropped and the walk may run (the old share's state says nothing about the new one).
  void ShareChanged();
  // A claim came back empty (Position::allow_walk).
  void ClaimedNothing();
  // An outcome was written or the key share changed: the key walk may find heads again.
  void MayHaveNewHeads();

 private:
  std::mutex mu_;
  Position position_;
  std::string key_after_;
  std::chrono::steady_clock::time_point fell_back_at_{};
  bool quiet_ = false;  // the last claim came back empty and nothing has changed since
  std::chrono::steady_clock::time_point quiet_since_{};
  std::chrono::steady_clock::time_point last_from_beginning_{};
  int64_t share_keys_ = -1;
  std::chrono::steady_clock::time_point share_keys_at_{};
  // The earliest time a scheduled retry falls due (time_point::max(): none).
  std::chrono::steady_clock::time_point retry_due_ = std::chrono::steady_clock::time_point::max();
};

class PostgresOutboxStore final : public OutboxStore {
 public:
  // Validates the names and the URL; connects lazily (the first call opens a connection).
  static Result<std::unique_ptr<PostgresOutboxStore>> Open(const DatabaseConfig& config);

  std::string_view dialect() const override { return "postgresql"; }
  Result<MigrateReport> Migrate(std::optional<int> baseline) override;
  Status Ping() override;
  Status CheckSchema() override;
  Result<std::vector<OutboxRow>> Claim(int limit, int64_t lease_ms) override;
  Result<std::vector<std::string>> MarkSent(std::span<const Fence> fences) override;
  Result<std::vector<std::string>> ScheduleRetry(std::span<const RetryOrder> orders) override;
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) override;
  Result<std::vector<std::string>> Renew(std::span<const Fence> fences, int64_t lease_ms) override;
  Result<int64_t> ReclaimExpired() override;
  // Key affinity: the replica table is queuebox_relay_replicas (V16, docs/schema.md). A replica
  // counts as live while its expires_at (database clock) lies ahead; each heartbeat also deletes
  // rows expired for more than a minute.
  void EnableKeyAffinity(int64_t ttl_ms, const std::string& name) override;
  Result<KeyShare> Heartbeat() override;
  void LeaveReplicaSet() override;
  std::vector<ReplicaInfo> Replicas() override;
  Result<std::string> Insert(const NewOutboxRow& row) override;
  Result<OutboxStats> Stats() override;
  Result<std::vector<std::string>> DistinctTopics() override;
  Result<int64_t> Replay(const ReplayFilter& filter) override;
  Result<std::vector<DeadRow>> ListDead(int limit) override;
  Result<int64_t> DeleteOlderThan(const std::string& state, int64_t max_age_ms, int batch) override;
  Result<int64_t> DeleteBeyondCount(const std::string& state, int64_t max_count,
                                    int batch) override;

 private:
  class Migrator;

  PostgresOutboxStore(DatabaseConfig config, PgSettings settings);
  std::string Sql(std::string_view tmpl) const;
  // Runs one rendered statement on a pooled connection.
  Result<SqlRows> Run(const std::string& tmpl, const std::vector<SqlParam>& params = {},
                      int64_t* changes = nullptr,
                      PgConnection::Plan plan = PgConnection::Plan::kCached);
  // The first column of a fenced batch statement's rows; planned per call (PgConnection::Plan).
  Result<std::vector<std::string>> Ids(const std::string& tmpl,
                                       const std::vector<SqlParam>& params);
  // Ids for an outcome (sent, retry, dead): a changed row frees its key's next row, so the claim's
  // key walk is allowed again (ClaimWindowStart::MayHaveNewHeads).
  Result<std::vector<std::string>> OutcomeIds(const std::string& tmpl,
                                              const std::vector<SqlParam>& params);

  // The share for the next claim: the last heartbeat's, or every key ({1, 0}) before the first
  // heartbeat, after a failed one, or with key affinity off.
  KeyShare ShareForClaim();
  // After a successful claim: heartbeats when key affinity is on and the last heartbeat is
  // kHeartbeatEvery old; a failed heartbeat is logged once per outage.
  void HeartbeatAfterClaim();

  DatabaseConfig config_;
  PgPool pool_;
  ClaimWindowStart window_start_;

  static constexpr std::chrono::milliseconds kHeartbeatEvery{1000};
  struct Affinity {
    std::mutex mu;
    bool enabled = false;
    std::string replica_id;  // random UUID, made by EnableKeyAffinity
    std::string name;
    int64_t ttl_ms = 0;
    KeyShare share;
    bool failing = false;  // the last heartbeat failed (its warning is logged)
    bool joined = false;   // a heartbeat succeeded since the start or the last leave
    bool left = false;     // LeaveReplicaSet ran: no more heartbeats
    std::chrono::steady_clock::time_point last{};
  } affinity_;
};

}  // namespace queuebox::store
