#include "store/postgres/postgres_inbox_store.h"

#include <algorithm>
#include <exception>
#include <map>
#include <utility>

#include "store/inbox_common.h"
#include "store/postgres/pg_arrays.h"

namespace queuebox::store {
namespace {

// A PostgreSQL array literal whose unset elements are NULL.
std::string PgArrayOrNull(const std::vector<std::optional<std::string>>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    if (!items[i]) {
      out += "NULL";
      continue;
    }
    out += '"';
    for (char c : *items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

// UPDATE ... FROM unnest(<arrays>) AS f(<names>), fenced by id, token, state and lease.
std::string FencedInboxUpdate(const std::string& set, const std::string& unnest,
                              const std::string& names) {
  return "UPDATE {T} AS i SET " + set + " FROM unnest(" + unnest + ") AS f(" + names +
         ") WHERE i.{id} = f.qb_id AND i.{claim_token} = f.qb_token"
         " AND i.{state} = 'processing' AND i.{lease_expires_at} > clock_timestamp()"
         " RETURNING i.{id}::text";
}

// The claim (docs/inbox.md, "The claim"). $1 limit, $2 lease ms, $3 window rows.
// - qb_window: the first $3 due pending push rows in claim order (idx_inbox_consumption_pending,
//   then an incremental sort on created_at, id).
// - qb_fast: the first row of each aggregate in the window (the window is a prefix of the claim
//   order, so that row is the aggregate's head), unless a push row of the aggregate is in
//   `processing` (idx_inbox_aggregate_state); rows without an aggregate are their own group.
// - qb_gate: true when qb_fast found fewer than $1 rows and the window was full: the window
//   holds long runs of a few aggregates, and heads of others may lie beyond it.
// - only then: qb_aggs, a skip scan over idx_inbox_push_head (one seek per aggregate with a
//   pending push row), each aggregate's first entry (its head) in qb_slow when due and not busy,
//   plus the first $1 due rows without an aggregate; the first $1 of those in claim order.
// - qb_locked: the picked rows still pending, locked, SKIP LOCKED. A skipped head is never
//   replaced by a later row of its aggregate, which is not picked.
// Claimers that could take rows of one aggregate run this one at a time (the advisory locks:
// the table's key, or its key shared plus the aggregate's lane): each sees the claims committed
// before it, so two claimers never take two rows of one aggregate.
// `tail` follows the CTEs: the two-step claim's UPDATE (ClaimTail) or ForwardDue's locking SELECT
// (ForwardDueTail).
// The lane of a row over `agg` (its aggregate id) and `id` (docs/inbox.md, "Lanes"): hashtext
// of the aggregate id, of the id for a row without one, masked to kInboxLanes (a power of two).
// Always computed by the database all replicas share, so they agree on it.
std::string LaneExpr(const std::string& agg, const std::string& id) {
  static_assert((PostgresInboxStore::kInboxLanes & (PostgresInboxStore::kInboxLanes - 1)) == 0);
  return "(hashtext(coalesce(" + agg + ", " + id + "::text)) & " +
         std::to_string(PostgresInboxStore::kInboxLanes - 1) + ")";
}

// `lane`: only the rows of lane $4 (ForwardDueInLane). The window, the slow path's heads and its
// rows without an aggregate are filtered; the skip scan still visits every aggregate (a filter
// there would read past the index entries of the other lanes' aggregates).
std::string ClaimTemplate(const std::string& tail, bool lane = false) {
  // int4eq(), not `=`: the planner gives a function call 1/3 of the rows, but an `=` on an
  // expression without statistics 1/200; with 1/200 it judged the window's ordered read of
  // idx_inbox_push_due too long and sorted every pending row instead (20,000 rows: 17.8 ms
  // against 2.5 ms).
  const std::string in_lane =
      lane ? " AND int4eq(" + LaneExpr("{aggregate_id}", "{id}") + ", $4::int)" : std::string();
  const std::string head_in_lane =
      lane ? " AND int4eq(" + LaneExpr("a.qb_agg", "NULL::uuid") + ", $4::int)" : std::string();
  const std::string pending_push = "{consumption} = 'push' AND {state} = 'pending'";
  const std::string order = "qb_at, qb_created, qb_id";
  auto not_busy = [](const std::string& agg) {
    return "NOT EXISTS (SELECT 1 FROM {T} AS b WHERE b.{aggregate_id} = " + agg +
           " AND b.{state} = 'processing' AND b.{consumption} = 'push')";
  };
  const std::string gate = "(SELECT qb_on FROM qb_gate)";
  return "WITH RECURSIVE "
         "qb_window AS MATERIALIZED (SELECT {id} AS qb_id, {aggregate_id} AS qb_agg, "
         "{scheduled_at} AS qb_at, {created_at} AS qb_created FROM {T} WHERE " +
         pending_push + " AND {scheduled_at} <= clock_timestamp()" + in_lane +
         " ORDER BY {scheduled_at}, {created_at}, {id} LIMIT $3), "
         "qb_fast AS MATERIALIZED (SELECT qb_id, qb_at, qb_created FROM (SELECT w.*, "
         "row_number() OVER (PARTITION BY coalesce(w.qb_agg, '#' || w.qb_id::text) "
         "ORDER BY " +
         order + ") AS qb_n FROM qb_window AS w) AS w WHERE qb_n = 1 AND (qb_agg IS NULL OR " +
         not_busy("w.qb_agg") + ") ORDER BY " + order +
         " LIMIT $1), "
         "qb_gate AS MATERIALIZED (SELECT (SELECT count(*) FROM qb_fast) < $1 AND "
         "(SELECT count(*) FROM qb_window) >= $3 AS qb_on), "
         "qb_aggs (qb_agg) AS ((SELECT {aggregate_id} FROM {T} WHERE " +
         gate + " AND " + pending_push +
         " AND {aggregate_id} IS NOT NULL ORDER BY {aggregate_id} LIMIT 1) "
         "UNION ALL SELECT (SELECT n.{aggregate_id} FROM {T} AS n WHERE n.{consumption} = 'push' "
         "AND n.{state} = 'pending' AND n.{aggregate_id} > a.qb_agg ORDER BY n.{aggregate_id} "
         "LIMIT 1) FROM qb_aggs AS a WHERE a.qb_agg IS NOT NULL), "
         "qb_slow AS (SELECT qb_id FROM (SELECT h.* FROM qb_aggs AS a CROSS JOIN LATERAL "
         "(SELECT {id} AS qb_id, {scheduled_at} AS qb_at, {created_at} AS qb_created FROM {T} "
         "WHERE " +
         pending_push +
         " AND {aggregate_id} = a.qb_agg ORDER BY {scheduled_at}, {created_at}, {id} LIMIT 1) "
         "AS h WHERE a.qb_agg IS NOT NULL" +
         head_in_lane + " AND h.qb_at <= clock_timestamp() AND " + not_busy("a.qb_agg") +
         " UNION ALL SELECT * FROM (SELECT {id}, {scheduled_at}, {created_at} FROM {T} WHERE " +
         gate + " AND " + pending_push +
         " AND {aggregate_id} IS NULL AND {scheduled_at} <= clock_timestamp()" + in_lane +
         " ORDER BY {scheduled_at}, {created_at}, {id} LIMIT $1) AS u) AS s ORDER BY " + order +
         " LIMIT $1), "
         "qb_pick AS (SELECT qb_id FROM qb_fast WHERE NOT " +
         gate + " UNION ALL SELECT qb_id FROM qb_slow)" + tail;
}

// The picked rows (primary-key lookups) that are still pending push rows. The ids come as an
// array and the state test is wrapped in IS TRUE so that the only index that can serve it is
// the primary key: on a table without statistics (a fresh inbox that just took a burst) the
// planner otherwise scanned idx_inbox_push_due's every pending row once per picked row (4 s for
// 100 picks over 20,000 rows, 10 ms this way).
constexpr const char* kPickedStillPending =
    "l.{id} = ANY (ARRAY(SELECT qb_id FROM qb_pick)) AND (l.{consumption} = 'push' AND "
    "l.{state} = 'pending') IS TRUE";

// The picked rows still pending, locked (SKIP LOCKED), claimed under a lease of $2 ms.
std::string ClaimTail() {
  return ", qb_locked AS (SELECT l.{id} AS qb_id FROM {T} AS l WHERE " +
         std::string(kPickedStillPending) +
         " FOR UPDATE OF l SKIP LOCKED) "
         "UPDATE {T} AS u SET {state} = 'processing', {claimed_at} = clock_timestamp(), "
         "{claim_token} = gen_random_uuid(), {lease_expires_at} = clock_timestamp() + $2::bigint" +
         std::string(kMs) +
         " FROM qb_locked WHERE u.{id} = qb_locked.qb_id RETURNING u.{id}::text, u.{source}, "
         "u.{idempotency_key}, u.{aggregate_id}, u.{event_type}, u.{correlation_id}, "
         "u.{headers}::text, u.{attempt}, u.{claim_token}::text, " +
         Ts("u.{created_at}") + ", " + Ts("u.{scheduled_at}");
}

// The picked rows still pending, locked until the transaction ends (SKIP LOCKED), unchanged. $2
// is unused (no lease) but kept so both claims take the same parameters.
std::string ForwardDueTail() {
  return " SELECT l.{id}::text, l.{source}, l.{idempotency_key}, l.{aggregate_id}, "
         "l.{event_type}, l.{correlation_id}, l.{headers}::text, l.{attempt}, $2::bigint::text, " +
         Ts("l.{created_at}") + ", " + Ts("l.{scheduled_at}") + " FROM {T} AS l WHERE " +
         kPickedStillPending + " FOR UPDATE OF l SKIP LOCKED";
}

void SortInClaimOrder(std::vector<ClaimedInboxRow>& rows) {
  // RETURNING order is undefined: claim order.
  std::sort(rows.begin(), rows.end(), [](const ClaimedInboxRow& a, const ClaimedInboxRow& b) {
    return std::tie(a.scheduled_at, a.created_at, a.id) <
           std::tie(b.scheduled_at, b.created_at, b.id);
  });
}

}  // namespace

PostgresInboxStore::PostgresInboxStore(DatabaseConfig config, PgPool& pool,
                                       ClaimWindowState* outbox_window)
    : config_(std::move(config)),
      pool_(pool),
      claim_lock_key_(JavaStringHash(config_.inbox_table)),
      outbox_window_(outbox_window) {}

std::string PostgresInboxStore::Sql(std::string_view tmpl) const {
  return RenderInboxSql(tmpl, config_);
}

std::string PostgresInboxStore::ClaimSql(const DatabaseConfig& config) {
  static const std::string tmpl = ClaimTemplate(ClaimTail());
  return RenderInboxSql(tmpl, config);
}

std::string PostgresInboxStore::ForwardDueClaimSql(const DatabaseConfig& config) {
  static const std::string tmpl = ClaimTemplate(ForwardDueTail());
  return RenderInboxSql(tmpl, config);
}

std::string PostgresInboxStore::LaneClaimSql(const DatabaseConfig& config) {
  static const std::string tmpl = ClaimTemplate(ForwardDueTail(), true);
  return RenderInboxSql(tmpl, config);
}

std::string PostgresInboxStore::LaneOf(const DatabaseConfig& config) {
  return RenderInboxSql(LaneExpr("{aggregate_id}", "{id}"), config);
}

Result<SqlRows> PostgresInboxStore::Run(const std::string& tmpl,
                                        const std::vector<SqlParam>& params, int64_t* changes,
                                        PgConnection::Plan plan) {
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  return conn->Query(Sql(tmpl), params, changes, plan);
}

Result<std::vector<InboxStoreOutcome>> PostgresInboxStore::Store(
    std::span<const NewInboxMessage> messages) {
  return StoreInboxBatch(
      messages, [this](const std::vector<const NewInboxMessage*>& batch) { return Insert(batch); });
}

Result<std::vector<InboxStoreOutcome>> PostgresInboxStore::Insert(
    const std::vector<const NewInboxMessage*>& batch) {
  std::vector<std::string> sources, keys, payloads, headers, consumptions, states, delays;
  std::vector<std::optional<std::string>> aggs, events, corrs, errors, publish, ids;
  for (const NewInboxMessage* m : batch) {
    ids.push_back(m->id.empty() ? std::nullopt : std::optional<std::string>(m->id));
    sources.push_back(m->source);
    keys.push_back(m->idempotency_key);
    aggs.push_back(m->aggregate_id);
    events.push_back(m->event_type);
    corrs.push_back(m->correlation_id);
    payloads.push_back(m->payload);
    headers.push_back(m->headers);
    consumptions.push_back(std::string(ConsumptionName(m->consumption)));
    states.push_back(m->dead ? kInboxStateDead : kInboxStatePending);
    errors.push_back(m->dead ? std::optional<std::string>(m->last_error) : std::nullopt);
    delays.push_back(std::to_string(m->delay_ms));
    publish.push_back(m->publish_time_ms
                          ? std::optional<std::string>(std::to_string(*m->publish_time_ms))
                          : std::nullopt);
  }
  // created_at: the statement's clock plus n microseconds for the n-th message (arrival order).
  // scheduled_at (QueueBox reference §11.5): min(publish time, now) + delay with a publish time,
  // else created_at + delay; a dead row none. The first occurrence of a key within the batch is
  // inserted, in (source, idempotency_key) order.
  static const std::string tmpl =
      "WITH qb_in AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], "
      "$5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bigint[], "
      "$12::bigint[], $13::uuid[]) WITH ORDINALITY AS m(qb_source, qb_key, qb_agg, qb_event, "
      "qb_corr, qb_payload, qb_headers, qb_consumption, qb_state, qb_error, qb_delay, qb_publish, "
      "qb_id, qb_ord)), "
      "qb_now AS MATERIALIZED (SELECT clock_timestamp() AS qb_t), "
      "qb_first AS (SELECT DISTINCT ON (qb_source, qb_key) qb_in.*, qb_now.qb_t + (qb_ord - 1) * "
      "interval '1 microsecond' AS qb_created, qb_now.qb_t FROM qb_in, qb_now "
      "ORDER BY qb_source, qb_key, qb_ord) "
      "INSERT INTO {T} ({id}, {source}, {idempotency_key}, {aggregate_id}, {event_type}, "
      "{correlation_id}, {payload}, {headers}, {consumption}, {state}, {last_error}, {created_at}, "
      "{scheduled_at}) SELECT COALESCE(qb_id, gen_random_uuid()), qb_source, qb_key, qb_agg, "
      "qb_event, qb_corr, qb_payload::jsonb, "
      "qb_headers::jsonb, qb_consumption, qb_state, qb_error, qb_created, CASE "
      "WHEN qb_state = 'dead' THEN qb_created "
      "WHEN qb_publish IS NOT NULL THEN LEAST(to_timestamp(qb_publish / 1000.0), qb_t) + "
      "qb_delay" +
      std::string(kMs) + " ELSE qb_created + qb_delay" + std::string(kMs) +
      " END FROM qb_first ORDER BY qb_source, qb_key "
      "ON CONFLICT DO NOTHING RETURNING {id}::text, {source}, {idempotency_key}";
  // Prepared once per connection (kCached): the statement joins no table, so a generic plan
  // cannot pick a bad join for a large batch, and an unnamed statement cost a parse, analysis
  // and plan per batch (bench/README.md, "Stored webhook requests/s").
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run(tmpl,
                                        {PgArray(sources), PgArray(keys), PgArrayOrNull(aggs),
                                         PgArrayOrNull(events), PgArrayOrNull(corrs),
                                         PgArray(payloads), PgArray(headers), PgArray(consumptions),
                                         PgArray(states), PgArrayOrNull(errors), PgArray(delays),
                                         PgArrayOrNull(publish), PgArrayOrNull(ids)},
                                        nullptr, PgConnection::Plan::kCached));
  std::map<std::pair<std::string, std::string>, std::string> inserted;
  for (const SqlRow& r : rows) {
    if (r.size() < 3 || !r[0] || !r[1] || !r[2])
      return Internal("The inbox insert returned no id.");
    inserted[{*r[1], *r[2]}] = *r[0];
  }
  std::vector<InboxStoreOutcome> out;
  out.reserve(batch.size());
  for (const NewInboxMessage* m : batch) {
    auto it = inserted.find({m->source, m->idempotency_key});
    if (it == inserted.end()) {
      out.push_back({InboxStoreOutcome::Kind::kDuplicate, "", Status::Ok()});
      continue;
    }
    out.push_back({InboxStoreOutcome::Kind::kStored, std::move(it->second), Status::Ok()});
    inserted.erase(it);  // a later message with the same key is a duplicate
  }
  return out;
}

Result<std::vector<ClaimedInboxRow>> PostgresInboxStore::ClaimPush(int limit, int64_t lease_ms) {
  QB_RETURN_IF_ERROR(ValidateClaim(limit, lease_ms));
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  // One claimer of this inbox at a time (docs/inbox.md, "The claim"); released at COMMIT.
  QB_RETURN_IF_ERROR(
      conn->Exec("BEGIN; SELECT pg_advisory_xact_lock(" + std::to_string(claim_lock_key_) + ")"));
  Result<SqlRows> rows = conn->Query(
      ClaimSql(config_), {int64_t{limit}, lease_ms, int64_t{limit} * kClaimWindowFactor}, nullptr,
      PgConnection::Plan::kPerCall);
  if (!rows.ok()) {
    (void)conn->Exec("ROLLBACK");
    return rows.status();
  }
  QB_RETURN_IF_ERROR(conn->Exec("COMMIT"));
  std::vector<ClaimedInboxRow> out;
  out.reserve(rows->size());
  for (const SqlRow& r : *rows) out.push_back(ToClaimedInboxRow(r));
  SortInClaimOrder(out);
  return out;
}

Result<InboxForwardDue> PostgresInboxStore::ForwardDue(int limit, const InboxForwardPlanner& plan) {
  QB_RETURN_IF_ERROR(ValidateClaim(limit, 1));
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  // The claim's advisory lock (as ClaimPush), held until COMMIT: the next claimer sees these rows
  // `processed`, so it takes the next row of an aggregate only after this one's outbox row.
  QB_RETURN_IF_ERROR(
      conn->Exec("BEGIN; SELECT pg_advisory_xact_lock(" + std::to_string(claim_lock_key_) + ")"));
  return ForwardDueInTransaction(*conn, limit, std::nullopt, plan);
}

Result<InboxForwardDue> PostgresInboxStore::ForwardDueInLane(int lane, int limit,
                                                             const InboxForwardPlanner& plan) {
  QB_RETURN_IF_ERROR(ValidateClaim(limit, 1));
  if (lane < 0 || lane >= kInboxLanes) return InvalidArgument("The lane is out of range.");
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  // The table's key SHARED (ClaimPush, ForwardDue and claimers without lanes hold it exclusive,
  // so they wait for every lane and every lane for them), then the lane's key (the two-int form:
  // another lock space than the table's bigint key) tried: a lane held elsewhere is skipped, not
  // waited for. Both until COMMIT.
  const std::string key = std::to_string(claim_lock_key_);
  QB_RETURN_IF_ERROR(conn->Exec("BEGIN; SELECT pg_advisory_xact_lock_shared(" + key + ")"));
  Result<SqlRows> got = conn->Query("SELECT pg_try_advisory_xact_lock(" + key + "::int, " +
                                    std::to_string(lane) + ")");
  if (!got.ok() || got->size() != 1 || (*got)[0].empty() || !(*got)[0][0]) {
    (void)conn->Exec("ROLLBACK");
    return got.ok() ? Internal("The lane lock returned no row.") : got.status();
  }
  if (*(*got)[0][0] != "t") {
    QB_RETURN_IF_ERROR(conn->Exec("ROLLBACK"));
    InboxForwardDue busy;
    busy.lane_busy = true;
    return busy;
  }
  return ForwardDueInTransaction(*conn, limit, lane, plan);
}

Result<InboxDueLanes> PostgresInboxStore::DueLanes(int probe_rows) {
  if (probe_rows <= 0) return InvalidArgument("The probe must be above 0 rows.");
  // The window's first rows (idx_inbox_push_due, in order), their lanes.
  static const std::string tmpl =
      "SELECT " + LaneExpr("{aggregate_id}", "{id}") +
      " FROM {T} WHERE {consumption} = 'push' AND {state} = 'pending' AND {scheduled_at} <= "
      "clock_timestamp() ORDER BY {scheduled_at}, {created_at}, {id} LIMIT $1::int";
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run(tmpl, {int64_t{probe_rows}}));
  std::vector<bool> seen(kInboxLanes, rows.size() >= static_cast<size_t>(probe_rows));
  for (const SqlRow& r : rows) {
    if (r.empty() || !r[0]) continue;
    const int lane = std::stoi(*r[0]);
    if (lane >= 0 && lane < kInboxLanes) seen[static_cast<size_t>(lane)] = true;
  }
  InboxDueLanes out;
  out.probe_full = rows.size() >= static_cast<size_t>(probe_rows);
  for (int lane = 0; lane < kInboxLanes; ++lane) {
    if (seen[static_cast<size_t>(lane)]) out.lanes.push_back(lane);
  }
  return out;
}

Result<InboxForwardDue> PostgresInboxStore::ForwardDueInTransaction(
    PgConnection& conn, int limit, std::optional<int> lane, const InboxForwardPlanner& plan) {
  Result<InboxForwardDue> done = Internal("the forward did not run");
  std::string first_outbox_row;
  try {
    done = ForwardDueLocked(conn, limit, lane, plan, first_outbox_row);
  } catch (const std::exception& e) {  // roll back rather than return a connection mid-transaction
    done = Internal(std::string("the forward failed: ") + e.what());
  }
  if (!done.ok()) {
    (void)conn.Exec("ROLLBACK");
    return done.status();
  }
  QB_RETURN_IF_ERROR(conn.Exec("COMMIT"));
  // Lanes commit side by side, so these outbox rows may sit behind the outbox claim's window
  // start (docs/inbox.md, "Lanes"): without this the outbox relay finds them only when its window
  // next reads from the beginning (up to a second later).
  if (outbox_window_ != nullptr && !first_outbox_row.empty()) {
    outbox_window_->RowsCommitted(first_outbox_row);
  }
  return done;
}

Result<InboxForwardDue> PostgresInboxStore::ForwardDueLocked(PgConnection& conn, int limit,
                                                             std::optional<int> lane,
                                                             const InboxForwardPlanner& plan,
                                                             std::string& first_outbox_row) {
  std::vector<SqlParam> params = {int64_t{limit}, int64_t{0}, int64_t{limit} * kClaimWindowFactor};
  if (lane) params.push_back(int64_t{*lane});
  QB_ASSIGN_OR_RETURN(SqlRows rows,
                      conn.Query(lane ? LaneClaimSql(config_) : ForwardDueClaimSql(config_), params,
                                 nullptr, PgConnection::Plan::kPerCall));
  InboxForwardDue out;
  out.claimed = rows.size();
  if (rows.empty()) return out;
  std::vector<ClaimedInboxRow> claimed;
  claimed.reserve(rows.size());
  for (const SqlRow& r : rows) {
    claimed.push_back(ToClaimedInboxRow(r));
    claimed.back().claim_token.clear();
  }
  SortInClaimOrder(claimed);
  std::vector<std::string> ids, topics, headers, maxes, ords;
  std::vector<std::optional<std::string>> errors;
  for (size_t i = 0; i < claimed.size(); ++i) {
    InboxForwardPlan p = plan(claimed[i]);
    ids.push_back(claimed[i].id);
    topics.push_back(std::move(p.forward.topic));
    headers.push_back(p.forward.headers.empty() ? "{}" : std::move(p.forward.headers));
    maxes.push_back(std::to_string(p.forward.max_attempts));
    ords.push_back(std::to_string(i));
    errors.push_back(p.dead_error.empty() ? std::nullopt
                                          : std::optional<std::string>(std::move(p.dead_error)));
  }
  // One statement: each locked row `processed` (its outbox row inserted, in claim order) or
  // `dead` with its error. Primary-key lookups only (IS TRUE keeps the planner off the
  // pending-row indexes, which it read whole, O(backlog) per batch, on a fresh table).
  static const std::string tmpl =
      "WITH qb_f AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], "
      "$5::int[], $6::text[]) AS f(qb_id, qb_topic, qb_headers, qb_max, qb_ord, qb_error)), "
      "qb_done AS (UPDATE {T} AS i SET {state} = CASE WHEN qb_f.qb_error IS NULL THEN "
      "'processed' ELSE 'dead' END, {processed_at} = CASE WHEN qb_f.qb_error IS NULL THEN "
      "clock_timestamp() END, {claimed_at} = CASE WHEN qb_f.qb_error IS NULL THEN "
      "clock_timestamp() END, {claim_token} = NULL, {lease_expires_at} = NULL, {last_error} = "
      "COALESCE(qb_f.qb_error, i.{last_error}) FROM qb_f WHERE i.{id} = qb_f.qb_id AND "
      "(i.{state} = 'pending') IS TRUE RETURNING i.{id} AS qb_id, i.{aggregate_id} AS qb_key, "
      "i.{payload} AS qb_payload, qb_f.qb_topic, qb_f.qb_headers, qb_f.qb_max, qb_f.qb_ord, "
      "qb_f.qb_error), "
      "qb_out AS (INSERT INTO {O} ({o.topic}, {o.key}, {o.payload}, {o.headers}, "
      "{o.max_attempts}) SELECT qb_topic, qb_key, qb_payload, qb_headers::jsonb, qb_max FROM "
      "qb_done WHERE qb_error IS NULL ORDER BY qb_ord RETURNING {o.scheduled_at} AS qb_at, "
      "{o.sequence} AS qb_seq) "
      "SELECT qb_id::text, qb_error IS NULL, (SELECT " +
      Ts("qb_at") + " || ' ' || qb_seq FROM qb_out ORDER BY qb_at, qb_seq LIMIT 1) FROM qb_done";
  QB_ASSIGN_OR_RETURN(
      SqlRows done, conn.Query(Sql(tmpl), {PgArray(ids), PgArray(topics), PgArray(headers),
                                           PgArray(maxes), PgArray(ords), PgArrayOrNull(errors)}));
  for (const SqlRow& r : done) {
    if (r.size() < 3 || !r[0]) return Internal("The inbox forward returned no id.");
    (r[1].value_or("f") == "t" ? out.forwarded : out.dead).push_back(*r[0]);
    if (r[2]) first_outbox_row = *r[2];
  }
  return out;
}

Result<std::vector<std::string>> PostgresInboxStore::Forward(
    std::span<const InboxForward> forwards) {
  std::vector<std::string> ids, tokens, topics, headers, maxes, ords;
  std::map<const InboxForward*, size_t> position;
  for (size_t i = 0; i < forwards.size(); ++i) position[&forwards[i]] = i;
  for (const InboxForward* f :
       InIdOrder(forwards, [](const InboxForward& x) -> const Fence& { return x.fence; })) {
    ids.push_back(f->fence.id);
    tokens.push_back(f->fence.claim_token);
    topics.push_back(f->topic);
    headers.push_back(f->headers);
    maxes.push_back(std::to_string(f->max_attempts));
    ords.push_back(std::to_string(position[f]));
  }
  if (ids.empty()) return std::vector<std::string>{};
  // One statement: the INSERT reads only the rows the fenced UPDATE changed, so a lost claim
  // inserts nothing; the outbox rows are inserted in claim order (their sequence).
  static const std::string tmpl =
      "WITH qb_f AS (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], "
      "$5::int[], $6::int[]) AS f(qb_id, qb_token, qb_topic, qb_headers, qb_max, qb_ord)), "
      "qb_done AS (UPDATE {T} AS i SET {state} = 'processed', {processed_at} = "
      "clock_timestamp(), {claim_token} = NULL, {lease_expires_at} = NULL FROM qb_f "
      "WHERE i.{id} = qb_f.qb_id AND i.{claim_token} = qb_f.qb_token AND i.{state} = "
      "'processing' AND i.{lease_expires_at} > clock_timestamp() RETURNING i.{id} AS qb_id, "
      "i.{aggregate_id} AS qb_key, i.{payload} AS qb_payload, qb_f.qb_topic, qb_f.qb_headers, "
      "qb_f.qb_max, qb_f.qb_ord), "
      "qb_out AS (INSERT INTO {O} ({o.topic}, {o.key}, {o.payload}, {o.headers}, "
      "{o.max_attempts}) SELECT qb_topic, qb_key, qb_payload, qb_headers::jsonb, qb_max FROM "
      "qb_done ORDER BY qb_ord RETURNING 1) "
      "SELECT qb_id::text FROM qb_done";
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run(tmpl, {PgArray(ids), PgArray(tokens), PgArray(topics),
                                               PgArray(headers), PgArray(maxes), PgArray(ords)}));
  return FirstColumn(rows);
}

