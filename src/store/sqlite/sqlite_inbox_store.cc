#include "store/sqlite/sqlite_inbox_store.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "store/inbox_common.h"
#include "store/sqlite/sqlite_store.h"

namespace queuebox::store {
namespace {

// SQLite's clock, as the text every timestamp column holds.
constexpr const char* kSqliteNow = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
// A random lowercase UUID v4, made in SQL (the id default of V2).
constexpr const char* kSqliteNewUuid =
    "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || "
    "substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || "
    "substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))";

// `time` plus `ms_expr` milliseconds, as timestamp text.
std::string Plus(const std::string& time, const std::string& ms_expr) {
  return "strftime('%Y-%m-%dT%H:%M:%fZ', " + time + ", printf('%+.3f seconds', (" + ms_expr +
         ") / 1000.0))";
}

std::string BatchJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The fence of a batch element, with its attempt's record when it carries one.
nlohmann::json InboxFenceJson(const Fence& f) {
  nlohmann::json j{{"id", f.id}, {"token", f.claim_token}};
  if (f.record) j["attempt"] = f.record->attempt;
  return j;
}

// UPDATE ... FROM the JSON batch ?1, fenced by id, token, state and an unexpired lease.
std::string SqliteFencedInboxUpdate(const std::string& set) {
  return "UPDATE {T} SET " + set +
         " FROM (SELECT json_extract(value, '$.id') AS qb_id,"
         " json_extract(value, '$.token') AS qb_token,"
         " json_extract(value, '$.error') AS qb_error FROM json_each(?1)) AS qb_f"
         " WHERE {T}.{id} = qb_f.qb_id AND {T}.{claim_token} = qb_f.qb_token"
         " AND {T}.{state} = 'processing' AND {T}.{lease_expires_at} > " +
         std::string(kSqliteNow) + " RETURNING {id}";
}

// The claim: PostgreSQL's (postgres_inbox_store.cc, SqliteClaimTemplate) in SQLite's terms. The
// rowid breaks ties of equal times (rows one statement stored). SQLite has no LATERAL: each
// aggregate's head is a correlated subquery over idx_inbox_push_head. The fallback's reads are
// gated by their LIMIT (0 when the gate is closed), which SQLite evaluates once, as the outbox
// claim does (sqlite_store.cc). BEGIN IMMEDIATE serialises claimers. `tail` follows the CTEs:
// SqliteClaimTail (the two-step claim) or SqliteForwardDueTail.
std::string SqliteClaimTemplate(const std::string& tail) {
  const std::string pending_push = "{consumption} = 'push' AND {state} = 'pending'";
  const std::string order = "qb_at, qb_created, qb_r";
  auto not_busy = [](const std::string& agg) {
    return "NOT EXISTS (SELECT 1 FROM {T} AS b WHERE b.{aggregate_id} = " + agg +
           " AND b.{state} = 'processing' AND b.{consumption} = 'push')";
  };
  const std::string gate = "(SELECT qb_on FROM qb_gate)";
  return "WITH RECURSIVE "
         "qb_window AS MATERIALIZED (SELECT rowid AS qb_r, {aggregate_id} AS qb_agg, "
         "{scheduled_at} AS qb_at, {created_at} AS qb_created FROM {T} WHERE " +
         pending_push + " AND {scheduled_at} <= " + kSqliteNow +
         " ORDER BY {scheduled_at}, {created_at}, rowid LIMIT ?3), "
         "qb_fast AS MATERIALIZED (SELECT qb_r, qb_at, qb_created FROM (SELECT w.*, "
         "row_number() OVER (PARTITION BY coalesce(w.qb_agg, '#' || w.qb_r) ORDER BY " +
         order + ") AS qb_n FROM qb_window AS w) WHERE qb_n = 1 AND (qb_agg IS NULL OR " +
         not_busy("qb_agg") + ") ORDER BY " + order +
         " LIMIT ?1), "
         "qb_gate (qb_on) AS MATERIALIZED (SELECT (SELECT count(*) FROM qb_fast) < ?1 AND "
         "(SELECT count(*) FROM qb_window) >= ?3), "
         "qb_aggs (qb_agg) AS (SELECT * FROM (SELECT {aggregate_id} FROM {T} WHERE " +
         pending_push + " AND {aggregate_id} IS NOT NULL ORDER BY {aggregate_id} LIMIT " + gate +
         ") UNION ALL SELECT (SELECT n.{aggregate_id} FROM {T} AS n WHERE n.{consumption} = "
         "'push' AND n.{state} = 'pending' AND n.{aggregate_id} > a.qb_agg ORDER BY "
         "n.{aggregate_id} LIMIT 1) FROM qb_aggs AS a WHERE a.qb_agg IS NOT NULL), "
         "qb_heads (qb_r, qb_agg) AS (SELECT (SELECT h.rowid FROM {T} AS h WHERE h.{consumption} "
         "= 'push' AND h.{state} = 'pending' AND h.{aggregate_id} = a.qb_agg ORDER BY "
         "h.{scheduled_at}, h.{created_at}, h.rowid LIMIT 1), a.qb_agg FROM qb_aggs AS a WHERE "
         "a.qb_agg IS NOT NULL), "
         "qb_slow (qb_r) AS (SELECT qb_r FROM (SELECT t.rowid AS qb_r, t.{scheduled_at} AS "
         "qb_at, t.{created_at} AS qb_created FROM qb_heads AS hd JOIN {T} AS t ON t.rowid = "
         "hd.qb_r WHERE t.{scheduled_at} <= " +
         kSqliteNow + " AND " + not_busy("hd.qb_agg") +
         " UNION ALL SELECT * FROM (SELECT rowid, {scheduled_at}, {created_at} FROM {T} WHERE " +
         pending_push + " AND {aggregate_id} IS NULL AND {scheduled_at} <= " + kSqliteNow +
         " ORDER BY {scheduled_at}, {created_at}, rowid LIMIT ?1 * " + gate + ")) ORDER BY " +
         order +
         " LIMIT ?1), "
         "qb_pick (qb_r) AS (SELECT qb_r FROM qb_fast WHERE NOT " +
         gate + " UNION ALL SELECT qb_r FROM qb_slow) " + tail;
}

// The picked rows claimed under a lease of ?2 ms.
std::string SqliteClaimTail() {
  return std::string("UPDATE {T} SET {state} = 'processing', {claimed_at} = ") + kSqliteNow +
         ", {claim_token} = " + kSqliteNewUuid +
         ", {lease_expires_at} = " + Plus(kSqliteNow, "?2") +
         " WHERE rowid IN (SELECT qb_r FROM qb_pick) RETURNING {id}, {source}, "
         "{idempotency_key}, {aggregate_id}, {event_type}, {correlation_id}, {headers}, "
         "{attempt}, {claim_token}, {created_at}, {scheduled_at}, rowid";
}

// The picked rows, unchanged (ForwardDue's transaction holds the database); ?2 is unused.
std::string SqliteForwardDueTail() {
  return "SELECT {id}, {source}, {idempotency_key}, {aggregate_id}, {event_type}, "
         "{correlation_id}, {headers}, {attempt}, NULL, {created_at}, {scheduled_at}, rowid "
         "FROM {T} WHERE rowid IN (SELECT qb_r FROM qb_pick)";
}

// The claimed rows of either claim, in claim order (RETURNING order is undefined; the rowid
// breaks ties).
std::vector<ClaimedInboxRow> ClaimedRows(const SqlRows& rows) {
  std::vector<std::pair<int64_t, ClaimedInboxRow>> claimed;
  claimed.reserve(rows.size());
  for (const SqlRow& r : rows) {
    ClaimedInboxRow row = ToClaimedInboxRow(r);
    claimed.emplace_back(ParseInt(r[11].value_or("0")).value_or(0), std::move(row));
  }
  std::sort(claimed.begin(), claimed.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second.scheduled_at, a.second.created_at, a.first) <
           std::tie(b.second.scheduled_at, b.second.created_at, b.first);
  });
  std::vector<ClaimedInboxRow> out;
  out.reserve(claimed.size());
  for (auto& [rowid, row] : claimed) out.push_back(std::move(row));
  return out;
}

