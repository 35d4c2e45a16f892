#include "store/postgres/strict_order.h"

#include <algorithm>

namespace queuebox::store {

StrictOrderBound::Reading StrictOrderBound::Observe(int64_t last_value,
                                                    const std::vector<Holder>& holders) {
  const int64_t new_floor = previous_last_.value_or(0);
  Reading out;
  out.bound = last_value;
  auto earliest = [&out](const std::string& at) {
    // One fixed-width format (and "-infinity", which sorts first): text order is time order.
    if (!out.window_from_at || at < *out.window_from_at) out.window_from_at = at;
  };
  std::map<std::string, Held> now;
  for (const Holder& h : holders) {
    auto it = held_.find(h.vxid);
    // A prepared transaction ("-1/<xid>") got another vxid when it was prepared: floor unknown.
    const bool prepared = h.vxid.starts_with("-1/");
    Held held{prepared ? 0 : it == held_.end() ? new_floor : it->second.floor, h.started_at};
    out.bound = std::min(out.bound, held.floor);
    earliest(held.started_at);
    now[h.vxid] = std::move(held);
  }
  for (const auto& [vxid, held] : held_) {
    if (!now.contains(vxid)) earliest(held.started_at);  // ended since: its rows are visible now
  }
  held_ = std::move(now);
  previous_last_ = last_value;
  return out;
}

std::string StrictLastValueSql(const std::string& sequence_regclass) {
  return "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM " +
         sequence_regclass;
}

// The lock nextval takes (RowExclusiveLock, held to the end of the transaction) on the sequence,
// in this database; never this session's own.
#define QB_STRICT_HOLDERS_WHERE                                                        \
  "WHERE l.locktype = 'relation' AND l.relation = $1::regclass "                       \
  "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) " \
  "AND l.mode = 'RowExclusiveLock' AND l.pid IS DISTINCT FROM pg_backend_pid()"

const char kStrictHoldersSql[] =
    "SELECT l.virtualtransaction, to_char(a.xact_start AT TIME ZONE 'UTC', "
    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
    "FROM pg_locks AS l LEFT JOIN LATERAL (SELECT s.xact_start FROM pg_stat_get_activity(l.pid) "
    "AS s WHERE l.pid IS NOT NULL) AS a ON true " QB_STRICT_HOLDERS_WHERE;

const char kStrictOldestHolderSql[] =
    "SELECT coalesce(l.pid, 0), EXTRACT(EPOCH FROM clock_timestamp() - a.xact_start)::float8 "
    "FROM pg_locks AS l LEFT JOIN pg_stat_activity AS a ON a.pid = l.pid " QB_STRICT_HOLDERS_WHERE
    " ORDER BY a.xact_start NULLS LAST LIMIT 1";

#undef QB_STRICT_HOLDERS_WHERE

const char kStrictSequenceSql[] =
    "SELECT s.seq::text, (SELECT q.seqcache FROM pg_sequence AS q WHERE q.seqrelid = s.seq) "
    "FROM (SELECT pg_get_serial_sequence(quote_ident($1), $2)::regclass AS seq) AS s";

}  // namespace queuebox::store