Result<std::vector<std::string>> PostgresInboxStore::MarkDead(std::span<const DeadOrder> orders) {
  std::vector<std::string> ids, tokens, errors;
  for (const DeadOrder* o :
       InIdOrder(orders, [](const DeadOrder& x) -> const Fence& { return x.fence; })) {
    ids.push_back(o->fence.id);
    tokens.push_back(o->fence.claim_token);
    errors.push_back(o->error);
  }
  if (ids.empty()) return std::vector<std::string>{};
  static const std::string tmpl = FencedInboxUpdate(
      "{state} = 'dead', {claimed_at} = NULL, {claim_token} = NULL, {lease_expires_at} = NULL, "
      "{last_error} = f.qb_error",
      "$1::uuid[], $2::uuid[], $3::text[]", "qb_id, qb_token, qb_error");
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run(tmpl, {PgArray(ids), PgArray(tokens), PgArray(errors)}));
  return FirstColumn(rows);
}

Result<std::vector<std::string>> PostgresInboxStore::Renew(std::span<const Fence> fences,
                                                           int64_t lease_ms) {
  std::vector<std::string> ids, tokens;
  for (const Fence* f : InIdOrder(fences, [](const Fence& x) -> const Fence& { return x; })) {
    ids.push_back(f->id);
    tokens.push_back(f->claim_token);
  }
  if (ids.empty()) return std::vector<std::string>{};
  QB_RETURN_IF_ERROR(ValidateClaim(1, lease_ms));
  static const std::string tmpl =
      FencedInboxUpdate("{lease_expires_at} = clock_timestamp() + $3::bigint" + std::string(kMs),
                        "$1::uuid[], $2::uuid[]", "qb_id, qb_token");
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run(tmpl, {PgArray(ids), PgArray(tokens), lease_ms}));
  return FirstColumn(rows);
}