// Store's INSERT over the JSON batch ?1. One statement; 'now' is one instant within it, and the
// rowid (insert order = input order) orders the rows it stores. The batch holds each key once
// (Insert drops later occurrences). scheduled_at (QueueBox reference §11.5): min(publish time, now)
// + delay, now + delay without a publish time, now for a dead row.
std::string StoreTemplate() {
  auto field = [](const char* name) {
    return "json_extract(m.value, '$." + std::string(name) + "')";
  };
  const std::string publish =
      "strftime('%Y-%m-%dT%H:%M:%fZ', " + field("publish") + " / 1000.0, 'unixepoch')";
  return "INSERT INTO {T} ({id}, {source}, {idempotency_key}, {aggregate_id}, {event_type}, "
         "{correlation_id}, {payload}, {headers}, {consumption}, {state}, {last_error}, "
         "{created_at}, {scheduled_at}) SELECT COALESCE(" +
         field("id") + ", " + kSqliteNewUuid + "), " + field("source") + ", " + field("key") +
         ", " + field("agg") + ", " + field("event") + ", " + field("corr") + ", " +
         field("payload") + ", " + field("headers") + ", " + field("consumption") + ", " +
         field("state") + ", " + field("error") + ", " + kSqliteNow + ", CASE WHEN " +
         field("state") + " = 'dead' THEN " + kSqliteNow + " WHEN " + field("publish") +
         " IS NOT NULL THEN " + Plus("min(" + publish + ", " + kSqliteNow + ")", field("delay")) +
         " ELSE " + Plus(kSqliteNow, field("delay")) +
         " END FROM json_each(?1) AS m ORDER BY m.key ON CONFLICT DO NOTHING RETURNING {id}, "
         "{source}, {idempotency_key}";
}

}  // namespace

