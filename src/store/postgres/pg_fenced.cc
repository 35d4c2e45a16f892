#include "store/postgres/pg_fenced.h"

#include <utility>

namespace queuebox::store {

FenceArrays FencedBatch(std::span<const Fence> fences) {
  return FencedBatch(
      fences, [](const Fence& f) -> const Fence& { return f; }, [](const Fence&) {});
}

void HistoryArrays::Add(const Fence& f) {
  const AttemptRecord r = f.record.value_or(AttemptRecord{});
  attempts.push_back(std::to_string(r.attempt));
  destinations.push_back(r.destination);
  durations.push_back(std::to_string(r.duration_ms));
  answers.push_back(r.answer);
}

void HistoryArrays::AppendTo(std::vector<SqlParam>& params) const {
  params.push_back(PgArray(attempts));
  params.push_back(PgArray(destinations));
  params.push_back(PgArray(durations));
  params.push_back(PgArray(answers));
}

PgFencedWrites::PgFencedWrites(FencedTable table, Runner run)
    : table_(std::move(table)), run_(std::move(run)) {
  const std::string dead_set =
      "{state} = 'dead', {claimed_at} = NULL, {claim_token} = NULL, {lease_expires_at} = NULL, "
      "{last_error} = f.qb_error" +
      table_.touch;
  mark_dead_ = Update(dead_set, "$1::uuid[], $2::uuid[], $3::text[]", "qb_id, qb_token, qb_error");
  mark_dead_recorded_ = Recorded(dead_set, "$1::uuid[], $2::uuid[], $3::text[]",
                                 "qb_id, qb_token, qb_error", 4, kAttemptDead, true);
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

std::string PgFencedWrites::Recorded(const std::string& set, const std::string& unnest,
                                     const std::string& names, int first_param,
                                     std::string_view outcome, bool has_error) const {
  const std::string& a = table_.alias;
  auto p = [first_param](int i) { return "$" + std::to_string(first_param + i); };
  const std::string write =
      "UPDATE {T} AS " + a + " SET " + set + " FROM unnest(" + unnest + ", " + p(0) + "::int[], " +
      p(1) + "::text[], " + p(2) + "::bigint[], " + p(3) + "::text[]) AS f(" + names +
      ", qb_attempt, qb_dest, qb_ms, qb_answer) WHERE " + FencePredicate("f") + " RETURNING " + a +
      ".{id} AS qb_rid, f.qb_attempt, f.qb_dest, f.qb_ms, f.qb_answer, " +
      (has_error ? "f.qb_error" : "NULL::text") + " AS qb_err";
  return "WITH qb_w AS (" + write +
         "), qb_h AS (INSERT INTO outbox_attempts (message_id, attempt, row_table, destination, "
         "outcome, duration_ms, answer, error) SELECT qb_rid, qb_attempt, '" +
         table_.row_table + "', NULLIF(qb_dest, ''), '" + std::string(outcome) +
         "', NULLIF(qb_ms, -1), NULLIF(qb_answer, ''), qb_err FROM qb_w) "
         "SELECT qb_rid::text FROM qb_w";
}

Result<bool> PgFencedWrites::HistoryTableExists() const {
  const int known = history_table_.load();
  if (known >= 0) return known == 1;
  QB_ASSIGN_OR_RETURN(SqlRows rows, run_("SELECT to_regclass('outbox_attempts') IS NOT NULL", {},
                                         nullptr, PgConnection::Plan::kCached));
  const bool exists = !rows.empty() && rows[0][0] == "t";
  history_table_ = exists ? 1 : 0;
  return exists;
}

// A MATERIALIZED CTE: `IN (subquery ... LIMIT)` can be planned as a rescanned semi-join inner
// side, each rescan taking another batch. With the history table, the deleted rows' attempts go
// in the same statement.
Result<int64_t> PgFencedWrites::DeleteWithHistory(const std::string& doomed,
                                                  const std::vector<SqlParam>& params) const {
  const std::string with = "WITH doomed AS MATERIALIZED (" + doomed + ")";
  const std::string del =
      "DELETE FROM {T} WHERE {state} = $1 AND {id} IN (SELECT qb_id FROM doomed)";
  QB_ASSIGN_OR_RETURN(bool history, HistoryTableExists());
  if (!history) {
    int64_t changes = 0;
    QB_RETURN_IF_ERROR(
        run_(with + " " + del, params, &changes, PgConnection::Plan::kCached).status());
    return changes;
  }
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      run_(with + ", qb_gone AS (" + del +
               " RETURNING {id} AS qb_id), qb_h AS (DELETE FROM outbox_attempts AS h WHERE "
               "h.message_id IN (SELECT qb_id FROM qb_gone)) SELECT count(*) FROM qb_gone",
           params, nullptr, PgConnection::Plan::kCached));
  return rows.empty() ? 0 : IntOr(rows[0][0], 0);
}

Result<std::vector<std::string>> PgFencedWrites::Ids(const std::string& tmpl,
                                                     const std::vector<SqlParam>& params) const {
  QB_ASSIGN_OR_RETURN(SqlRows rows, run_(tmpl, params, nullptr, PgConnection::Plan::kPerCall));
  return FirstColumn(std::move(rows));
}

Result<std::vector<std::string>> PgFencedWrites::MarkDead(std::span<const DeadOrder> orders) const {
  std::vector<std::string> errors;
  HistoryArrays history;
  const bool recording = !orders.empty() && Recording(orders.front().fence);
  FenceArrays batch = FencedBatch(
      orders, [](const DeadOrder& o) -> const Fence& { return o.fence; },
      [&](const DeadOrder& o) {
        errors.push_back(o.error);
        if (recording) history.Add(o.fence);
      });
  if (batch.empty()) return std::vector<std::string>{};
  std::vector<SqlParam> params{PgArray(batch.ids), PgArray(batch.tokens), PgArray(errors)};
  if (!recording) return Ids(mark_dead_, params);
  history.AppendTo(params);
  return Ids(mark_dead_recorded_, params);
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