Result<int64_t> PostgresInboxStore::ReclaimExpired() {
  int64_t changes = 0;
  // Push rows only: the pull claim takes expired pull rows itself (reference §4). SKIP LOCKED as
  // the outbox's reclaim: a row locked by a fenced write stays expired for the next reclaim.
  static const std::string sql =
      "UPDATE {T} SET {state} = 'pending', {claimed_at} = NULL WHERE {id} IN (SELECT r.{id} FROM "
      "{T} AS r WHERE r.{state} = 'processing' AND r.{consumption} = 'push' AND "
      "(r.{lease_expires_at} IS NULL OR r.{lease_expires_at} <= clock_timestamp()) "
      "FOR UPDATE OF r SKIP LOCKED)";
  QB_RETURN_IF_ERROR(Run(sql, {}, &changes, PgConnection::Plan::kCached).status());
  return changes;
}

namespace {
constexpr const char* kOldestPendingInboxSql =
    "SELECT EXTRACT(EPOCH FROM clock_timestamp() - min({created_at}))::float8 FROM {T} "
    "WHERE {state} = 'pending' AND {consumption} = 'push'";
}  // namespace

Result<InboxStats> PostgresInboxStore::Stats() {
  QB_ASSIGN_OR_RETURN(SqlRows by_state,
                      Run("SELECT {source}, {state}, count(*) FROM {T} GROUP BY {source}, {state}",
                          {}, nullptr, PgConnection::Plan::kCached));
  QB_ASSIGN_OR_RETURN(SqlRows oldest,
                      Run(kOldestPendingInboxSql, {}, nullptr, PgConnection::Plan::kCached));
  return ToInboxStats(by_state, oldest);
}