SqliteInboxStore::SqliteInboxStore(SqliteOutboxStore& outbox) : outbox_(outbox) {}

std::string SqliteInboxStore::Sql(std::string_view tmpl) const {
  return RenderInboxSql(tmpl, outbox_.config_);
}

std::string SqliteInboxStore::ClaimSql(const DatabaseConfig& config) {
  static const std::string tmpl = SqliteClaimTemplate(SqliteClaimTail());
  return RenderInboxSql(tmpl, config);
}

Result<std::vector<InboxStoreOutcome>> SqliteInboxStore::Store(
    std::span<const NewInboxMessage> messages) {
  return StoreInboxBatch(
      messages, [this](const std::vector<const NewInboxMessage*>& batch) { return Insert(batch); });
}

Result<std::vector<InboxStoreOutcome>> SqliteInboxStore::Insert(
    const std::vector<const NewInboxMessage*>& batch) {
  // The batch's first occurrence of a key only: later ones are duplicates without asking the
  // database (a self-join over the JSON batch in SQL was quadratic: 2 s for 500 rows).
  nlohmann::json items = nlohmann::json::array();
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const NewInboxMessage* m : batch) {
    if (!seen.emplace(m->source, m->idempotency_key).second) continue;
    nlohmann::json j{{"source", m->source},
                     {"key", m->idempotency_key},
                     {"payload", m->payload},
                     {"headers", m->headers},
                     {"consumption", ConsumptionName(m->consumption)},
                     {"state", m->dead ? kInboxStateDead : kInboxStatePending},
                     {"delay", m->delay_ms}};
    j["agg"] = m->aggregate_id ? nlohmann::json(*m->aggregate_id) : nlohmann::json();
    j["event"] = m->event_type ? nlohmann::json(*m->event_type) : nlohmann::json();
    j["corr"] = m->correlation_id ? nlohmann::json(*m->correlation_id) : nlohmann::json();
    j["error"] = m->dead ? nlohmann::json(m->last_error) : nlohmann::json();
    j["publish"] = m->publish_time_ms ? nlohmann::json(*m->publish_time_ms) : nlohmann::json();
    j["id"] = m->id.empty() ? nlohmann::json() : nlohmann::json(m->id);
    items.push_back(std::move(j));
  }
  static const std::string tmpl = StoreTemplate();
  QB_ASSIGN_OR_RETURN(SqlRows rows, outbox_.Write(Sql(tmpl), {BatchJson(items)}));
  return InboxInsertOutcomes(batch, rows);
}

Result<std::vector<ClaimedInboxRow>> SqliteInboxStore::ClaimPush(int limit, int64_t lease_ms) {
  QB_RETURN_IF_ERROR(ValidateClaim(limit, lease_ms));
  QB_ASSIGN_OR_RETURN(
      SqlRows rows, outbox_.Write(ClaimSql(outbox_.config_),
                                  {int64_t{limit}, lease_ms, int64_t{limit} * kClaimWindowFactor}));
  return ClaimedRows(rows);
}

