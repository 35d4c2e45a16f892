#include "verify/checks.h"

#include <charconv>

namespace queuebox::verify {
namespace {

int64_t ToInt(const std::string& text) {
  int64_t v = 0;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v;
}

// Rows listed per check: the statement's LIMIT.
std::string Limit(const CheckContext& c) { return " LIMIT " + std::to_string(c.options.max_rows); }

// The rows of a result as findings (columns named qb_* are bookkeeping, left out) and the count
// its qb_total column carries (count(*) OVER () before the LIMIT).
void Collect(const ReadTable& table, CheckResult& result) {
  for (size_t r = 0; r < table.rows.size(); ++r) {
    Finding finding;
    for (size_t c = 0; c < table.columns.size(); ++c) {
      if (table.columns[c].starts_with("qb_")) continue;
      finding.emplace_back(table.columns[c], table.rows[r][c].value_or("null"));
    }
    result.rows.push_back(std::move(finding));
  }
  if (!table.rows.empty()) {
    result.count = ToInt(Row(table, 0)["qb_total"]);
  }
  if (result.count > 0) result.outcome = Outcome::kBroken;
}

}  // namespace

Result<CheckResult> CheckKeyOrder(const CheckContext& c) {
  CheckResult result{"key-order",
                     "Per key, no row is sent or dead while a row of its key with a lower "
                     "sequence is still pending or processing."};
  const Dialect& d = c.dialect;
  Query q = c.NewQuery();
  // The key's head (its lowest pending or processing row) against every later row of the key
  // already sent or dead. Proof that the head was committed, and pending or processing ever
  // since, before the later row was claimed: the relay changed the head (updated_at past
  // created_at) before that claim. Without it the head may have committed after the claim
  // (overlapping writers), which `sequence` ordering allows.
  q << "WITH qb_heads AS (SELECT {key} AS qb_key, MIN({sequence}) AS qb_seq FROM {T} "
       "WHERE {state} IN ('pending', 'processing') AND {key} IS NOT NULL AND {key} <> ''";
  if (c.options.key) q << " AND {key} = " + q.Bind(*c.options.key);
  q << " GROUP BY {key}) SELECT " + d.Text("l.{id}") +
           " AS id, l.{key} AS key, l.{sequence} AS sequence, l.{state} AS state, " +
           d.Ts("l.{claimed_at}") + " AS claimed_at, " + d.Text("h.{id}") +
           " AS lower_id, h.{sequence} AS lower_sequence, h.{state} AS lower_state, " +
           d.Ts("h.{updated_at}") +
           " AS lower_updated_at, CASE WHEN h.{updated_at} > h.{created_at} AND "
           "h.{updated_at} < l.{claimed_at} THEN 1 ELSE 0 END AS qb_proven, "
           "count(*) OVER () AS qb_total, "
           "sum(CASE WHEN h.{updated_at} > h.{created_at} AND h.{updated_at} < l.{claimed_at} "
           "THEN 1 ELSE 0 END) OVER () AS qb_proven_total "
           // One pass over the later rows, each probing its key's head (CROSS JOIN fixes that
           // order on SQLite, which would otherwise walk every row past each head).
           "FROM {T} AS l CROSS JOIN qb_heads AS k CROSS JOIN {T} AS h "
           "WHERE l.{state} IN ('sent', 'dead') AND l.{key} = k.qb_key AND l.{sequence} > "
           "k.qb_seq AND h.{key} = k.qb_key AND h.{sequence} = k.qb_seq "
           "AND h.{state} IN ('pending', 'processing')";
  q << q.OutboxFilter("l", c.options);
  q << " ORDER BY qb_proven DESC, l.{key}, l.{sequence}" + Limit(c);
  QB_ASSIGN_OR_RETURN(ReadTable table, q.Run(c.session));
  Collect(table, result);
  if (result.count == 0) return result;
  int64_t proven = ToInt(Row(table, 0)["qb_proven_total"]);
  bool strict = c.options.ordering == "strict";
  if (!strict && proven == 0) {
    result.outcome = Outcome::kWarning;
    result.detail =
        "The lower rows may have committed after the later rows were claimed: overlapping "
        "writers of one key, which outbox.ordering sequence delivers in commit order.";
  } else if (!strict) {
    result.detail = std::to_string(proven) +
                    " row(s) were claimed after the relay had already changed the lower row of "
                    "their key (listed first); the others may be overlapping writers.";
  } else {
    result.detail = "outbox.ordering strict: a later row is never delivered before a lower one.";
  }
  return result;
}

Result<CheckResult> CheckLeases(const CheckContext& c) {
  CheckResult result{"lease",
                     "No row is processing past its lease by more than the reclaim interval (" +
                         std::to_string(c.options.reclaim_interval_ms) + " ms)."};
  const Dialect& d = c.dialect;
  Query q = c.NewQuery();
  q << "SELECT " + d.Text("{id}") + " AS id, {key} AS key, {sequence} AS sequence, " +
           d.Ts("{claimed_at}") + " AS claimed_at, " + d.Ts("{lease_expires_at}") +
           " AS lease_expires_at, count(*) OVER () AS qb_total FROM {T} AS o "
           "WHERE {state} = 'processing' AND "
           "COALESCE({lease_expires_at}, {claimed_at}, {updated_at}) < " +
           d.Ago(q.Bind(c.options.reclaim_interval_ms));
  q << q.OutboxFilter("o", c.options);
  q << " ORDER BY {sequence}" + Limit(c);
  QB_ASSIGN_OR_RETURN(ReadTable table, q.Run(c.session));
  Collect(table, result);
  if (result.count > 0) {
    result.detail = "A replica that is alive returns these to pending at its next reclaim.";
  }
  return result;
}

Result<CheckResult> CheckStalled(const CheckContext& c) {
  CheckResult result{"stalled", "No due row waits longer than " +
                                    std::to_string(c.options.stall_threshold_ms / 1000) +
                                    " s while no replica is alive."};
  const char* replicas = "queuebox_relay_replicas";
  QB_ASSIGN_OR_RETURN(bool has_table, c.session.TableExists(replicas));
  if (!has_table || !c.options.key_affinity) {
    result.outcome = Outcome::kSkipped;
    result.detail = !has_table ? "No replica table (queuebox_relay_replicas): replicas register "
                                 "there on PostgreSQL only."
                               : "Replicas register their heartbeats only under key affinity "
                                 "(outbox.keyAffinity.enabled).";
    return result;
  }
  const Dialect& d = c.dialect;
  Query alive = c.NewQuery();
  alive << std::string("SELECT count(*) AS n FROM ") + replicas +
               " WHERE outbox_table = " + alive.Bind(c.database.outbox_table) +
               " AND expires_at > " + d.Now();
  QB_ASSIGN_OR_RETURN(ReadTable live, alive.Run(c.session));
  std::string n = live.rows.empty() ? "0" : Row(live, 0)["n"];
  if (n != "0") {
    result.detail = n + " replica(s) alive.";
    return result;
  }
  Query q = c.NewQuery();
  q << "SELECT " + d.Text("{id}") + " AS id, {key} AS key, {sequence} AS sequence, " +
           d.Ts("{scheduled_at}") +
           " AS scheduled_at, count(*) OVER () AS qb_total FROM {T} AS o "
           "WHERE {state} = 'pending' AND {scheduled_at} < " +
           d.Ago(q.Bind(c.options.stall_threshold_ms));
  q << q.OutboxFilter("o", c.options);
  q << " ORDER BY {scheduled_at}, {sequence}" + Limit(c);
  QB_ASSIGN_OR_RETURN(ReadTable table, q.Run(c.session));
  Collect(table, result);
  result.detail = "No replica is alive (no heartbeat in queuebox_relay_replicas).";
  return result;
}

Result<CheckResult> CheckInboxForwarded(const CheckContext& c) {
  CheckResult result{"inbox-forwarded",
                     "Every forwarded inbox row (push, processed) has its outbox row."};
  QB_ASSIGN_OR_RETURN(bool has_inbox, c.session.TableExists(c.database.inbox_table));
  if (!has_inbox) {
    result.outcome = Outcome::kSkipped;
    result.detail = "No inbox table (" + c.database.inbox_table + ").";
    return result;
  }
  const Dialect& d = c.dialect;
  Query q = c.NewQuery();
  // Retention deletes sent outbox rows: inbox rows processed before the oldest outbox row are not
  // judged. The outbox row names its inbox row in the header x-inbox-id.
  q << "SELECT " + d.Text("i.{i.id}") + " AS id, i.{i.source} AS source, " +
           "i.{i.idempotency_key} AS idempotency_key, " + d.Ts("i.{i.processed_at}") +
           " AS processed_at, count(*) OVER () AS qb_total FROM {I} AS i LEFT JOIN (SELECT "
           "DISTINCT " +
           d.Header("{headers}", "x-inbox-id") + " AS qb_inbox_id FROM {T}) AS f ON " +
           "f.qb_inbox_id = " + d.Text("i.{i.id}") +
           " WHERE f.qb_inbox_id IS NULL AND i.{i.consumption} = 'push' AND i.{i.state} = "
           "'processed' AND i.{i.processed_at} >= (SELECT MIN({created_at}) FROM {T})";
  if (c.options.since) {
    q << " AND i.{i.created_at} >= " + d.Instant(q.Bind(*c.options.since));
  }
  q << " ORDER BY i.{i.processed_at}" + Limit(c);
  QB_ASSIGN_OR_RETURN(ReadTable table, q.Run(c.session));
  Collect(table, result);
  return result;
}

Result<CheckResult> CheckDeadReasons(const CheckContext& c) {
  CheckResult result{"dead-reason", "Every dead row has a reason (last_error)."};
  const Dialect& d = c.dialect;
  Query q = c.NewQuery();
  q << "SELECT " + d.Text("{id}") +
           " AS id, {topic} AS topic, {key} AS key, {attempt} AS "
           "attempt, " +
           d.Ts("{updated_at}") +
           " AS updated_at, count(*) OVER () AS qb_total "
           "FROM {T} AS o WHERE {state} = 'dead' AND ({last_error} IS NULL OR {last_error} = '')";
  q << q.OutboxFilter("o", c.options);
  q << " ORDER BY {sequence}" + Limit(c);
  QB_ASSIGN_OR_RETURN(ReadTable table, q.Run(c.session));
  Collect(table, result);
  return result;
}

namespace {

// PostgreSQL: true when the outbox's id column is a uuid (the bundled schema), so the attempts
// join on uuids; an adopted table keyed by text joins on text, which sorts both sides.
Result<bool> IdIsUuid(const CheckContext& c) {
  if (!c.dialect.postgres) return false;
  Query q = c.NewQuery();
  q << "SELECT pg_typeof({id})::text FROM {T} LIMIT 1";
  QB_ASSIGN_OR_RETURN(ReadTable t, q.Run(c.session));
  return !t.rows.empty() && t.rows[0][0] && *t.rows[0][0] == "uuid";
}

// Runs `run` with planner settings local to the read-only transaction, then puts the previous
// values back. enable_nestloop off: on tables never analysed PostgreSQL estimates a handful of
// rows and loops over both (17 s for 6,000 rows); jit off: compiling cost 2.8 s of 18.5 s on
// 1,000,000 attempts, for a statement that runs once.
Result<ReadTable> WithPlannerSettings(const CheckContext& c, Query& q) {
  if (!c.dialect.postgres) return q.Run(c.session);
  QB_ASSIGN_OR_RETURN(ReadTable before,
                      c.session.Query("SELECT current_setting('enable_nestloop'), "
                                      "current_setting('jit'), "
                                      "set_config('enable_nestloop', 'off', true), "
                                      "set_config('jit', 'off', true)"));
  const auto& row = before.rows.at(0);
  Result<ReadTable> table = q.Run(c.session);
  QB_RETURN_IF_ERROR(c.session
                         .Query("SELECT set_config('enable_nestloop', $1, true), "
                                "set_config('jit', $2, true)",
                                {row[0].value_or("on"), row[1].value_or("on")})
                         .status());
  return table;
}

}  // namespace

Result<CheckResult> CheckAttemptHistory(const CheckContext& c) {
  CheckResult result{"attempt-history",
                     "A sent or dead row's latest recorded attempt has its outcome (the outcome "
                     "and its attempt are written in one statement)."};
  QB_ASSIGN_OR_RETURN(bool present, c.session.TableExists(kAttemptHistoryTable));
  if (!present) {
    result.outcome = Outcome::kSkipped;
    result.detail = std::string("No attempt-history table (") + kAttemptHistoryTable + ").";
    return result;
  }
  const Dialect& d = c.dialect;
  QB_ASSIGN_OR_RETURN(bool uuid_ids, IdIsUuid(c));
  const std::string id = uuid_ids ? "o.{id}" : d.Text("o.{id}");
  const std::string message_id = uuid_ids ? "l.message_id" : d.Text("l.message_id");
  const std::string table(kAttemptHistoryTable);
  Query q = c.NewQuery();
  // Each message's latest attempt (one aggregate over the history) against its row. SQLite takes
  // the other columns of a MAX() aggregate from the row holding the maximum (reading the table
  // in order and sorting, 3.0 s on 1,000,000 attempts, beats the index's row lookups, 3.7 s);
  // PostgreSQL joins that attempt back by (message_id, recorded_at), its index. Rows without any
  // recorded attempt (history off, or written before V22) are not judged.
  const std::string latest =
      d.postgres ? "(SELECT message_id, MAX(recorded_at) AS qb_last FROM " + table +
                       " WHERE row_table = 'outbox' GROUP BY message_id) AS l JOIN " + table +
                       " AS a ON a.message_id = l.message_id AND a.recorded_at = l.qb_last AND "
                       "a.row_table = 'outbox'"
                 : "(SELECT message_id, MAX(recorded_at) AS qb_last, outcome, attempt FROM " +
                       table + " NOT INDEXED WHERE row_table = 'outbox' GROUP BY message_id) AS l";
  const std::string a = d.postgres ? "a." : "l.";
  q << "SELECT " + d.Text("o.{id}") +
           " AS id, o.{topic} AS topic, o.{key} AS key, o.{state} AS state, " + a +
           "outcome AS latest_attempt_outcome, " + a +
           "attempt AS latest_attempt, count(*) OVER () AS qb_total FROM " + latest +
           " JOIN {T} AS o ON " + message_id + " = " + id +
           " WHERE o.{state} IN ('sent', 'dead') AND " + a + "outcome <> o.{state}";
  q << q.OutboxFilter("o", c.options);
  q << " ORDER BY o.{sequence}" + Limit(c);
  QB_ASSIGN_OR_RETURN(ReadTable rows, WithPlannerSettings(c, q));
  Collect(rows, result);
  return result;
}

}  // namespace queuebox::verify