Result<double> PostgresInboxStore::OldestPendingAgeSeconds() {
  QB_ASSIGN_OR_RETURN(SqlRows oldest,
                      Run(kOldestPendingInboxSql, {}, nullptr, PgConnection::Plan::kCached));
  return ToInboxStats({}, oldest).oldest_pending_age_seconds;
}

Result<int64_t> PostgresInboxStore::Replay(const InboxReplayFilter& filter) {
  QB_ASSIGN_OR_RETURN(std::optional<ReplayStatement> st,
                      BuildInboxReplay(filter, PgReplayDialect()));
  if (!st) return int64_t{0};
  int64_t changes = 0;
  QB_RETURN_IF_ERROR(Run(st->sql, st->params, &changes).status());
  return changes;
}

Result<std::vector<DeadInboxRow>> PostgresInboxStore::ListDead(int limit) {
  if (limit <= 0) return InvalidArgument("The limit must be above 0.");
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      Run("SELECT {id}::text, {source}, {idempotency_key}, {aggregate_id}, {event_type}, "
          "{attempt}, {last_error}, " +
              Ts("{created_at}") +
              " FROM {T} WHERE {state} = 'dead' ORDER BY {created_at} DESC, {id} DESC "
              "LIMIT $1::int",
          {int64_t{limit}}, nullptr, PgConnection::Plan::kCached));
  std::vector<DeadInboxRow> out;
  for (const SqlRow& r : rows) out.push_back(ToDeadInboxRow(r));
  return out;
}

