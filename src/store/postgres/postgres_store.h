// postgres_store.h: the outbox store on PostgreSQL 13+ (libpq), the seed's table exactly.
//
// Every statement names the mapped table and columns (double-quoted) and uses clock_timestamp()
// for every time decision. The claim is one statement (claim.sql; docs/claim.md) whose inputs
// from earlier claims come from ClaimWindowState and whose key share comes from ReplicaHeartbeat;
// fenced writes are one UPDATE ... FROM unnest(arrays) per batch (pg_fenced.h, shared with the
// inbox store). Connections come from a pool of database.poolSize (pg_connection.h).
//
// Terminal writes (sent, retry, dead) clear claim_token and lease_expires_at; reclaim keeps them
// like QueueBox does (the state change already makes the old token useless).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "queuebox/store.h"
#include "store/console_sql.h"
#include "store/postgres/claim_window_state.h"
#include "store/postgres/pg_connection.h"
#include "store/postgres/pg_fenced.h"
#include "store/postgres/postgres_inbox_store.h"
#include "store/postgres/replica_heartbeat.h"
#include "store/postgres/strict_order.h"

namespace queuebox::store {

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
  Result<std::vector<std::string>> Release(std::span<const ReleaseOrder> orders) override;
  Result<std::vector<std::string>> Renew(std::span<const Fence> fences, int64_t lease_ms) override;
  Result<int64_t> ReclaimExpired() override;
  Result<std::string> Insert(const NewOutboxRow& row) override;
  // Strict order (strict_order.h): resolves the sequence column's sequence and requires CACHE 1
  // (a cached value could be handed out below the last value read).
  Status EnableStrictOrdering() override;
  // Under strict order also the oldest open transaction holding the sequence's lock.
  Result<OutboxStats> Stats() override;
  Result<OutboxStats> PendingGauges() override;
  // Rounded up to whole milliseconds. Two index probes (idx_outbox_pending_due; the processing
  // rows through idx_outbox_processing_claimed).
  Result<int64_t> NextWakeDelayMs(int64_t max_wait_ms) override;
  Result<std::vector<std::string>> DistinctTopics() override;
  Result<int64_t> Replay(const ReplayFilter& filter) override;
  Result<std::vector<DeadRow>> ListDead(int limit) override;
  Result<int64_t> DeleteOlderThan(const std::string& state, int64_t max_age_ms, int batch) override;
  Result<int64_t> DeleteBeyondCount(const std::string& state, int64_t max_count,
                                    int batch) override;
  Result<std::vector<AttemptRow>> Attempts(const std::string& message_id) override;
  Status EnableAttemptHistory() override;
  // Key affinity through queuebox_relay_replicas (ReplicaHeartbeat).
  ReplicaMembership* replica_membership() override { return &heartbeat_; }
  // The inbox on the same pool (postgres_inbox_store.h).
  InboxStore* inbox() override { return &inbox_; }
  std::optional<ConnectionPoolStats> PoolStats() override { return pool_.Stats(); }
  // The console's reads on the same pool (console_sql.h).
  ConsoleQueries* console() override { return &console_; }

 private:
  // Strict ordering on: the oldest transaction holding rows back, into stats.strict_blocker.
  Status ReadStrictBlocker(OutboxStats& stats);
  class Migrator;

  PostgresOutboxStore(DatabaseConfig config, PgSettings settings);
  std::string Sql(std::string_view tmpl) const;
  // Runs one rendered statement on a pooled connection.
  Result<SqlRows> Run(const std::string& tmpl, const std::vector<SqlParam>& params = {},
                      int64_t* changes = nullptr,
                      PgConnection::Plan plan = PgConnection::Plan::kCached);
  // Strict order: one reading on `conn` (the sequence's last value, then its holders), observed
  // under strict_mu_.
  Result<StrictOrderBound::Reading> StrictReading(PgConnection& conn);
  // Runs one rendered statement whose result is read by column name.
  Result<SqlTable> RunTable(const std::string& tmpl, const std::vector<SqlParam>& params);
  // Ids of an outcome (sent, retry, dead) as given: a changed row frees its key's next row, so the
  // claim's key walk is allowed again (ClaimWindowState::OutcomeWritten).
  Result<std::vector<std::string>> OutcomeIds(Result<std::vector<std::string>> ids);
  // ScheduleRetry and Release (RetryOrder / ReleaseOrder): one fenced statement, `tmpl`
  // (retry_sql_ or release_sql_).
  template <typename Order>
  Result<std::vector<std::string>> Reschedule(const std::string& tmpl, const std::string& recorded,
                                              std::span<const Order> orders);

  DatabaseConfig config_;
  PgPool pool_;
  ClaimWindowState window_;
  PgFencedWrites fenced_;  // alias o; runs on pool_

  // Strict order: set by EnableStrictOrdering before the first claim, then read only.
  bool strict_ = false;
  // CheckSchema found the payload column jsonb, read as UTF-8: claimed rows carry payload_is_json.
  std::atomic<bool> payload_is_json_{false};
  std::string strict_sequence_;  // the sequence column's sequence, as regclass text
  std::mutex strict_mu_;         // one reading and its Observe at a time
  StrictOrderBound strict_order_;

  ReplicaHeartbeat heartbeat_;  // after window_: a share change resets it
  PostgresInboxStore inbox_;    // after pool_ and window_, which it uses
  // The outbox's own fenced templates (after fenced_, which builds them).
  const std::string sent_sql_, retry_sql_, release_sql_;
  // The same with the attempt history (PgFencedWrites::Recorded).
  const std::string sent_recorded_, retry_recorded_, release_recorded_;
  SqlConsole console_;  // after pool_, fenced_ and inbox_, which it uses
  // claim.sql rendered for the mapped table, without and with strict order: rendered once, not
  // per claim (the template is ~12 KB; rendering it cost ~4 % of the relay's instructions).
  const std::string claim_sql_, claim_strict_sql_;
};

}  // namespace queuebox::store
