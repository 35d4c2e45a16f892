#include "store/postgres/claim_sql.h"

#include "store/named_sql.h"
#include "store/sql_template.h"

namespace queuebox::store {
namespace {

const NamedSql* CompileClaim(bool strict) {
  std::vector<std::string> names = {
      "batch_size",           "lease_ms",       "window_rows",    "window_from_at",
      "window_from_sequence", "walk_after_key", "read_window",    "replicas",
      "replica_index",        "walk_allowed",   "share_key_count"};
  SqlTemplateOptions options;
  if (strict) {
    names.push_back("strict_bound");
    options.flags.push_back("strict");
  }
  Result<NamedSql> sql =
      NamedSql::Compile(PostgresClaimSqlText(), std::move(names), &PgMarker, options);
  if (!sql.ok()) QB_CHECK(false, "claim.sql does not compile: " + sql.status().ToString());
  return new NamedSql(std::move(sql).value());
}

const NamedSql& Compiled(bool strict) {
  static const NamedSql* const kClaim = CompileClaim(false);
  static const NamedSql* const kStrictClaim = CompileClaim(true);
  return strict ? *kStrictClaim : *kClaim;
}

std::string Bool(bool b) { return b ? "true" : "false"; }

}  // namespace

const std::string& ClaimSqlTemplate(bool strict) { return Compiled(strict).sql(); }

const std::vector<std::string>& ClaimParamNames(bool strict) { return Compiled(strict).names(); }

std::vector<SqlParam> BindClaim(const ClaimParams& p) {
  Result<std::vector<SqlParam>> bound = Compiled(false).Bind({
      {"batch_size", p.batch_size},
      {"lease_ms", p.lease_ms},
      {"window_rows", p.window_rows},
      {"window_from_at", p.window.window_from_at},
      {"window_from_sequence", p.window.window_from_sequence},
      {"walk_after_key", p.window.walk_after_key},
      {"read_window", Bool(p.window.read_window)},
      {"replicas", p.replicas},
      {"replica_index", p.replica_index},
      {"walk_allowed", Bool(p.window.walk_allowed)},
      {"share_key_count", p.window.share_key_count},
  });
  if (!bound.ok()) {
    QB_CHECK(false, "the claim's parameters do not match claim.sql: " + bound.status().ToString());
  }
  // The strict variant: the same parameters in the same positions, then strict_bound.
  if (p.strict) bound->push_back(p.strict_bound);
  return std::move(bound).value();
}

Result<ClaimResult> ReadClaimResult(SqlTable table) {
  ClaimResult out;
  if (table.rows.empty()) return out;  // nothing claimed, nothing reported
  QB_ASSIGN_OR_RETURN(const size_t id, table.Column("id"));
  QB_ASSIGN_OR_RETURN(const size_t topic, table.Column("topic"));
  QB_ASSIGN_OR_RETURN(const size_t key, table.Column("key"));
  QB_ASSIGN_OR_RETURN(const size_t payload, table.Column("payload"));
  QB_ASSIGN_OR_RETURN(const size_t headers, table.Column("headers"));
  QB_ASSIGN_OR_RETURN(const size_t aggregate_type, table.Column("aggregate_type"));
  QB_ASSIGN_OR_RETURN(const size_t attempt, table.Column("attempt"));
  QB_ASSIGN_OR_RETURN(const size_t max_attempts, table.Column("max_attempts"));
  QB_ASSIGN_OR_RETURN(const size_t sequence, table.Column("sequence"));
  QB_ASSIGN_OR_RETURN(const size_t claim_token, table.Column("claim_token"));
  QB_ASSIGN_OR_RETURN(const size_t created_at, table.Column("created_at"));
  QB_ASSIGN_OR_RETURN(const size_t scheduled_at, table.Column("scheduled_at"));
  QB_ASSIGN_OR_RETURN(const size_t next_window_from, table.Column("next_window_from"));
  QB_ASSIGN_OR_RETURN(const size_t walk_last_key, table.Column("walk_last_key"));
  QB_ASSIGN_OR_RETURN(const size_t walk_share_keys, table.Column("walk_share_keys"));
  QB_ASSIGN_OR_RETURN(const size_t window_keys, table.Column("window_keys"));
  out.rows.reserve(table.rows.size());
  // The report's columns hold the same values on every row: read before the rows are moved.
  const SqlRow& first = table.rows.front();
  out.report.claimed_any = true;
  out.report.window_first_row = first[next_window_from];
  out.report.walk_last_key = first[walk_last_key];
  out.report.walk_share_keys = IntOr(first[walk_share_keys], -1);
  out.report.window_keys = IntOr(first[window_keys], -1);
  for (SqlRow& r : table.rows) {
    OutboxRow row;
    row.id = TakeText(r[id]);
    row.topic = TakeText(r[topic]);
    row.key = std::move(r[key]);
    row.payload = TakeText(r[payload]);
    row.headers = r[headers] ? std::move(*r[headers]) : std::string("{}");
    row.aggregate_type = std::move(r[aggregate_type]);
    row.attempt = static_cast<int>(IntOr(r[attempt], 0));
    row.max_attempts = static_cast<int>(IntOr(r[max_attempts], 5));
    row.sequence = IntOr(r[sequence], 0);
    row.claim_token = TakeText(r[claim_token]);
    row.created_at = TakeText(r[created_at]);
    row.scheduled_at = TakeText(r[scheduled_at]);
    out.rows.push_back(std::move(row));
  }
  return out;
}

}  // namespace queuebox::store