Result<int64_t> PostgresInboxStore::DeleteOlderThan(const std::string& state, int64_t max_age_ms,
                                                    int batch) {
  QB_RETURN_IF_ERROR(ValidateInboxRetention(state, max_age_ms, "max_age_ms", batch));
  int64_t changes = 0;
  QB_RETURN_IF_ERROR(
      Run("WITH doomed AS MATERIALIZED (SELECT {id} AS qb_id FROM {T} WHERE {state} = $1 AND "
          "{created_at} < clock_timestamp() - $2::bigint" +
              std::string(kMs) +
              " ORDER BY {created_at} LIMIT $3::int FOR UPDATE SKIP LOCKED) "
              "DELETE FROM {T} WHERE {state} = $1 AND {id} IN (SELECT qb_id FROM doomed)",
          {state, max_age_ms, int64_t{batch}}, &changes, PgConnection::Plan::kCached)
          .status());
  return changes;
}

Result<int64_t> PostgresInboxStore::DeleteBeyondCount(const std::string& state, int64_t max_count,
                                                      int batch) {
  QB_RETURN_IF_ERROR(ValidateInboxRetention(state, max_count, "max_count", batch));
  int64_t changes = 0;
  QB_RETURN_IF_ERROR(
      Run("WITH doomed AS MATERIALIZED (SELECT {id} AS qb_id FROM {T} WHERE {state} = $1 "
          "ORDER BY {created_at} DESC, {id} DESC OFFSET $2::bigint LIMIT $3::int "
          "FOR UPDATE SKIP LOCKED) "
          "DELETE FROM {T} WHERE {state} = $1 AND {id} IN (SELECT qb_id FROM doomed)",
          {state, max_count, int64_t{batch}}, &changes, PgConnection::Plan::kCached)
          .status());
  return changes;
}

Status PostgresInboxStore::CheckSchema() {
  const std::string& table = config_.inbox_table;
  const std::string& column = config_.inbox_columns.headers;
  // Like QueueBox's SchemaGuard: the table as written, lower or upper case; columns compared
  // without case.
  QB_ASSIGN_OR_RETURN(SqlRows cols,
                      Run("SELECT column_name FROM information_schema.columns WHERE table_schema = "
                          "ANY (current_schemas(false)) AND table_name::text IN ($1::text, "
                          "lower($1::text), upper($1::text))",
                          {table}, nullptr, PgConnection::Plan::kCached));
  return RequireInboxHeaders(table, column, FirstColumn(cols),
                             "ALTER TABLE " + Quote(table) + " ADD COLUMN " + Quote(column) +
                                 " JSONB NOT NULL DEFAULT '{}';");
}

}  // namespace queuebox::store
