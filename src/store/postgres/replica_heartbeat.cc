#include "store/postgres/replica_heartbeat.h"

#include <algorithm>
#include <cstdlib>

#include "babelqueue/envelope.h"
#include "core/log.h"
#include "core/redaction.h"

namespace queuebox::store {

void ReplicaHeartbeat::EnableKeyAffinity(int64_t ttl_ms, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (replica_id_.empty()) {
    Result<std::string> id = babelqueue::NewUuidV4();
    if (!id.ok()) {
      log::Warn(
          "Key affinity stays off: no replica id could be made; this replica claims every key",
          {{"reason", SanitizeError(id.status().message())}});
      return;
    }
    replica_id_ = *id;
  }
  enabled_ = true;
  left_ = false;
  // VARCHAR(255) counts characters; 255 bytes never exceed it (a cut UTF-8 sequence is dropped).
  std::string cut = name;
  if (cut.size() > 255) {
    cut.resize(255);
    while (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0x80) != 0) cut.pop_back();
  }
  name_ = cut;
  ttl_ms_ = std::max<int64_t>(1, ttl_ms);
  last_beat_.reset();
}

Result<KeyShare> ReplicaHeartbeat::Heartbeat() {
  std::string id, name;
  int64_t ttl_ms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!enabled_) return KeyShare{};
    id = replica_id_;
    name = name_;
    ttl_ms = ttl_ms_;
  }
  // One statement: upsert this replica (database clock), drop replicas expired for over a minute,
  // count the live others of the same outbox table and those ranked before this one. The SELECT
  // does not see the upsert (one snapshot), so this replica is counted by the `1 +`.
  static const std::string kSql =
      "WITH qb_now AS (SELECT clock_timestamp() AS t), "
      "qb_up AS (INSERT INTO queuebox_relay_replicas AS r (replica_id, outbox_table, name,"
      " started_at, heartbeat_at, expires_at) SELECT $1::uuid, $4::text, $2::text, t, t,"
      " t + $3::bigint * interval '1 millisecond'"
      " FROM qb_now ON CONFLICT (replica_id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at,"
      " expires_at = EXCLUDED.expires_at, name = EXCLUDED.name RETURNING r.replica_id), "
      "qb_gone AS (DELETE FROM queuebox_relay_replicas AS g WHERE g.expires_at <"
      " (SELECT t FROM qb_now) - interval '1 minute' AND g.replica_id <> $1::uuid"
      " RETURNING g.replica_id) "
      "SELECT 1 + count(*), count(*) FILTER (WHERE o.replica_id < $1::uuid)"
      " FROM queuebox_relay_replicas AS o WHERE o.expires_at > (SELECT t FROM qb_now)"
      " AND o.replica_id <> $1::uuid AND o.outbox_table = $4::text";
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  QB_ASSIGN_OR_RETURN(SqlRows rows, conn->Query(kSql, {id, name, ttl_ms, outbox_table_}));
  KeyShare share;
  if (!rows.empty() && rows[0].size() == 2 && rows[0][0].has_value() && rows[0][1].has_value()) {
    share.count = static_cast<int>(ParseInt(*rows[0][0]).value_or(1));
    share.index = static_cast<int>(ParseInt(*rows[0][1]).value_or(0));
  }
  if (share.count < 1 || share.index < 0 || share.index >= share.count) share = KeyShare{};
  std::lock_guard<std::mutex> lock(mu_);
  if (failing_) {
    log::Info("Key affinity is back: the replica table answers again");
    failing_ = false;
  }
  if (!joined_ || !(share == share_)) {
    on_share_changed_();
    log::Info("This replica's share of the keys changed (key affinity)",
              {{"replicas", std::to_string(share.count)},
               {"index", std::to_string(share.index)},
               {"replica_id", id}});
  }
  joined_ = true;
  share_ = share;
  last_beat_ = now_();
  return share;
}

KeyShare ReplicaHeartbeat::ShareForClaim() {
  std::lock_guard<std::mutex> lock(mu_);
  return enabled_ && joined_ ? share_ : KeyShare{};
}

void ReplicaHeartbeat::AfterClaim() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!enabled_ || left_) return;
    if (last_beat_.has_value() && now_() - *last_beat_ < kHeartbeatEvery.count()) return;
  }
  Result<KeyShare> share = Heartbeat();
  if (share.ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!failing_) {
    log::Warn(
        "Key affinity is off until the replica table answers; this replica claims every key. "
        "If the database is up, `queuebox migrate` creates the table queuebox_relay_replicas.",
        {{"reason", SanitizeError(share.status().message())}});
    failing_ = true;
  }
  // Every key until the table answers; retried after the next claim once kHeartbeatEvery passed.
  joined_ = false;
  share_ = KeyShare{};
  last_beat_ = now_();
}

void ReplicaHeartbeat::LeaveReplicaSet() {
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!enabled_) return;
    left_ = true;  // no heartbeat after this, even if a claim still runs
    if (!joined_) return;
    id = replica_id_;
    joined_ = false;
  }
  Result<PgPool::Lease> conn = pool_.Acquire();
  Status s =
      conn.ok()
          ? (*conn)
                ->Query("DELETE FROM queuebox_relay_replicas WHERE replica_id = $1::uuid", {id})
                .status()
          : conn.status();
  if (!s.ok()) {
    log::Warn(
        "Could not leave the replica set; the others take this replica's keys when its "
        "heartbeat expires",
        {{"reason", SanitizeError(s.message())}});
  }
}

std::vector<ReplicaInfo> ReplicaHeartbeat::Replicas() {
  std::vector<ReplicaInfo> out;
  // The replica table is optional (key affinity off, database.migrate false): no rows then.
  Result<PgPool::Lease> conn = pool_.Acquire();
  if (!conn.ok()) return out;
  Result<SqlRows> rows = (*conn)->Query(
      "SELECT name, EXTRACT(EPOCH FROM clock_timestamp() - heartbeat_at)::float8, "
      "to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
      " FROM queuebox_relay_replicas WHERE outbox_table = $1::text"
      " AND expires_at > clock_timestamp() ORDER BY replica_id",
      {outbox_table_});
  if (!rows.ok()) return out;
  for (const SqlRow& r : *rows) {
    if (r.size() != 3 || !r[0] || !r[1] || !r[2]) continue;
    out.push_back({*r[0], std::strtod(r[1]->c_str(), nullptr), *r[2]});
  }
  return out;
}

}  // namespace queuebox::store
