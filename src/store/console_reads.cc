// SqlConsole's single-row reads, counts and discard (console_sql.h).
#include <algorithm>

#include "store/console_sql.h"
#include "store/postgres/pg_arrays.h"

namespace queuebox::store {
namespace {

// Below this many rows (the planner's estimate) every state is counted exactly.
constexpr double kExactBelowRows = 10000;

std::string Param(bool pg, int n, const char* cast = "") {
  return (pg ? "$" : "?") + std::to_string(n) + (pg ? cast : "");
}

}  // namespace

Result<std::optional<ConsoleRow>> SqlConsole::One(const std::string& table,
                                                  const std::string& where_sql,
                                                  const std::vector<SqlParam>& params) {
  QB_ASSIGN_OR_RETURN(SqlRows rows, read_(Render(table, "SELECT " + Columns(table, true) +
                                                            " FROM {T} WHERE " + where_sql),
                                          params));
  if (rows.empty()) return std::optional<ConsoleRow>();
  return std::optional<ConsoleRow>(ReadRow(table, rows[0], true));
}

Result<std::optional<ConsoleRow>> SqlConsole::Get(const std::string& table, const std::string& id) {
  if (ConsoleStates(table).empty()) return InvalidArgument("'table' must be outbox or inbox");
  if (!IsUuid(id)) return std::optional<ConsoleRow>();
  return One(table, "{id} = " + Param(pg_, 1, "::uuid"), {id});
}

Result<int64_t> SqlConsole::WaitingBehind(const std::string& key, int64_t sequence) {
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      read_(Render("outbox", "SELECT count(*) FROM {T} WHERE {key} = " + Param(pg_, 1) +
                                 " AND {sequence} > " + Param(pg_, 2, "::bigint") +
                                 " AND {state} IN ('pending', 'processing')"),
            {key, sequence}));
  return rows.empty() ? 0 : IntOr(rows[0][0], 0);
}

Result<std::vector<int64_t>> SqlConsole::Exact(const std::string& table,
                                               const std::vector<std::string>& states) {
  std::string sql = "SELECT ";
  std::vector<SqlParam> params;
  for (size_t i = 0; i < states.size(); ++i) {
    params.push_back(states[i]);
    sql += std::string(i == 0 ? "" : ", ") +
           "(SELECT count(*) FROM {T} WHERE {state} = " + Param(pg_, static_cast<int>(i + 1)) + ")";
  }
  QB_ASSIGN_OR_RETURN(SqlRows rows, read_(Render(table, sql), params));
  std::vector<int64_t> out;
  for (size_t i = 0; i < states.size(); ++i) {
    out.push_back(rows.empty() ? 0 : IntOr(rows[0][i], 0));
  }
  return out;
}

Result<double> SqlConsole::OldestPendingAge(const std::string& table) {
  const std::string age = pg_ ? "EXTRACT(EPOCH FROM clock_timestamp() - min({created_at}))::float8"
                              : "(julianday('now') - julianday(min({created_at}))) * 86400.0";
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      read_(Render(table, "SELECT " + age + " FROM {T} WHERE {state} = 'pending'"), {}));
  if (rows.empty() || !rows[0][0]) return 0.0;
  return std::max(0.0, std::strtod(rows[0][0]->c_str(), nullptr));
}

Result<double> SqlConsole::Estimate(const std::string& table) {
  if (!pg_) return -1.0;
  const std::string& name = table == "outbox" ? config_.outbox_table : config_.inbox_table;
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      read_("SELECT reltuples::float8 FROM pg_class WHERE oid = to_regclass($1)", {Quote(name)}));
  if (rows.empty() || !rows[0][0]) return -1.0;
  return std::strtod(rows[0][0]->c_str(), nullptr);
}

// The finished state that holds most rows (sent / processed) is the planner's estimate less the
// others on a big PostgreSQL table; every other figure is exact through a partial index.
Result<ConsoleCounts> SqlConsole::Counts(const std::string& table) {
  const std::vector<std::string>& states = ConsoleStates(table);
  if (states.empty()) return InvalidArgument("'table' must be outbox or inbox");
  const std::string bulk = states[2];
  QB_ASSIGN_OR_RETURN(double estimate, Estimate(table));
  const bool estimated = estimate >= kExactBelowRows;
  std::vector<std::string> exact;
  for (const std::string& s : states) {
    if (!estimated || s != bulk) exact.push_back(s);
  }
  QB_ASSIGN_OR_RETURN(std::vector<int64_t> counts, Exact(table, exact));
  ConsoleCounts out;
  int64_t others = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    out.rows_by_state[exact[i]] = counts[i];
    if (exact[i] != bulk) others += counts[i];
  }
  if (estimated) {
    out.rows_by_state[bulk] = std::max<int64_t>(0, static_cast<int64_t>(estimate) - others);
    out.estimated.push_back(bulk);
  }
  QB_ASSIGN_OR_RETURN(out.oldest_pending_age_seconds, OldestPendingAge(table));
  return out;
}

Result<std::optional<ConsoleRow>> SqlConsole::FindInbox(const std::string& source,
                                                        const std::string& idempotency_key) {
  return One("inbox", "{source} = " + Param(pg_, 1) + " AND {idempotency_key} = " + Param(pg_, 2),
             {source, idempotency_key});
}

// The newest outbox row carrying the inbox id (a replayed inbox row is forwarded again).
Result<std::optional<ConsoleRow>> SqlConsole::ForwardedFrom(const std::string& inbox_id) {
  const std::string match = pg_ ? "{headers} ->> 'x-inbox-id' = $1 AND {headers} ? 'x-inbox-id'"
                                : "json_valid({headers}) AND json_extract({headers}, '$.\"x-inbox-id\"') = ?1";
  return One("outbox", match + " ORDER BY {sequence} DESC LIMIT 1", {inbox_id});
}

Result<int64_t> SqlConsole::DiscardDead(const std::string& table,
                                        const std::vector<std::string>& ids) {
  if (ConsoleStates(table).empty()) return InvalidArgument("'table' must be outbox or inbox");
  for (const std::string& id : ids) {
    if (!IsUuid(id)) return InvalidArgument("'" + id + "' is not a UUID");
  }
  if (ids.empty()) return int64_t{0};
  return discard_(table, ids);
}

}  // namespace queuebox::store