Result<InboxForwardDue> SqliteInboxStore::ForwardDue(int limit, const InboxForwardPlanner& plan) {
  QB_RETURN_IF_ERROR(ValidateClaim(limit, 1));
  static const std::string claim_tmpl = SqliteClaimTemplate(SqliteForwardDueTail());
  // Each row `processed` or `dead` (?1: the plans, ?2 unused), then the outbox rows of the
  // processed ones in claim order.
  static const std::string mark_tmpl =
      std::string(
          "UPDATE {T} SET {state} = CASE WHEN qb_f.qb_error IS NULL THEN 'processed' "
          "ELSE 'dead' END, {processed_at} = CASE WHEN qb_f.qb_error IS NULL THEN ") +
      kSqliteNow + " END, {claimed_at} = CASE WHEN qb_f.qb_error IS NULL THEN " + kSqliteNow +
      " END, {claim_token} = NULL, {lease_expires_at} = NULL, {last_error} = "
      "COALESCE(qb_f.qb_error, {T}.{last_error}) FROM (SELECT json_extract(value, '$.id') AS "
      "qb_id, json_extract(value, '$.error') AS qb_error FROM json_each(?1)) AS qb_f WHERE "
      "{T}.{id} = qb_f.qb_id AND {T}.{state} = 'pending' RETURNING {id}, {state}";
  static const std::string insert_tmpl =
      "INSERT INTO {O} ({o.topic}, {o.key}, {o.payload}, {o.headers}, {o.max_attempts}) "
      "SELECT json_extract(f.value, '$.topic'), i.{aggregate_id}, i.{payload}, "
      "json_extract(f.value, '$.headers'), json_extract(f.value, '$.max') FROM json_each(?1) AS f "
      "JOIN {T} AS i ON i.{id} = json_extract(f.value, '$.id') WHERE json_extract(f.value, "
      "'$.error') IS NULL ORDER BY f.key";
  // With the attempt history: the attempt of each row made dead (?1: their ids).
  static const std::string dead_attempts_tmpl =
      "INSERT INTO outbox_attempts (message_id, attempt, row_table, outcome, error) SELECT "
      "i.{id}, i.{attempt}, 'inbox', 'dead', i.{last_error} FROM {T} AS i WHERE i.{id} IN "
      "(SELECT value FROM json_each(?1))";
  const std::string dead_attempts = Sql(dead_attempts_tmpl);
  const std::string claim = RenderInboxSql(claim_tmpl, outbox_.config_);
  const std::string mark = Sql(mark_tmpl);
  const std::string insert = Sql(insert_tmpl);
  InboxForwardDue out;
  Status s = outbox_.Transaction([&]() -> Status {
    out = InboxForwardDue{};
    QB_ASSIGN_OR_RETURN(SqlRows rows,
                        outbox_.RunLocked(claim, {int64_t{limit}, int64_t{0},
                                                  int64_t{limit} * kClaimWindowFactor}));
    out.claimed = rows.size();
    if (rows.empty()) return Status::Ok();
    nlohmann::json batch = nlohmann::json::array();
    for (ClaimedInboxRow& row : ClaimedRows(rows)) {
      row.claim_token.clear();
      InboxForwardPlan p = plan(row);
      nlohmann::json j{{"id", row.id},
                       {"topic", std::move(p.forward.topic)},
                       {"headers", p.forward.headers.empty() ? "{}" : p.forward.headers},
                       {"max", p.forward.max_attempts}};
      j["error"] = p.dead_error.empty() ? nlohmann::json() : nlohmann::json(p.dead_error);
      batch.push_back(std::move(j));
    }
    const std::string batch_json = BatchJson(batch);
    QB_ASSIGN_OR_RETURN(SqlRows marked, outbox_.RunLocked(mark, {batch_json}));
    for (const SqlRow& r : marked) {
      if (r.size() < 2 || !r[0]) return Internal("The inbox forward returned no id.");
      (r[1].value_or("") == "processed" ? out.forwarded : out.dead).push_back(*r[0]);
    }
    if (!out.dead.empty() && outbox_.history_.load()) {
      QB_RETURN_IF_ERROR(
          outbox_.RunLocked(dead_attempts, {BatchJson(nlohmann::json(out.dead))}).status());
    }
    if (out.forwarded.empty()) return Status::Ok();
    return outbox_.RunLocked(insert, {batch_json}).status();
  });
  if (!s.ok()) return s;
  return out;
}

