// sqlite_inbox_store.h: the inbox store on SQLite, owned by SqliteOutboxStore and using its one
// connection, mutex and write gate (sqlite_store.h). Schema: docs/schema.md (SQLite types; the
// rowid orders the rows one statement stored, which share a timestamp).
//
// Statements mirror PostgreSQL's (postgres_inbox_store.h) with SQLite's tools: batches are JSON
// arrays read with json_each; every write runs in BEGIN IMMEDIATE, so claims are serialised by
// the database's one writer (no advisory lock); the forward is one transaction of two
// statements (SQLite has no data-modifying CTE): the fenced UPDATE ... RETURNING, then the outbox
// INSERT of exactly the rows it returned.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <string>
#include <vector>

#include "queuebox/inbox.h"
#include "queuebox/store.h"
#include "store/common.h"

namespace queuebox::store {

class SqliteOutboxStore;

class SqliteInboxStore final : public InboxStore {
 public:
  // `outbox` owns this store and outlives it.
  explicit SqliteInboxStore(SqliteOutboxStore& outbox);

  Result<std::vector<InboxStoreOutcome>> Store(std::span<const NewInboxMessage> messages) override;
  Result<std::vector<ClaimedInboxRow>> ClaimPush(int limit, int64_t lease_ms) override;
  Result<std::vector<std::string>> Forward(std::span<const InboxForward> forwards) override;
  bool HasForwardDue() const override { return true; }
  Result<InboxForwardDue> ForwardDue(int limit, const InboxForwardPlanner& plan) override;
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
  Status CheckSchema() override;

  // The claim statement for `config` (names mapped): ?1 limit, ?2 lease ms, ?3 window rows. For
  // EXPLAIN QUERY PLAN in bench/ and docs/inbox.md.
  static std::string ClaimSql(const DatabaseConfig& config);

 private:
  std::string Sql(std::string_view tmpl) const;
  // The INSERT of Store for checked messages; outcomes per message.
  Result<std::vector<InboxStoreOutcome>> Insert(const std::vector<const NewInboxMessage*>& batch);
  Result<std::vector<std::string>> FencedWrite(const std::string& tmpl, const std::string& batch,
                                               std::vector<SqlParam> extra = {});

  SqliteOutboxStore& outbox_;
};

}  // namespace queuebox::store
