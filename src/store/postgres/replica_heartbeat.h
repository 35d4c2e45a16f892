// replica_heartbeat.h: key affinity on PostgreSQL, this replica's membership in the set of relay
// replicas of one outbox table (ReplicaMembership, docs/operations.md "Replicas and key
// affinity").
//
// Each replica keeps a row in queuebox_relay_replicas (V16, docs/schema.md) with a heartbeat on
// the database clock; it counts as live while its expires_at lies ahead. A heartbeat upserts this
// replica's row, deletes rows expired for more than a minute, and returns this replica's share of
// the keys: the live replicas of the same outbox table and this one's rank among them by replica
// id. The claim asks for the share before each claim and heartbeats after each successful one, at
// most every kHeartbeatEvery, so a replica whose claims fail stops counting after its ttl.
//
// Thread-safety: every method may be called from any thread (one mutex; statements run outside
// it, except that on_share_changed runs under it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/store.h"
#include "store/monotonic_clock.h"
#include "store/postgres/pg_connection.h"

namespace queuebox::store {

class ReplicaHeartbeat final : public ReplicaMembership {
 public:
  // The claim heartbeats at most this often.
  static constexpr std::chrono::milliseconds kHeartbeatEvery{1000};

  // `pool` runs the statements and must outlive this object. `outbox_table` names whose replicas
  // count together. `on_share_changed` runs when a heartbeat returns another share than the last
  // one, or the first share after joining (the claim's window state starts over).
  ReplicaHeartbeat(PgPool& pool, std::string outbox_table, std::function<void()> on_share_changed,
                   MonotonicMs now = SteadyNowMs)
      : pool_(pool),
        outbox_table_(std::move(outbox_table)),
        on_share_changed_(std::move(on_share_changed)),
        now_(std::move(now)) {}

  // ReplicaMembership. EnableKeyAffinity makes a random replica id (UUID) once; a name longer
  // than the column's 255 characters is cut.
  void EnableKeyAffinity(int64_t ttl_ms, const std::string& name) override;
  Result<KeyShare> Heartbeat() override;
  std::vector<ReplicaInfo> Replicas() override;
  void LeaveReplicaSet() override;

  // The share for the next claim: the last heartbeat's, or every key ({1, 0}) before the first
  // heartbeat, after a failed one, after leaving, or with key affinity off.
  KeyShare ShareForClaim();
  // After a successful claim: heartbeats when key affinity is on and the last heartbeat is
  // kHeartbeatEvery old. A failed heartbeat is logged once per outage, and the claims take every
  // key until a heartbeat succeeds again.
  void AfterClaim();

 private:
  PgPool& pool_;
  const std::string outbox_table_;
  const std::function<void()> on_share_changed_;
  const MonotonicMs now_;

  std::mutex mu_;
  bool enabled_ = false;
  std::string replica_id_;  // random UUID, made by EnableKeyAffinity
  std::string name_;
  int64_t ttl_ms_ = 0;
  KeyShare share_;
  bool failing_ = false;              // the last heartbeat failed (its warning is logged)
  bool joined_ = false;               // a heartbeat succeeded since the start or the last leave
  bool left_ = false;                 // LeaveReplicaSet ran: no more heartbeats
  std::optional<int64_t> last_beat_;  // when the last heartbeat ran (succeeded or failed)
};

}  // namespace queuebox::store