Result<std::vector<std::string>> SqliteInboxStore::Forward(std::span<const InboxForward> forwards) {
  if (forwards.empty()) return std::vector<std::string>{};
  nlohmann::json batch = nlohmann::json::array();
  for (const InboxForward& f : forwards) {
    nlohmann::json j = InboxFenceJson(f.fence);
    j["topic"] = f.topic;
    j["headers"] = f.headers;
    j["max"] = f.max_attempts;
    batch.push_back(std::move(j));
  }
  const std::string batch_json = BatchJson(batch);
  static const std::string mark_tmpl =
      SqliteFencedInboxUpdate(std::string("{state} = 'processed', {processed_at} = ") + kSqliteNow +
                              ", {claim_token} = NULL, {lease_expires_at} = NULL");
  // The outbox rows of exactly the rows the fenced UPDATE changed (?2), in claim order.
  static const std::string insert_tmpl =
      "INSERT INTO {O} ({o.topic}, {o.key}, {o.payload}, {o.headers}, {o.max_attempts}) "
      "SELECT json_extract(f.value, '$.topic'), i.{aggregate_id}, i.{payload}, "
      "json_extract(f.value, '$.headers'), json_extract(f.value, '$.max') FROM json_each(?1) AS f "
      "JOIN {T} AS i ON i.{id} = json_extract(f.value, '$.id') WHERE i.{id} IN (SELECT value "
      "FROM json_each(?2)) ORDER BY f.key";
  const std::string mark = Sql(mark_tmpl);
  const std::string insert = Sql(insert_tmpl);
  std::vector<std::string> done;
  Status s = outbox_.Transaction([&]() -> Status {
    QB_ASSIGN_OR_RETURN(SqlRows rows, outbox_.RunLocked(mark, {batch_json}));
    done = FirstColumn(rows);
    if (done.empty()) return Status::Ok();
    return outbox_.RunLocked(insert, {batch_json, BatchJson(nlohmann::json(done))}).status();
  });
  if (!s.ok()) return s;
  return done;
}

Result<std::vector<std::string>> SqliteInboxStore::FencedWrite(const std::string& tmpl,
                                                               const std::string& batch,
                                                               std::vector<SqlParam> extra) {
  std::vector<SqlParam> params{batch};
  for (auto& p : extra) params.push_back(std::move(p));
  QB_ASSIGN_OR_RETURN(SqlRows rows, outbox_.Write(Sql(tmpl), params));
  return FirstColumn(rows);
}

Result<std::vector<std::string>> SqliteInboxStore::MarkDead(std::span<const DeadOrder> orders) {
  if (orders.empty()) return std::vector<std::string>{};
  static const std::string tmpl = SqliteFencedInboxUpdate(
      "{state} = 'dead', {claimed_at} = NULL, {claim_token} = NULL, {lease_expires_at} = NULL, "
      "{last_error} = qb_f.qb_error");
  nlohmann::json batch = nlohmann::json::array();
  for (const DeadOrder& o : orders) {
    nlohmann::json j = InboxFenceJson(o.fence);
    j["error"] = o.error;
    batch.push_back(std::move(j));
  }
  if (outbox_.Recording(orders.front().fence)) {
    return outbox_.RecordedWrite(Sql(tmpl), BatchJson(batch), kAttemptDead, "inbox");
  }
  return FencedWrite(tmpl, BatchJson(batch));
}

Result<std::vector<std::string>> SqliteInboxStore::Renew(std::span<const Fence> fences,
                                                         int64_t lease_ms) {
  if (fences.empty()) return std::vector<std::string>{};
  QB_RETURN_IF_ERROR(ValidateClaim(1, lease_ms));
  static const std::string tmpl =
      SqliteFencedInboxUpdate("{lease_expires_at} = " + Plus(kSqliteNow, "?2"));
  nlohmann::json batch = nlohmann::json::array();
  for (const Fence& f : fences) batch.push_back(InboxFenceJson(f));
  return FencedWrite(tmpl, BatchJson(batch), {lease_ms});
}

Result<int64_t> SqliteInboxStore::ReclaimExpired() {
  static const std::string tmpl =
      std::string("UPDATE {T} SET {state} = 'pending', {claimed_at} = NULL WHERE {state} = ") +
      "'processing' AND {consumption} = 'push' AND ({lease_expires_at} IS NULL OR " +
      "{lease_expires_at} <= " + kSqliteNow + ")";
  int64_t changes = 0;
  QB_RETURN_IF_ERROR(outbox_.Write(Sql(tmpl), {}, &changes).status());
  return changes;
}

namespace {
constexpr const char* kSqliteOldestPendingSql =
    "SELECT (julianday('now') - julianday(min({created_at}))) * 86400.0 FROM {T} "
    "WHERE {state} = 'pending' AND {consumption} = 'push'";
}  // namespace

