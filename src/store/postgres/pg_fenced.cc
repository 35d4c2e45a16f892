#include "store/postgres/pg_fenced.h"

#include <utility>

namespace queuebox::store {

FenceArrays FencedBatch(std::span<const Fence> fences) {
  return FencedBatch(
      fences, [](const Fence& f) -> const Fence& { return f; }, [](const Fence&) {});
}

PgFencedWrites::PgFencedWrites(FencedTable table, Runner run)
    : table_(std::move(table)), run_(std::move(run)) {
  mark_dead_ = Update(
      "{state} = 'dead', {claimed_at} = NULL, {claim_token} = NULL, {lease_expires_at} = NULL, "
      "{last_error} = f.qb_error" +
          table_.touch,
      "$1::uuid[], $2::uuid[], $3::text[]", "qb_id, qb_token, qb_error");
  renew_ = Update("{lease_expires_at} = clock_timestamp() + $3::bigint" + std::string(kMs),
                  "$1::uuid[], $2::uuid[]", "qb_id, qb_token");
  // SKIP LOCKED: a row whose lease expired while a replica writes its outcome or renews it is
  // locked by that write; waiting for it could deadlock with the write's other rows (locked in
  // id order, InIdOrder). The write's fence rejects an expired lease, so the row is still
  // expired afterwards and the next reclaim (every claimTimeoutMs / 5) returns it.
  reclaim_ = "UPDATE {T} SET {state} = 'pending', {claimed_at} = NULL" + table_.touch +
             " WHERE {id} IN (SELECT r.{id} FROM {T} AS r WHERE r.{state} = 'processing' AND " +
             table_.reclaim_only +
             "(r.{lease_expires_at} IS NULL OR r.{lease_expires_at} <= clock_timestamp()) "
             "FOR UPDATE OF r SKIP LOCKED)";
}

std::string PgFencedWrites::FencePredicate(const std::string& source) const {
  const std::string& a = table_.alias;
  return a + ".{id} = " + source + ".qb_id AND " + a + ".{claim_token} = " + source +
         ".qb_token AND " + a + ".{state} = 'processing' AND " + a +
         ".{lease_expires_at} > clock_timestamp()";
}

std::string PgFencedWrites::Update(const std::string& set, const std::string& unnest,
                                   const std::string& names) const {
  const std::string& a = table_.alias;
  return "UPDATE {T} AS " + a + " SET " + set + " FROM unnest(" + unnest + ") AS f(" + names +
         ") WHERE " + FencePredicate("f") + " RETURNING " + a + ".{id}::text";
}

Result<std::vector<std::string>> PgFencedWrites::Ids(const std::string& tmpl,
                                                     const std::vector<SqlParam>& params) const {
  QB_ASSIGN_OR_RETURN(SqlRows rows, run_(tmpl, params, nullptr, PgConnection::Plan::kPerCall));
  return FirstColumn(rows);
}

Result<std::vector<std::string>> PgFencedWrites::MarkDead(std::span<const DeadOrder> orders) const {
  std::vector<std::string> errors;
  FenceArrays batch = FencedBatch(
      orders, [](const DeadOrder& o) -> const Fence& { return o.fence; },
      [&](const DeadOrder& o) { errors.push_back(o.error); });
  if (batch.empty()) return std::vector<std::string>{};
  return Ids(mark_dead_, {PgArray(batch.ids), PgArray(batch.tokens), PgArray(errors)});
}

Result<std::vector<std::string>> PgFencedWrites::Renew(std::span<const Fence> fences,
                                                       int64_t lease_ms) const {
  FenceArrays batch = FencedBatch(fences);
  if (batch.empty()) return std::vector<std::string>{};
  QB_RETURN_IF_ERROR(ValidateClaim(1, lease_ms));
  return Ids(renew_, {PgArray(batch.ids), PgArray(batch.tokens), lease_ms});
}

Result<int64_t> PgFencedWrites::ReclaimExpired() const {
  int64_t changes = 0;
  QB_RETURN_IF_ERROR(run_(reclaim_, {}, &changes, PgConnection::Plan::kCached).status());
  return changes;
}

}  // namespace queuebox::store
