// SqlConsole's sent and dead messages per minute over every replica (console_sql.h): the table
// queuebox_console_activity (V24, docs/schema.md), one row per outbox table, minute and replica.
#include <algorithm>

#include "store/console_sql.h"

namespace queuebox::store {
namespace {

// The database clock's current minute (minutes since the epoch).
std::string NowMinute(bool pg) {
  return pg ? "floor(extract(epoch FROM clock_timestamp()) / 60)::bigint"
            : "(CAST(strftime('%s', 'now') AS INTEGER) / 60)";
}

std::string P(bool pg, int n, const char* cast) {
  return (pg ? "$" : "?") + std::to_string(n) + (pg ? cast : "");
}

}  // namespace

Status SqlConsole::RecordActivity(const std::string& replica_id, int64_t sent, int64_t dead) {
  if (replica_id.empty()) return InvalidArgument("the replica id is empty");
  if (sent < 0 || dead < 0) return InvalidArgument("the counts of messages are negative");
  const std::string table = "queuebox_console_activity";
  const std::string upsert =
      "INSERT INTO " + table + " (outbox_table, minute, replica_id, sent, dead) VALUES (" +
      P(pg_, 1, "") + ", " + NowMinute(pg_) + ", " + P(pg_, 2, "") + ", " + P(pg_, 3, "::bigint") +
      ", " + P(pg_, 4, "::bigint") +
      ") ON CONFLICT (outbox_table, minute, replica_id) DO UPDATE SET sent = " + table +
      ".sent + excluded.sent, dead = " + table + ".dead + excluded.dead";
  QB_RETURN_IF_ERROR(write_(upsert, {config_.outbox_table, replica_id, sent, dead}).status());
  // Every replica's old minutes: no replica writes them any more, so no writer waits on them.
  const std::string prune = "DELETE FROM " + table + " WHERE outbox_table = " + P(pg_, 1, "") +
                            " AND minute < " + NowMinute(pg_) + " - " + P(pg_, 2, "::bigint");
  return write_(prune, {config_.outbox_table, int64_t{kConsoleActivityKeepMinutes}}).status();
}

Result<std::vector<ConsoleMinute>> SqlConsole::Activity(int minutes) {
  if (minutes < 1 || minutes > kConsoleActivityKeepMinutes) {
    return InvalidArgument("'minutes' must be 1.." + std::to_string(kConsoleActivityKeepMinutes));
  }
  // The minutes are generated, so a minute nobody recorded is there with zeros.
  const std::string sql =
      "WITH RECURSIVE now_minute(m) AS (SELECT " + NowMinute(pg_) +
      "), minutes(m) AS (SELECT m - " + P(pg_, 2, "::bigint") +
      " + 1 FROM now_minute UNION ALL SELECT minutes.m + 1 FROM minutes, now_minute "
      "WHERE minutes.m < now_minute.m) "
      "SELECT minutes.m, coalesce(sum(a.sent), 0), coalesce(sum(a.dead), 0) FROM minutes "
      "LEFT JOIN queuebox_console_activity a ON a.outbox_table = " +
      P(pg_, 1, "") + " AND a.minute = minutes.m GROUP BY minutes.m ORDER BY minutes.m";
  QB_ASSIGN_OR_RETURN(SqlRows rows, read_(sql, {config_.outbox_table, int64_t{minutes}}));
  std::vector<ConsoleMinute> out;
  for (const SqlRow& r : rows) {
    out.push_back({IntOr(r[0], 0), IntOr(r[1], 0), IntOr(r[2], 0)});
  }
  return out;
}

}  // namespace queuebox::store
