// store.h: the outbox store contract. One implementation per SQL dialect (src/store/<dialect>).
//
// Every time decision (due rows, leases, retry due times, retention ages) is made with the
// database clock inside the statement: PostgreSQL clock_timestamp(), SQLite its own 'now'.
// Fenced writes take a batch and issue one statement per batch (architecture §5); they return the
// ids that changed. An id missing from the answer lost its claim (QueueBox reference §4.5): the
// caller logs it, counts it and changes nothing more.
//
// Errors: kUnavailable when the database cannot be reached (the caller retries with backoff);
// kInvalidArgument for bad input; kInternal for a statement the database refused.
// Thread-safety: every method may be called from several threads at once; implementations
// serialise internally (a pool on PostgreSQL, one writer on SQLite).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "queuebox/console.h"
#include "queuebox/inbox.h"
#include "queuebox/message.h"
#include "queuebox/status.h"

namespace queuebox {

// Column names of the outbox (database.columnMapping.outbox.*); defaults are the seed's.
struct OutboxColumns {
  std::string id = "id", topic = "topic", key = "key", aggregate_type = "aggregate_type",
              payload = "payload", headers = "headers", state = "state", attempt = "attempt",
              max_attempts = "max_attempts", scheduled_at = "scheduled_at",
              created_at = "created_at", updated_at = "updated_at", claimed_at = "claimed_at",
              claim_token = "claim_token", lease_expires_at = "lease_expires_at",
              last_error = "last_error", sequence = "sequence";
  bool operator==(const OutboxColumns&) const = default;
  bool IsDefault() const { return *this == OutboxColumns{}; }
};

// database.* configuration (QueueBox reference §12.2).
struct DatabaseConfig {
  // "postgresql" | "sqlite"; empty: the kind the URL names (OpenStore; the loader fills it).
  std::string type;
  std::string url;       // libpq URI / jdbc:postgresql://… / SQLite file path
  std::string username;  // PostgreSQL role (overrides the URL's)
  std::string password;  // secret; never logged
  int pool_size = 10;    // connections per replica (PostgreSQL)
  int64_t connection_timeout_ms = 30000;
  int64_t startup_timeout_ms = 60000;   // wait for the database at start, then fail
  bool migrate = true;                  // apply the bundled migrations at start
  std::string outbox_table = "outbox";  // database.outboxTableName
  OutboxColumns columns;                // database.columnMapping.outbox
  std::string inbox_table = "inbox";    // database.inboxTableName
  InboxColumns inbox_columns;           // database.columnMapping.inbox
};

// A live relay replica of this outbox under key affinity (queuebox_relay_replicas, PostgreSQL).
struct ReplicaInfo {
  std::string name;                  // host:pid
  double heartbeat_age_seconds = 0;  // seconds since its last heartbeat, database clock
  std::string started_at;            // ISO-8601 UTC
};

// Under outbox.ordering: strict, the oldest open transaction that took an outbox sequence value
// (docs/claim.md, "Strict order"): keyed rows with a higher sequence wait until it ends.
struct StrictBlocker {
  int64_t pid = 0;  // its backend's pid; 0 for a prepared (two-phase) transaction
  // Seconds since it began (pg_stat_activity.xact_start, database clock); nullopt when the
  // relay's role may not read it (pg_read_all_stats) or for a prepared transaction.
  std::optional<double> age_seconds;
};

// Counts for `queuebox status`, the pending gauge and the oldest-pending-age gauge.
struct OutboxStats {
  std::map<std::string, int64_t> rows_by_state;  // state literal -> rows
  double oldest_pending_age_seconds = 0;         // database clock; 0 when none pending
  std::map<std::string, int64_t> dead_by_topic;  // topic -> dead rows
  // Strict ordering enabled (OutboxStore::EnableStrictOrdering) and a transaction holds rows
  // back; nullopt otherwise.
  std::optional<StrictBlocker> strict_blocker;
};

// A dead row for `queuebox dead list`.
struct DeadRow {
  std::string id, topic;
  std::optional<std::string> key;
  int attempt = 0;
  std::string last_error;
  std::string updated_at;
};

// Filters of POST /admin/replay and `queuebox replay` (QueueBox reference §5.4), ANDed.
// `topics` here is already the resolved set (destination resolved through the live routes).
struct ReplayFilter {
  std::optional<std::vector<std::string>> ids;     // empty list matches nothing
  std::optional<std::vector<std::string>> topics;  // topic IN (...); empty matches nothing
  std::optional<std::string> created_after;        // ISO-8601 instant, strict >
  std::optional<std::string> created_before;       // ISO-8601 instant, strict <
};

// This replica's share of the keys under key affinity (ReplicaMembership::Heartbeat): it claims the
// keys k with hash(k) mod count == index (unkeyed rows: hash of the id). count 1 = every key.
struct KeyShare {
  int count = 1;  // live replicas, this one included; >= 1
  int index = 0;  // this replica's rank among them, by replica id; 0 <= index < count
  bool operator==(const KeyShare&) const = default;
};

// A connection pool's figures, for the hikaricp_connections_* metrics (docs/metrics.md).
struct ConnectionPoolStats {
  int active = 0;        // connections on loan to a caller (or being opened for one)
  int idle = 0;          // open connections nobody holds
  int pending = 0;       // callers waiting for a connection
  int min = 0;           // connections the pool keeps open when idle
  int max = 0;           // largest pool size (database.poolSize)
  int64_t timeouts = 0;  // acquisitions that waited database.connectionTimeoutMs in vain
};

// Result of a migration run.
struct MigrateReport {
  std::vector<int> applied;  // versions applied by this run, ascending
  // Set when this run adopted the history QueueBox keeps in flyway_schema_history: what it
  // showed ("QueueBox V1-V11 (V1-V11 applied by Flyway; installed_rank 1-11)"), recorded as
  // the baseline `adopted_version` (docs/schema.md).
  std::optional<std::string> adopted_flyway;
  int adopted_version = 0;
};

// The store's interfaces, one per kind of caller; a caller takes the narrowest one.
//   OutboxClaims      the relay's path: claim, fenced outcomes, lease renewal and reclaim
//   OutboxOperations  operators and the admin API: health, counts, dead rows, replay, retention
//   ReplicaMembership key affinity: this replica in the set of relays of one outbox table
//   OutboxStore       one dialect's outbox table: claims and operations, plus its schema, inserts
//                     and (where the dialect has it) its ReplicaMembership
// The inbox (queuebox/inbox.h) follows the same split; OutboxStore::inbox() gives its store.

// The relay's path through the outbox (QueueBox reference §4): claim due rows under a lease,
// then write each row's outcome through its fence.
class OutboxClaims {
 public:
  virtual ~OutboxClaims() = default;

