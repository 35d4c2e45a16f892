// postgres_inbox_store.h: the inbox store on PostgreSQL (QueueBox reference §3.3, §4.6, §11),
// owned by PostgresOutboxStore and sharing its connection pool.
//
// Statements (docs/inbox.md has each one explained):
//   Store      one INSERT ... SELECT FROM unnest(arrays) ... ON CONFLICT DO NOTHING per batch,
//              rows inserted in (source, idempotency_key) order (two writers of overlapping
//              batches take the unique index's locks in one order, so they cannot deadlock);
//              created_at = the statement's clock + n microseconds for the n-th message, so the
//              batch keeps its arrival order. Prepared once per connection (the others here are
//              planned per call).
//   ClaimPush  one transaction: pg_advisory_xact_lock on QueueBox's key for the inbox table (the
//              Java hash of its name, so QueueBox replicas on the same database serialise with
//              ours), then ONE claim statement for the whole batch: the first due pending push
//              rows in (scheduled_at, created_at, id) order, one head per aggregate, none whose
//              aggregate has a push row in `processing`; when those rows are long runs of a few
//              aggregates, a skip scan over idx_inbox_push_head (V19) finds each aggregate's head.
//   Forward    ONE statement: a data-modifying CTE marks the fenced rows `processed` and the
//              INSERT into the outbox reads only the rows that CTE changed.
//   ForwardDue ONE transaction: ClaimPush's advisory lock and claim as a locking SELECT (no lease,
//              no `processing`), the relay's plan per row, then ONE statement marks each row
//              `processed` (inserting its outbox row) or `dead`; each row is written once.
//   ForwardDueInLane  ForwardDue for one of kInboxLanes lanes (docs/inbox.md, "Lanes"): the
//              table's key taken SHARED, the lane's key (table key, lane) tried EXCLUSIVE, the
//              claim restricted to the lane's rows. Lanes run side by side; ClaimPush and
//              ForwardDue (table key exclusive) exclude every lane.
//   Renew, MarkDead, ReclaimExpired, Replay, retention: one statement each.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/inbox.h"
#include "queuebox/store.h"
#include "store/common.h"
#include "store/postgres/claim_window_state.h"
#include "store/postgres/pg_connection.h"
#include "store/postgres/pg_fenced.h"

namespace queuebox::store {

class PostgresInboxStore final : public InboxStore {
 public:
  // `pool` is the outbox store's and must outlive this store. `config` names both tables.
  // `outbox_window` (nullable, must outlive this store): the outbox claim's window state, told of
  // each forward's outbox rows, which lanes may commit behind its start.
  PostgresInboxStore(DatabaseConfig config, PgPool& pool,
                     ClaimWindowState* outbox_window = nullptr);

  Result<std::vector<InboxStoreOutcome>> Store(std::span<const NewInboxMessage> messages) override;
  Result<std::vector<ClaimedInboxRow>> ClaimPush(int limit, int64_t lease_ms) override;
  Result<std::vector<std::string>> Forward(std::span<const InboxForward> forwards) override;
  bool HasForwardDue() const override { return true; }
  Result<InboxForwardDue> ForwardDue(int limit, const InboxForwardPlanner& plan) override;
  int ForwardLanes() const override { return kInboxLanes; }
  Result<InboxDueLanes> DueLanes(int probe_rows) override;
  Result<InboxForwardDue> ForwardDueInLane(int lane, int limit,
                                           const InboxForwardPlanner& plan) override;
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) override;
  Result<std::vector<std::string>> Renew(std::span<const Fence> fences, int64_t lease_ms) override;
  Result<int64_t> ReclaimExpired() override;
  Result<InboxStats> Stats() override;
  Result<double> OldestPendingAgeSeconds() override;
  Result<int64_t> Replay(const InboxReplayFilter& filter) override;
  Result<std::vector<DeadInboxRow>> ListDead(int limit) override;
  Result<int64_t> DeleteOlderThan(const std::string& state, int64_t max_age_ms, int batch) override;
  Result<int64_t> DeleteBeyondCount(const std::string& state, int64_t max_count,
                                    int batch) override;
  // The console's discard: the dead rows among `ids` (UUIDs) with their attempt history.
  Result<int64_t> DiscardDead(const std::vector<std::string>& ids);
  Status CheckSchema() override;
  // From now on a forward that makes a row dead records its attempt in outbox_attempts (the
  // outbox store's EnableAttemptHistory checked the table).
  void EnableAttemptHistory();

  // The claim statement for `config` (names mapped; inbox_claim.sql): $1 limit, $2 lease ms,
  // $3 window rows. For EXPLAIN in bench/ and docs/inbox.md.
  static std::string ClaimSql(const DatabaseConfig& config);
  // ForwardDue's claim (inbox_claim.sql, forward_due): the same CTEs, ending in a locking
  // SELECT; $2 is unused.
  static std::string ForwardDueClaimSql(const DatabaseConfig& config);
  // ForwardDueInLane's claim (inbox_claim.sql, forward_due and lane): ForwardDue's, restricted to
  // the rows of lane $4.
  static std::string LaneClaimSql(const DatabaseConfig& config);
  // The lane of a row (SQL over the row's columns, names mapped): 0 .. kInboxLanes - 1.
  static std::string LaneOf(const DatabaseConfig& config);

  // The number of lanes: a protocol constant. Every replica on one inbox must use the same one
  // (a lane is a hash of the aggregate modulo this), so it is not an option.
  static constexpr int kInboxLanes = 4;

 private:
  // ForwardDue inside its transaction (advisory lock held).
  // The claim and the forward in the transaction `conn` has open with its locks taken, then
  // COMMIT (ROLLBACK on any failure). `lane`: LaneClaimSql for that lane, else ForwardDue's.
  Result<InboxForwardDue> ForwardDueInTransaction(PgConnection& conn, int limit,
                                                  std::optional<int> lane,
                                                  const InboxForwardPlanner& plan);
  // `first_outbox_row`: "<scheduled_at> <sequence>" of the first outbox row inserted, if any.
  Result<InboxForwardDue> ForwardDueLocked(PgConnection& conn, int limit, std::optional<int> lane,
                                           const InboxForwardPlanner& plan,
                                           std::string& first_outbox_row);
  std::string Sql(std::string_view tmpl) const;
  Result<SqlRows> Run(const std::string& tmpl, const std::vector<SqlParam>& params = {},
                      int64_t* changes = nullptr,
                      PgConnection::Plan plan = PgConnection::Plan::kPerCall);
  // The INSERT of Store for `messages` (all checked); outcomes per message.
  Result<std::vector<InboxStoreOutcome>> Insert(const std::vector<const NewInboxMessage*>& batch);

  DatabaseConfig config_;
  PgPool& pool_;
  int64_t claim_lock_key_;  // JavaStringHash(inbox table name)
  ClaimWindowState* outbox_window_;
  PgFencedWrites fenced_;          // alias i; runs on pool_
  const std::string forward_sql_;  // after fenced_, which builds it
};

}  // namespace queuebox::store