Result<InboxStats> SqliteInboxStore::Stats() {
  QB_ASSIGN_OR_RETURN(
      SqlRows by_state,
      outbox_.Read(Sql("SELECT {source}, {state}, count(*) FROM {T} GROUP BY {source}, {state}")));
  QB_ASSIGN_OR_RETURN(SqlRows oldest, outbox_.Read(Sql(kSqliteOldestPendingSql)));
  return ToInboxStats(by_state, oldest);
}

Result<double> SqliteInboxStore::OldestPendingAgeSeconds() {
  QB_ASSIGN_OR_RETURN(SqlRows oldest, outbox_.Read(Sql(kSqliteOldestPendingSql)));
  return ToInboxStats({}, oldest).oldest_pending_age_seconds;
}

Result<int64_t> SqliteInboxStore::Replay(const InboxReplayFilter& filter) {
  static const ReplayDialect kDialect{
      kSqliteNow, [](size_t n) { return "?" + std::to_string(n); },
      [](const std::string& col, const std::string& p) {
        return col + " IN (SELECT value FROM json_each(" + p + "))";
      },
      [](const std::vector<std::string>& items) { return BatchJson(nlohmann::json(items)); },
      [](const std::string& p) { return "strftime('%Y-%m-%dT%H:%M:%fZ', " + p + ")"; }};
  QB_ASSIGN_OR_RETURN(std::optional<ReplayStatement> st, BuildInboxReplay(filter, kDialect));
  if (!st) return int64_t{0};
  int64_t changes = 0;
  QB_RETURN_IF_ERROR(outbox_.Write(Sql(st->sql), st->params, &changes).status());
  return changes;
}

Result<std::vector<DeadInboxRow>> SqliteInboxStore::ListDead(int limit) {
  if (limit <= 0) return InvalidArgument("The limit must be above 0.");
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      outbox_.Read(Sql("SELECT {id}, {source}, {idempotency_key}, {aggregate_id}, {event_type}, "
                       "{attempt}, {last_error}, {created_at} FROM {T} WHERE {state} = 'dead' "
                       "ORDER BY {created_at} DESC, rowid DESC LIMIT ?1"),
                   {int64_t{limit}}));
  std::vector<DeadInboxRow> out;
  for (const SqlRow& r : rows) out.push_back(ToDeadInboxRow(r));
  return out;
}

Result<int64_t> SqliteInboxStore::DeleteOlderThan(const std::string& state, int64_t max_age_ms,
                                                  int batch) {
  QB_RETURN_IF_ERROR(ValidateInboxRetention(state, max_age_ms, "max_age_ms", batch));
  static const std::string tmpl =
      "DELETE FROM {T} WHERE {state} = ?1 AND rowid IN (SELECT rowid FROM {T} WHERE {state} = ?1 "
      "AND {created_at} < " +
      Plus(kSqliteNow, "-?2") + " ORDER BY {created_at} LIMIT ?3) RETURNING {id}";
  return outbox_.DeleteWithHistory(Sql(tmpl), {state, max_age_ms, int64_t{batch}});
}

Result<int64_t> SqliteInboxStore::DeleteBeyondCount(const std::string& state, int64_t max_count,
                                                    int batch) {
  QB_RETURN_IF_ERROR(ValidateInboxRetention(state, max_count, "max_count", batch));
  static const std::string tmpl =
      "DELETE FROM {T} WHERE {state} = ?1 AND rowid IN (SELECT rowid FROM {T} WHERE {state} = ?1 "
      "ORDER BY {created_at} DESC, rowid DESC LIMIT ?3 OFFSET ?2) RETURNING {id}";
  return outbox_.DeleteWithHistory(Sql(tmpl), {state, max_count, int64_t{batch}});
}

Status SqliteInboxStore::CheckSchema() {
  const DatabaseConfig& config = outbox_.config_;
  const std::string& column = config.inbox_columns.headers;
  QB_ASSIGN_OR_RETURN(SqlRows cols, outbox_.Read(kSqliteTableColumnsSql, {config.inbox_table}));
  return RequireColumn(
      InboxHeadersColumn(
          config, "ALTER TABLE " + Quote(config.inbox_table) + " ADD COLUMN " + Quote(column) +
                      " TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(" + Quote(column) + "));"),
      FirstColumn(cols));
}

}  // namespace queuebox::store