  // Claims up to `limit` due pending rows, heads of their key only (QueueBox reference §4.1,
  // §4.3), ordered by scheduled_at, sequence; lease = database now + lease_ms.
  // kInvalidArgument unless limit > 0 and lease_ms > 0.
  virtual Result<std::vector<OutboxRow>> Claim(int limit, int64_t lease_ms) = 0;

  virtual Result<std::vector<std::string>> MarkSent(std::span<const Fence> fences) = 0;
  virtual Result<std::vector<std::string>> ScheduleRetry(std::span<const RetryOrder> orders) = 0;
  virtual Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) = 0;
  // Gives rows back without spending an attempt (their destination is out, ReleaseOrder):
  // pending, attempt unchanged, due at database now + delay_ms, claim cleared.
  virtual Result<std::vector<std::string>> Release(std::span<const ReleaseOrder> orders) = 0;
  // Sets lease_expires_at = database now + lease_ms for the rows still owned.
  virtual Result<std::vector<std::string>> Renew(std::span<const Fence> fences,
                                                 int64_t lease_ms) = 0;
  // Every `processing` row whose lease is null or passed goes back to `pending`, attempt kept,
  // claimed_at null. Returns the number of rows moved.
  virtual Result<int64_t> ReclaimExpired() = 0;
  // The poller's wait in capture mode (QueueBox reference §4.4 nextWakeDelayMs, §13.8), where
  // change capture wakes it for new rows but nothing wakes it for a due time: milliseconds from
  // the database's now to the nearest future scheduled_at of a pending row or lease_expires_at
  // of a processing row, clamped to [1, max_wait_ms]; max_wait_ms when there is none.
  // kInvalidArgument unless max_wait_ms >= 1. The default (no capture on the dialect) is
  // max_wait_ms.
  virtual Result<int64_t> NextWakeDelayMs(int64_t max_wait_ms) {
    if (max_wait_ms < 1) return InvalidArgument("NextWakeDelayMs: max_wait_ms must be at least 1");
    return max_wait_ms;
  }
};

