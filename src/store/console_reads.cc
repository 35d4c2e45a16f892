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

// The row estimate of `table` for SQLite: the rows of the table's largest index at the last
// ANALYZE (or PRAGMA optimize); -1 with no statistics (sqlite_stat1 missing or without the table).
Result<double> SqlConsole::Estimate(const std::string& table) {
  const std::string& name = table == "outbox" ? config_.outbox_table : config_.inbox_table;
  auto rows = read_("SELECT max(CAST(stat AS INTEGER)) FROM sqlite_stat1 WHERE tbl = ?1", {name});
  if (!rows.ok() || rows->empty() || !(*rows)[0][0]) return -1.0;
  return std::strtod((*rows)[0][0]->c_str(), nullptr);
}

// One statement: the row estimate (PostgreSQL: pg_class.reltuples; SQLite: Estimate, as a
// parameter), the exact count of each state through its partial index, except the finished
// state that holds most rows (sent / processed) on a big table, which is the estimate less the
// others (its count is in a CASE branch that is then not run), and the age of the oldest pending
// row (one probe of idx_outbox_pending_created, V25).
Result<ConsoleCounts> SqlConsole::Counts(const std::string& table) {
  const std::vector<std::string>& states = ConsoleStates(table);
  if (states.empty()) return InvalidArgument("'table' must be outbox or inbox");
  const std::string& bulk = states[2];
  std::vector<SqlParam> params;
  std::string estimate;
  if (pg_) {
    const std::string& name = table == "outbox" ? config_.outbox_table : config_.inbox_table;
    estimate = "coalesce((SELECT reltuples::float8 FROM pg_class WHERE oid = to_regclass($1)), -1)";
    params.push_back(Quote(name));
  } else {
    QB_ASSIGN_OR_RETURN(double e, Estimate(table));
    estimate = "?1";
    params.push_back(static_cast<int64_t>(e));
  }
  const std::string exact_below = std::to_string(static_cast<int64_t>(kExactBelowRows));
  std::string sql = "SELECT est";
  for (const std::string& s : states) {
    const std::string count = "(SELECT count(*) FROM {T} WHERE {state} = '" + s + "')";
    sql += s == bulk ? ", CASE WHEN est >= " + exact_below + " THEN NULL ELSE " + count + " END"
                     : ", " + count;
  }
  const std::string oldest =
      "(SELECT {created_at} FROM {T} WHERE {state} = 'pending' ORDER BY {created_at} LIMIT 1)";
  sql += pg_ ? ", EXTRACT(EPOCH FROM clock_timestamp() - " + oldest + ")::float8"
             : ", (julianday('now') - julianday(" + oldest + ")) * 86400.0";
  sql += " FROM (SELECT " + estimate + " AS est) e";
  QB_ASSIGN_OR_RETURN(SqlRows rows, read_(Render(table, sql), params));
  if (rows.empty()) return Internal("the counts statement returned no row");
  const SqlRow& r = rows[0];
  ConsoleCounts out;
  int64_t others = 0;
  for (size_t i = 0; i < states.size(); ++i) {
    if (states[i] == bulk && !r[i + 1]) continue;
    out.rows_by_state[states[i]] = IntOr(r[i + 1], 0);
    if (states[i] != bulk) others += IntOr(r[i + 1], 0);
  }
  if (!r[3]) {
    const double est = r[0] ? std::strtod(r[0]->c_str(), nullptr) : 0;
    out.rows_by_state[bulk] = std::max<int64_t>(0, static_cast<int64_t>(est) - others);
    out.estimated.push_back(bulk);
  }
  const std::optional<std::string>& age = r[states.size() + 1];
  out.oldest_pending_age_seconds = age ? std::max(0.0, std::strtod(age->c_str(), nullptr)) : 0.0;
  return out;
}

Result<std::optional<ConsoleRow>> SqlConsole::FindInbox(const std::string& source,
                                                        const std::string& idempotency_key) {
  return One("inbox", "{source} = " + Param(pg_, 1) + " AND {idempotency_key} = " + Param(pg_, 2),
             {source, idempotency_key});
}

// The newest outbox row carrying the inbox id (a replayed inbox row is forwarded again).
Result<std::optional<ConsoleRow>> SqlConsole::ForwardedFrom(const std::string& inbox_id) {
  const std::string match =
      pg_ ? "{headers} ->> 'x-inbox-id' = $1 AND {headers} ? 'x-inbox-id'"
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