// What operators do with the outbox (`queuebox status/replay/dead list`, the admin API,
// retention): read it and move finished rows, never rows in flight.
class OutboxOperations {
 public:
  virtual ~OutboxOperations() = default;

  // A bounded liveness query (health checks). kUnavailable when down.
  virtual Status Ping() = 0;
  virtual Result<OutboxStats> Stats() = 0;
  // What the pending gauges need (`queuebox_outbox_messages_pending`, the oldest pending age, the
  // strict blocker), read every `outbox.pendingGaugeIntervalMs`: rows_by_state holds only
  // "pending", dead_by_topic stays empty. It reads the pending rows only (a partial index), where
  // Stats() reads every row of the table, sent rows included. The default calls Stats().
  virtual Result<OutboxStats> PendingGauges() { return Stats(); }
  // Every topic in the table, sorted.
  virtual Result<std::vector<std::string>> DistinctTopics() = 0;
  // Moves matching `sent`/`dead` rows back to `pending` (attempt 0, due now, error and claim
  // cleared; id and sequence kept). Never touches `pending` or `processing`.
  virtual Result<int64_t> Replay(const ReplayFilter& filter) = 0;
  // Dead rows, newest first; kInvalidArgument unless limit > 0.
  virtual Result<std::vector<DeadRow>> ListDead(int limit) = 0;
  // Retention: deletes up to batch rows of `state` (only "sent" or "dead"; anything else is
  // kInvalidArgument "Cannot delete active work") whose updated_at is older than max_age_ms
  // on the database clock. Returns rows deleted.
  virtual Result<int64_t> DeleteOlderThan(const std::string& state, int64_t max_age_ms,
                                          int batch) = 0;
  // Retention COUNT: deletes up to batch rows of `state` beyond the newest max_count.
  // Both retention deletes remove the deleted rows' attempt history in the same statement.
  virtual Result<int64_t> DeleteBeyondCount(const std::string& state, int64_t max_count,
                                            int batch) = 0;
  // The attempt history of one outbox or inbox row, oldest first (empty when it has none).
  // kFailedPrecondition on a store without the history table.
  virtual Result<std::vector<AttemptRow>> Attempts(const std::string& /*message_id*/) {
    return FailedPrecondition("this store keeps no attempt history");
  }
};

// Key affinity across replicas (QueueBox C++ only; docs/operations.md "Replicas").
// Per-key order allows one row of a key in flight across every replica, so replicas that all
// claim from all keys meet at the same key heads: their claims lock and skip each other's rows
// and the throughput falls as replicas are added (bench/README.md "Scale-out"). Under key
// affinity each replica registers in a replica table with a heartbeat on the database clock and
// claims only its share of the keys. Views of the set may disagree for up to a heartbeat:
// overlapping shares cost contention, never order (the head check decides what is claimable);
// a share nobody holds waits at most until a dead replica's heartbeat expires.
class ReplicaMembership {
 public:
  virtual ~ReplicaMembership() = default;

  // Turns key affinity on for this store's claims. `ttl_ms` (> 0): how long this replica counts
  // as live after its last heartbeat; `name`: shown to operators (host:pid). Call before the
  // first Claim.
  virtual void EnableKeyAffinity(int64_t ttl_ms, const std::string& name) = 0;
  // Registers or refreshes this replica (database clock) and returns its share; the store's
  // Claim calls it after each successful claim, at most once a second, so a replica whose claims
  // fail stops counting after its ttl. Errors as the other statements (kUnavailable, kInternal,
  // e.g. a missing replica table); Claim then takes every key. Affinity off: {1, 0}.
  virtual Result<KeyShare> Heartbeat() = 0;
  // The live replicas of this outbox table in rank order (`queuebox status`); empty without the
  // replica table (never an error: key affinity is optional).
  virtual std::vector<ReplicaInfo> Replicas() = 0;
  // Removes this replica from the set at a graceful stop, so the others take its keys at their
  // next heartbeat instead of after the ttl. Best effort.
  virtual void LeaveReplicaSet() = 0;
};

class OutboxStore : public OutboxClaims, public OutboxOperations {
 public:
  ~OutboxStore() override = default;

  virtual std::string_view dialect() const = 0;  // "postgresql" | "sqlite"

  // Applies the bundled migrations with a history table (queuebox migrate). With a baseline,
  // records versions <= baseline as applied by hand first. Without one, on a database that
  // QueueBox migrated (flyway_schema_history, no history of ours), adopts QueueBox's versions as
  // the baseline. Refuses (kFailedPrecondition): a renamed table or column; outbox tables
  // without a history; a baseline over a history; a Flyway history with a failed or unknown
  // migration.
  virtual Result<MigrateReport> Migrate(std::optional<int> baseline) = 0;

  // Schema guard (QueueBox reference §3.6, SchemaGuard.requireOutboxSequenceColumn); the app
  // calls it at start, after Migrate. kFailedPrecondition when the (mapped) outbox table or its
  // sequence column is missing: the message names the column and ends with the statement that
  // adds it ("... start QueueBox again: ALTER TABLE ..."). The default accepts every schema.
  virtual Status CheckSchema() { return Status::Ok(); }

  // outbox.ordering: strict (docs/claim.md, "Strict order"). From the next claim on, a keyed row
  // is claimed only when no open transaction can still commit a lower sequence of its key, and
  // Stats() reports the oldest transaction holding rows back. Call before the first Claim.
  // kFailedPrecondition when the sequence column is not filled by a sequence with CACHE 1. The
  // default accepts and changes nothing: a dialect whose writers are serialised (SQLite) commits
  // its rows in sequence order, so strict is sequence there.
  virtual Status EnableStrictOrdering() { return Status::Ok(); }

  // Application-side insert (examples, tests, benchmarks). Returns the row id.
  // kInvalidArgument for a payload that is not JSON.
  virtual Result<std::string> Insert(const NewOutboxRow& row) = 0;

  // Turns the attempt history on (outbox.attemptHistory.enabled): from then on an outcome write
  // whose fences carry an AttemptRecord inserts it into outbox_attempts in the same statement,
  // for the outbox and for this store's inbox (its dead forwards). kFailedPrecondition when the
  // table is missing (a mapped schema not migrated), and the history stays off.
  virtual Status EnableAttemptHistory() {
    return FailedPrecondition("this store keeps no attempt history");
  }

  // The figures of the store's connection pool; nullopt when the dialect has none (SQLite).
  // Cheap and thread-safe (metrics read it on every scrape).
  virtual std::optional<ConnectionPoolStats> PoolStats() { return std::nullopt; }

  // This store's replica set under key affinity, owned by the store; nullptr when the dialect
  // has one writer and no replica table (SQLite): every claim then takes every key.
  virtual ReplicaMembership* replica_membership() { return nullptr; }

  // The inbox of this database (database.inboxTableName), owned by the store and sharing its
  // connections: the relay forwards an inbox row into this outbox in one transaction. nullptr
  // for a store without an inbox (the in-memory twin of tests).
  virtual InboxStore* inbox() { return nullptr; }

  // The operator console's reads of this database's outbox and inbox (queuebox/console.h),
  // owned by the store; nullptr for a store without them (the in-memory twin of tests).
  virtual ConsoleQueries* console() { return nullptr; }
};

}  // namespace queuebox
