#include "store/postgres/postgres_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

#include "babelqueue/envelope.h"
#include "core/log.h"
#include "core/redaction.h"
#include "store/migrate.h"

namespace queuebox::store {
namespace {

// Timestamps as ISO-8601 UTC text with microseconds, whatever the session's TimeZone.
std::string Ts(const std::string& col) {
  return "to_char(" + col + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

// The columns ToOutboxRow reads, qualified by `a`.
std::string RowColumns(const std::string& a) {
  return a + "{id}::text, " + a + "{topic}, " + a + "{key}, " + a + "{payload}::text, " + a +
         "{headers}::text, " + a + "{aggregate_type}, " + a + "{attempt}, " + a +
         "{max_attempts}, " + a + "{sequence}, " + a + "{claim_token}::text, " +
         Ts(a + "{created_at}") + ", " + Ts(a + "{scheduled_at}");
}

constexpr const char* kMs = " * interval '1 millisecond'";

// The claim's first window, in rows per row of the batch (PostgresOutboxStore::Claim).
constexpr int64_t kClaimWindowFactor = 2;

// A PostgreSQL array literal of text elements: {"a","b\"c"}.
std::string PgArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

bool IsUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

// A fence whose id or token is not a UUID can never match (QueueBox: a null token never
// matches), so it is left out instead of failing the whole batch on the uuid cast.
bool Matchable(const Fence& f) { return IsUuid(f.id) && IsUuid(f.claim_token); }

// UPDATE ... FROM unnest(<arrays>) AS f(<names>), fenced by id, token, state and lease.
std::string FencedUpdate(const std::string& set, const std::string& unnest,
                         const std::string& names) {
  return "UPDATE {T} AS o SET " + set + " FROM unnest(" + unnest + ") AS f(" + names +
         ") WHERE o.{id} = f.qb_id AND o.{claim_token} = f.qb_token"
         " AND o.{state} = 'processing' AND o.{lease_expires_at} > clock_timestamp()"
         " RETURNING o.{id}::text";
}

// The items of a fenced batch write in id order. Each fenced UPDATE locks its rows in the order of
// its arrays (the plan probes with them: docs/claim-plans.md, "Acknowledgement plan"), so one
// order for every batch write keeps two of them that share rows (a lease renewal and an
// acknowledgement of the same replica, on two pooled connections) from locking in opposite
// orders and deadlocking; PostgreSQL breaks a deadlock after deadlock_timeout (1 s) by failing
// one of them (a real-process scenario logged both kinds).
template <typename T, typename FenceOf>
std::vector<const T*> InIdOrder(std::span<const T> items, FenceOf fence_of) {
  std::vector<const T*> out;
  out.reserve(items.size());
  for (const T& item : items) {
    if (Matchable(fence_of(item))) out.push_back(&item);
  }
  std::sort(out.begin(), out.end(),
            [&](const T* a, const T* b) { return fence_of(*a).id < fence_of(*b).id; });
  return out;
}

}  // namespace

class PostgresOutboxStore::Migrator final : public MigrationBackend {
 public:
  explicit Migrator(PgConnection& c) : c_(c) {}
  Status Begin() override {
    // One migrating replica at a time: a transaction-scoped advisory lock.
    return c_.Exec("BEGIN; SELECT pg_advisory_xact_lock(hashtext('queuebox_schema_history'))");
  }
  Status Commit() override { return c_.Exec("COMMIT"); }
  void Rollback() override { (void)c_.Exec("ROLLBACK"); }
  Status ExecScript(const std::string& sql) override { return c_.Exec(sql); }
  Result<bool> TableExists(const std::string& table) override {
    QB_ASSIGN_OR_RETURN(SqlRows rows,
                        c_.Query("SELECT 1 FROM information_schema.tables WHERE table_schema = "
                                 "ANY (current_schemas(false)) AND lower(table_name) = lower($1)",
                                 {table}));
    return !rows.empty();
  }
  Status CreateHistory() override {
    return c_.Exec(std::string("CREATE TABLE IF NOT EXISTS ") + kHistoryTable +
                   " (version INTEGER PRIMARY KEY, description VARCHAR(200) NOT NULL, "
                   "checksum INTEGER, applied_at TIMESTAMPTZ NOT NULL DEFAULT "
                   "CURRENT_TIMESTAMP)");
  }
  Result<SqlRows> Query(const std::string& sql, const std::vector<SqlParam>& params) override {
    return c_.Query(sql, params);
  }
  std::string Param(int n) const override { return "$" + std::to_string(n); }

 private:
  PgConnection& c_;
};

Result<std::unique_ptr<PostgresOutboxStore>> PostgresOutboxStore::Open(
    const DatabaseConfig& config) {
  QB_RETURN_IF_ERROR(ValidateIdentifiers(config));
  QB_ASSIGN_OR_RETURN(PgSettings settings, PgSettingsFor(config));
  return std::unique_ptr<PostgresOutboxStore>(new PostgresOutboxStore(config, std::move(settings)));
}

PostgresOutboxStore::PostgresOutboxStore(DatabaseConfig config, PgSettings settings)
    : config_(std::move(config)), pool_(std::move(settings)) {}

std::string PostgresOutboxStore::Sql(std::string_view tmpl) const {
  return RenderSql(tmpl, config_.outbox_table, config_.columns);
}

Result<SqlRows> PostgresOutboxStore::Run(const std::string& tmpl,
                                         const std::vector<SqlParam>& params, int64_t* changes,
                                         PgConnection::Plan plan) {
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  return conn->Query(Sql(tmpl), params, changes, plan);
}

Result<std::vector<std::string>> PostgresOutboxStore::Ids(const std::string& tmpl,
                                                          const std::vector<SqlParam>& params) {
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run(tmpl, params, nullptr, PgConnection::Plan::kPerCall));
  return FirstColumn(rows);
}

Result<std::vector<std::string>> PostgresOutboxStore::OutcomeIds(
    const std::string& tmpl, const std::vector<SqlParam>& params) {
  Result<std::vector<std::string>> ids = Ids(tmpl, params);
  if (ids.ok() && !ids->empty()) window_start_.MayHaveNewHeads();
  return ids;
}

Result<MigrateReport> PostgresOutboxStore::Migrate(std::optional<int> baseline) {
  QB_RETURN_IF_ERROR(RequireDefaultSchema(config_));
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  Migrator migrator(*conn);
  return RunMigrations(migrator, PostgresMigrations(), config_, baseline);
}

Status PostgresOutboxStore::Ping() { return Run("SELECT 1").status(); }

Status PostgresOutboxStore::CheckSchema() {
  const std::string& table = config_.outbox_table;
  const std::string& column = config_.columns.sequence;
  // Like QueueBox's SchemaGuard: the table as written, lower or upper case; columns compared
  // without case.
  QB_ASSIGN_OR_RETURN(SqlRows cols,
                      Run("SELECT column_name FROM information_schema.columns WHERE table_schema = "
                          "ANY (current_schemas(false)) AND table_name::text IN ($1::text, "
                          "lower($1::text), upper($1::text))",
                          {table}));
  return RequireSequenceColumn(table, column, FirstColumn(cols),
                               "ALTER TABLE " + Quote(table) + " ADD COLUMN " + Quote(column) +
                                   " BIGINT GENERATED BY DEFAULT AS IDENTITY;");
}

ClaimWindowStart::Position ClaimWindowStart::Next() {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  Position next = position_;
  if (now - last_from_beginning_ >= kFromBeginningEvery) {
    last_from_beginning_ = now;
    next = Position{};
  }
  next.key_after = key_after_;
  next.use_window = now - fell_back_at_ >= kFromBeginningEvery;
  if (now >= retry_due_) {  // a retried head may be due behind a window of its key's rows
    quiet_ = false;
    retry_due_ = std::chrono::steady_clock::time_point::max();
  }
  next.allow_walk = !quiet_ || now - quiet_since_ >= kFromBeginningEvery;
  if (next.allow_walk) quiet_ = false;
  if (!next.allow_walk) next.use_window = true;  // never neither: the window still sees new rows
  next.share_keys = now - share_keys_at_ < kFromBeginningEvery ? share_keys_ : -1;
  return next;
}

void ClaimWindowStart::Advance(const std::string& at_and_sequence) {
  const size_t space = at_and_sequence.rfind(' ');
  if (space == std::string::npos) return;
  const std::optional<int64_t> sequence = ParseInt(at_and_sequence.substr(space + 1));
  if (!sequence.has_value()) return;
  std::lock_guard<std::mutex> lock(mu_);
  position_.at = at_and_sequence.substr(0, space);
  position_.sequence = *sequence;
}

void ClaimWindowStart::VisitedKeysUpTo(const std::string& last_key) {
  std::lock_guard<std::mutex> lock(mu_);
  key_after_ = last_key;
}

void ClaimWindowStart::FellBack(const std::string& last_key) {
  std::lock_guard<std::mutex> lock(mu_);
  key_after_ = last_key;
  fell_back_at_ = std::chrono::steady_clock::now();
}

void ClaimWindowStart::SawShareKeys(int64_t keys) {
  std::lock_guard<std::mutex> lock(mu_);
  share_keys_ = keys;
  share_keys_at_ = std::chrono::steady_clock::now();
}

void ClaimWindowStart::Retried(int64_t delay_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto due =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(0, delay_ms));
  retry_due_ = std::min(retry_due_, due);
  share_keys_ = -1;
}

void ClaimWindowStart::ShareChanged() {
  std::lock_guard<std::mutex> lock(mu_);
  position_ = Position{};
  share_keys_ = -1;
  quiet_ = false;
}

void ClaimWindowStart::ClaimedNothing() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!quiet_) quiet_since_ = std::chrono::steady_clock::now();
  quiet_ = true;
}

void ClaimWindowStart::MayHaveNewHeads() {
  std::lock_guard<std::mutex> lock(mu_);
  quiet_ = false;
}

void ClaimWindowStart::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  position_ = Position{};
}

Result<std::vector<OutboxRow>> PostgresOutboxStore::Claim(int limit, int64_t lease_ms) {
  QB_RETURN_IF_ERROR(ValidateClaim(limit, lease_ms));
  // One statement, O(batch) at any backlog, also when one key has a long run of rows ahead of the
  // others (docs/schema.md, docs/claim-plans.md has the plans):
  // - qb_now: one database instant per claim (claimed_at, the lease, the re-checks).
  // - qb_win: the first $3 (= 2 x limit) + 1 due pending rows of this replica's share in claim
  //   order, read from idx_outbox_pending_due (the due check, on statement_timestamp(), is an
  //   index condition); qb_fast: the heads among the first $3 of them, locked SKIP LOCKED, at
  //   most $1.
  // - qb_gate: true when qb_fast found fewer than $1 heads and more due rows lie beyond the
  //   window (qb_win holds row $3 + 1: the window was full of rows blocked behind their key's
  //   head), the walk is not resting ($10, ClaimWindowStart::Position::allow_walk), and the
  //   window does not hold every key of the share ($11).
  // - only then: qb_keys, a skip scan over idx_outbox_key_sequence (one probe per active key,
  //   each giving the key's lowest pending/processing row), plus due unkeyed rows from
  //   idx_outbox_pending_unkeyed; qb_slow locks the first $1 of them in claim order, re-checking
  //   that each locked row is still pending and due. A recursive CTE cannot lock, hence the join
  //   by ctid. qb_slow does not probe for a lower row of the key (qb_fast's head check): the walk
  //   read each key's lowest pending/processing row under this statement's snapshot, and the
  //   probe would read the same snapshot (also in a re-check after a concurrent update), so it
  //   could only agree; dropping it saves one index probe per candidate (docs/claim-plans.md).
  // The CTEs are MATERIALIZED so each LIMIT holds once for the statement (a subquery on the inner
  // side of a nested loop would be rescanned, each rescan taking more rows).
  // Key affinity ($8 replicas, $9 this replica's index; OutboxStore::Heartbeat): the window, the
  // gate, the key walk's candidates and the unkeyed rows keep only this replica's share, a
  // filter before any lock, so replicas never lock each other's rows. The walk still steps over
  // every key (a filtered probe would read all rows of the keys it skips), so it visits about
  // $8 x $1 keys; the window reads about $8 x $3 index entries and their rows. $8 = 1: every key.
  // int4eq(a, b), not a = b: the same test, but PostgreSQL estimates a function call to keep a
  // third of the rows and an equality on an expression 0.5 %. With 0.5 % it reckoned the window
  // (up to $3 + 1 rows of this share) would have to read 200 x that many rows, and below about
  // 200,000 pending rows it read every pending row and sorted them instead of reading
  // idx_outbox_pending_due in order: 20,500 buffers for a 248-row claim at 4 replicas over
  // 60,000 rows (docs/claim-plans.md, "Window under key affinity").
  static const auto mine = [](const std::string& expr) {
    return "($8::int <= 1 OR int4eq(mod(hashtext(" + expr + ") & 2147483647, $8::int), $9::int))";
  };
  // The locked row is still pending and due (re-evaluated on the newest version when a
  // concurrent update made PostgreSQL re-check it).
  static const std::string pending_due =
      "head.{state} = 'pending' AND head.{scheduled_at} <= (SELECT t FROM qb_now)";
  // ... and the head of its key: no pending/processing row of the key below it.
  static const std::string head_check =
      pending_due +
      " AND (head.{key} IS NULL OR head.{key} = '' OR (SELECT prior.{sequence} FROM {T} AS prior"
      " WHERE prior.{key} = head.{key} AND prior.{state} IN ('pending', 'processing')"
      " AND prior.{sequence} < head.{sequence} ORDER BY prior.{key} DESC, prior.{sequence} DESC"
      " LIMIT 1) IS NULL)";
  // statement_timestamp(), not qb_now: the database clock at the statement's start, which the
  // planner can read when it estimates the rows the window may read (for qb_now, an InitPlan, it
  // guesses a third of them, and then reads every pending row and sorts them). qb_now is at most
  // the statement's own run time later: a row that falls due in between waits for the next claim.
  static const std::string due_where =
      "w.{state} = 'pending' AND w.{scheduled_at} <= statement_timestamp()"
      " AND (w.{scheduled_at}, w.{sequence}) >= ($4::timestamptz, $5::bigint)";
  static const std::string due_order = " ORDER BY w.{scheduled_at}, w.{sequence}";
  // This replica's due pending rows in claim order, read only when $7 (the previous claim did not
  // need the fallback).
  static const std::string window = "$7::boolean AND " + due_where + " AND " +
                                    mine("coalesce(nullif(w.{key}, ''), w.{id}::text)") + due_order;
  // A key's lowest pending/processing row, tagged with the pass of the walk (below), for keys
  // after `after`; followed by the condition that bounds the pass.
  static const auto key_head = [](const std::string& pass, const std::string& after) {
    return "(SELECT k.{key}, k.ctid, k.{state}, k.{scheduled_at}, k.{sequence}, " + pass +
           " FROM {T} AS k WHERE k.{state} IN ('pending', 'processing') AND k.{key} > " + after;
  };
  static const std::string key_order = " ORDER BY k.{key}, k.{sequence} LIMIT 1)";
  // 1 when a visited key head is a candidate (pending, due, this replica's share).
  static const auto candidate = [](const std::string& r) {
    return "CASE WHEN " + r + ".qb_state = 'pending' AND " + r +
           ".qb_at <= (SELECT t FROM qb_now) AND " + mine(r + ".qb_key") + " THEN 1 ELSE 0 END";
  };
  // The keys with a row among the first $3 window rows (the rows qb_fast judged).
  static const std::string window_keys =
      "(SELECT count(DISTINCT w2.qb_key) FROM (SELECT * FROM qb_win ORDER BY qb_at, qb_seq"
      " LIMIT $3::bigint) AS w2 WHERE w2.qb_key <> '')";
  static const std::string tmpl =
      "WITH RECURSIVE qb_now AS (SELECT clock_timestamp() AS t), "
      // The window's rows plus one: the one past $3 tells the gate that more lie beyond, without
      // a second scan of the window.
      "qb_win AS MATERIALIZED (SELECT w.ctid AS qb_ctid, w.{scheduled_at} AS qb_at,"
      " w.{sequence} AS qb_seq, w.{key} AS qb_key FROM {T} AS w WHERE " +
      window +
      " LIMIT $3::bigint + 1), "
      "qb_fast AS MATERIALIZED (SELECT head.{id} AS qb_id FROM (SELECT * FROM qb_win"
      " ORDER BY qb_at, qb_seq LIMIT $3::bigint) AS win JOIN {T} AS head"
      " ON head.ctid = win.qb_ctid WHERE " +
      head_check +
      " ORDER BY win.qb_at, win.qb_seq LIMIT $1::int FOR UPDATE OF head SKIP LOCKED), "
      // $11: how many keys of this share the last complete key walk saw (-1: unknown, or over a
      // second ago; ClaimWindowStart::Position::share_keys). When the window holds a row of that
      // many keys, every key of the share is in it, so qb_fast already judged every head the
      // walk could find.
      "qb_gate AS MATERIALIZED (SELECT $10::boolean AND (SELECT count(*) FROM qb_fast) < $1::int"
      " AND (NOT $7::boolean OR (SELECT count(*) FROM qb_win) > $3::bigint) AND (NOT $7::boolean OR"
      " $11::bigint < 0 OR " +
      window_keys + " < $11::bigint) AS qb_on), " +
      "qb_keys (qb_key, qb_ctid, qb_state, qb_at, qb_seq, qb_pass, qb_n) AS ("
      "SELECT f.*, " +
      candidate("f") + " FROM (" + key_head("1", "$6::text") + " AND (SELECT qb_on FROM qb_gate)" +
      key_order + " UNION ALL " + key_head("2", "''") +
      " AND k.{key} <= $6::text AND (SELECT qb_on FROM qb_gate)" + key_order +
      " LIMIT 1) AS f(qb_key, qb_ctid, qb_state, qb_at, qb_seq, qb_pass) UNION ALL "
      "SELECT nxt.*, prev.qb_n + " +
      candidate("nxt") + " FROM qb_keys AS prev CROSS JOIN LATERAL (" +
      // Three branches, each with its key bounds as index conditions (a bound in an OR would be
      // a filter, and the probe would read every entry past $6): the next key in pass 1, the
      // next key up to $6 in pass 2, the first key of pass 2 when pass 1 has run out.
      key_head("1", "prev.qb_key") + " AND prev.qb_pass = 1" + key_order + " UNION ALL " +
      key_head("2", "prev.qb_key") + " AND prev.qb_pass = 2 AND k.{key} <= $6::text" + key_order +
      " UNION ALL " + key_head("2", "''") + " AND prev.qb_pass = 1 AND k.{key} <= $6::text" +
      key_order +
      " LIMIT 1) AS nxt(qb_key, qb_ctid, qb_state, qb_at, qb_seq, qb_pass)"
      " WHERE prev.qb_n < $1::int), "
      "qb_cand AS (SELECT qb_ctid, qb_at, qb_seq FROM qb_keys WHERE qb_state = 'pending'"
      " AND qb_at <= (SELECT t FROM qb_now) AND " +
      mine("qb_key") +
      " UNION ALL (SELECT u.ctid, u.{scheduled_at},"
      " u.{sequence} FROM {T} AS u WHERE u.{state} = 'pending' AND (u.{key} IS NULL OR"
      " u.{key} = '') AND u.{scheduled_at} <= (SELECT t FROM qb_now) AND (SELECT qb_on FROM"
      " qb_gate) AND " +
      mine("u.{id}::text") +
      " ORDER BY u.{scheduled_at}, u.{sequence} LIMIT $1::int)), "
      "qb_slow AS MATERIALIZED (SELECT head.{id} AS qb_id FROM qb_cand AS c JOIN {T} AS head"
      " ON head.ctid = c.qb_ctid WHERE " +
      pending_due +
      " ORDER BY c.qb_at, c.qb_seq LIMIT $1::int FOR UPDATE OF head SKIP LOCKED), "
      "qb_pick AS (SELECT qb_id FROM qb_fast WHERE NOT (SELECT qb_on FROM qb_gate)"
      " UNION ALL SELECT qb_id FROM qb_slow) "
      "UPDATE {T} AS o SET {state} = 'processing', {claim_token} = gen_random_uuid(), "
      "{claimed_at} = (SELECT t FROM qb_now), {updated_at} = (SELECT t FROM qb_now), "
      "{lease_expires_at} = (SELECT t FROM qb_now) + $2::bigint" +
      std::string(kMs) + " FROM qb_pick WHERE o.{id} = qb_pick.qb_id RETURNING " +
      RowColumns("o.") +
      // Where the next window starts: this share's first due pending row in the window (no
      // pending row of the share lies before it); NULL when the window was not read, and the
      // start stays. Not the first due pending row of any share: under key affinity replicas
      // drain at their own pace, and from the slowest replica's rows a fast one's window read
      // past many rows of other shares.
      // (One index probe: it reads what qb_win's first row is, without sorting qb_win.)
      ", CASE WHEN $7::boolean THEN (SELECT " + Ts("w.{scheduled_at}") +
      " || ' ' || w.{sequence} FROM {T} AS w WHERE " + window + " LIMIT 1) END" +
      ", (SELECT qb_key FROM qb_keys ORDER BY qb_pass DESC, qb_key DESC LIMIT 1)"
      // The keys of this share the walk saw, when it went round every key (it stopped short of
      // $1 candidates) and no due unkeyed row of the share waits: then a window holding that
      // many keys makes the walk useless ($11). Else -1.
      ", (SELECT CASE WHEN count(*) > 0 AND max(qb_n) < $1::int AND NOT coalesce(bool_or("
      "qb_state = 'pending' AND qb_at > (SELECT t FROM qb_now) AND " +
      mine("qb_key") +
      "), false) AND NOT EXISTS (SELECT 1 FROM"
      " {T} AS u WHERE u.{state} = 'pending' AND (u.{key} IS NULL OR u.{key} = '') AND"
      " u.{scheduled_at} <= (SELECT t FROM qb_now) AND " +
      mine("u.{id}::text") + ") THEN count(*) FILTER (WHERE " + mine("qb_key") +
      ") ELSE -1 END FROM qb_keys)"
      // When the walk ran: the keys the window held (a window that held every key of the share
      // was enough, so the walk does not count as a fallback).
      ", CASE WHEN (SELECT qb_on FROM qb_gate) THEN " +
      window_keys + " END";
  // The window: twice the batch, so a few blocked rows among the heads never cost the skip scan.
  const KeyShare share = ShareForClaim();
  const ClaimWindowStart::Position from = window_start_.Next();
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      Run(tmpl, {int64_t{limit}, lease_ms, int64_t{limit} * kClaimWindowFactor, from.at,
                 from.sequence, from.key_after, std::string(from.use_window ? "true" : "false"),
                 int64_t{share.count}, int64_t{share.index},
                 std::string(from.allow_walk ? "true" : "false"), from.share_keys}));
  // Only a replica whose claims succeed heartbeats: one that cannot claim (a bad column mapping,
  // a lost database) drops out after its ttl and the others take its keys.
  HeartbeatAfterClaim();
  if (rows.empty()) window_start_.ClaimedNothing();
  std::vector<OutboxRow> out;
  out.reserve(rows.size());
  for (const SqlRow& r : rows) out.push_back(ToOutboxRow(r));
  if (!rows.empty() && rows.front().size() > 13) {
    if (rows.front()[12].has_value()) window_start_.Advance(*rows.front()[12]);
    if (rows.front()[13].has_value()) {
      // The key walk ran. It counts as a fallback (the window comes back after a second) only
      // when the window was read and came up short: not when this claim skipped the window, nor
      // when the window held a row of every key of the share the walk saw.
      const auto number = [&](size_t i) {
        return rows.front().size() > i && rows.front()[i].has_value()
                   ? ParseInt(*rows.front()[i]).value_or(-1)
                   : int64_t{-1};
      };
      const int64_t share_keys = number(14);
      const int64_t keys_in_window = number(15);
      window_start_.SawShareKeys(share_keys);
      if (from.use_window && !(share_keys >= 0 && keys_in_window >= share_keys)) {
        window_start_.FellBack(*rows.front()[13]);
      } else {
        window_start_.VisitedKeysUpTo(*rows.front()[13]);
      }
    }
  }
  SortClaimed(out);
  return out;
}

void PostgresOutboxStore::EnableKeyAffinity(int64_t ttl_ms, const std::string& name) {
  std::lock_guard<std::mutex> lock(affinity_.mu);
  if (affinity_.replica_id.empty()) {
    Result<std::string> id = babelqueue::NewUuidV4();
    if (!id.ok()) {
      log::Warn(
          "Key affinity stays off: no replica id could be made; this replica claims every key",
          {{"reason", SanitizeError(id.status().message())}});
      return;
    }
    affinity_.replica_id = *id;
  }
  affinity_.enabled = true;
  affinity_.left = false;
  // VARCHAR(255) counts characters; 255 bytes never exceed it (a cut UTF-8 sequence is dropped).
  std::string cut = name;
  if (cut.size() > 255) {
    cut.resize(255);
    while (!cut.empty() && (static_cast<unsigned char>(cut.back()) & 0x80) != 0) cut.pop_back();
  }
  affinity_.name = cut;
  affinity_.ttl_ms = std::max<int64_t>(1, ttl_ms);
  affinity_.last = {};
}

Result<KeyShare> PostgresOutboxStore::Heartbeat() {
  std::string id, name;
  int64_t ttl_ms;
  {
    std::lock_guard<std::mutex> lock(affinity_.mu);
    if (!affinity_.enabled) return KeyShare{};
    id = affinity_.replica_id;
    name = affinity_.name;
    ttl_ms = affinity_.ttl_ms;
  }
  // One statement: upsert this replica (database clock), drop replicas expired for over a minute,
  // count the live others of the same outbox table and those ranked before this one. The SELECT
  // does not see the upsert (one snapshot), so this replica is counted by the `1 +`.
  static const std::string sql =
      "WITH qb_now AS (SELECT clock_timestamp() AS t), "
      "qb_up AS (INSERT INTO queuebox_relay_replicas AS r (replica_id, outbox_table, name,"
      " started_at, heartbeat_at, expires_at) SELECT $1::uuid, $4::text, $2::text, t, t,"
      " t + $3::bigint" +
      std::string(kMs) +
      " FROM qb_now ON CONFLICT (replica_id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at,"
      " expires_at = EXCLUDED.expires_at, name = EXCLUDED.name RETURNING r.replica_id), "
      "qb_gone AS (DELETE FROM queuebox_relay_replicas AS g WHERE g.expires_at <"
      " (SELECT t FROM qb_now) - interval '1 minute' AND g.replica_id <> $1::uuid"
      " RETURNING g.replica_id) "
      "SELECT 1 + count(*), count(*) FILTER (WHERE o.replica_id < $1::uuid)"
      " FROM queuebox_relay_replicas AS o WHERE o.expires_at > (SELECT t FROM qb_now)"
      " AND o.replica_id <> $1::uuid AND o.outbox_table = $4::text";
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run(sql, {id, name, ttl_ms, config_.outbox_table}));
  KeyShare share;
  if (!rows.empty() && rows[0].size() == 2 && rows[0][0].has_value() && rows[0][1].has_value()) {
    share.count = static_cast<int>(ParseInt(*rows[0][0]).value_or(1));
    share.index = static_cast<int>(ParseInt(*rows[0][1]).value_or(0));
  }
  if (share.count < 1 || share.index < 0 || share.index >= share.count) share = KeyShare{};
  std::lock_guard<std::mutex> lock(affinity_.mu);
  if (affinity_.failing) {
    log::Info("Key affinity is back: the replica table answers again");
    affinity_.failing = false;
  }
  if (!affinity_.joined || !(share == affinity_.share)) {
    window_start_.ShareChanged();
    log::Info("This replica's share of the keys changed (key affinity)",
              {{"replicas", std::to_string(share.count)},
               {"index", std::to_string(share.index)},
               {"replica_id", id}});
  }
  affinity_.joined = true;
  affinity_.share = share;
  affinity_.last = std::chrono::steady_clock::now();
  return share;
}

KeyShare PostgresOutboxStore::ShareForClaim() {
  std::lock_guard<std::mutex> lock(affinity_.mu);
  return affinity_.enabled && affinity_.joined ? affinity_.share : KeyShare{};
}

void PostgresOutboxStore::HeartbeatAfterClaim() {
  {
    std::lock_guard<std::mutex> lock(affinity_.mu);
    if (!affinity_.enabled || affinity_.left) return;
    if (std::chrono::steady_clock::now() - affinity_.last < kHeartbeatEvery) return;
  }
  Result<KeyShare> share = Heartbeat();
  if (share.ok()) return;
  std::lock_guard<std::mutex> lock(affinity_.mu);
  if (!affinity_.failing) {
    log::Warn(
        "Key affinity is off until the replica table answers; this replica claims every key. "
        "If the database is up, `queuebox migrate` creates the table queuebox_relay_replicas.",
        {{"reason", SanitizeError(share.status().message())}});
    affinity_.failing = true;
  }
  // Every key until the table answers; retried after the next claim once kHeartbeatEvery passed.
  affinity_.joined = false;
  affinity_.share = KeyShare{};
  affinity_.last = std::chrono::steady_clock::now();
}

void PostgresOutboxStore::LeaveReplicaSet() {
  std::string id;
  {
    std::lock_guard<std::mutex> lock(affinity_.mu);
    if (!affinity_.enabled) return;
    affinity_.left = true;  // no heartbeat after this, even if a claim still runs
    if (!affinity_.joined) return;
    id = affinity_.replica_id;
    affinity_.joined = false;
  }
  Status s = Run("DELETE FROM queuebox_relay_replicas WHERE replica_id = $1::uuid", {id}).status();
  if (!s.ok()) {
    log::Warn(
        "Could not leave the replica set; the others take this replica's keys when its "
        "heartbeat expires",
        {{"reason", SanitizeError(s.message())}});
  }
}

Result<std::vector<std::string>> PostgresOutboxStore::MarkSent(std::span<const Fence> fences) {
  std::vector<std::string> ids, tokens;
  for (const Fence* f : InIdOrder(fences, [](const Fence& x) -> const Fence& { return x; })) {
    ids.push_back(f->id);
    tokens.push_back(f->claim_token);
  }
  if (ids.empty()) return std::vector<std::string>{};
  static const std::string tmpl = FencedUpdate(
      "{state} = 'sent', {updated_at} = clock_timestamp(), {claim_token} = NULL, "
      "{lease_expires_at} = NULL",
      "$1::uuid[], $2::uuid[]", "qb_id, qb_token");
  return OutcomeIds(tmpl, {PgArray(ids), PgArray(tokens)});
}

Result<std::vector<std::string>> PostgresOutboxStore::ScheduleRetry(
    std::span<const RetryOrder> orders) {
  std::vector<std::string> ids, tokens, delays, errors;
  for (const RetryOrder* o :
       InIdOrder(orders, [](const RetryOrder& x) -> const Fence& { return x.fence; })) {
    ids.push_back(o->fence.id);
    tokens.push_back(o->fence.claim_token);
    delays.push_back(std::to_string(o->delay_ms < 0 ? 0 : o->delay_ms));
    errors.push_back(o->error);
  }
  if (ids.empty()) return std::vector<std::string>{};
  static const std::string tmpl = FencedUpdate(
      "{state} = 'pending', {attempt} = o.{attempt} + 1, "
      "{scheduled_at} = clock_timestamp() + f.qb_delay" +
          std::string(kMs) +
          ", {claimed_at} = NULL, {claim_token} = NULL, {lease_expires_at} = NULL, "
          "{last_error} = f.qb_error, {updated_at} = clock_timestamp()",
      "$1::uuid[], $2::uuid[], $3::bigint[], $4::text[]", "qb_id, qb_token, qb_delay, qb_error");
  Result<std::vector<std::string>> retried =
      OutcomeIds(tmpl, {PgArray(ids), PgArray(tokens), PgArray(delays), PgArray(errors)});
  // A retried head is due after its key's later rows: a window holding rows of every key no
  // longer means it judged every head.
  if (retried.ok() && !retried->empty()) {
    int64_t first_due = std::numeric_limits<int64_t>::max();
    for (const RetryOrder& o : orders) first_due = std::min(first_due, o.delay_ms);
    window_start_.Retried(first_due);
  }
  return retried;
}

Result<std::vector<std::string>> PostgresOutboxStore::MarkDead(std::span<const DeadOrder> orders) {
  std::vector<std::string> ids, tokens, errors;
  for (const DeadOrder* o :
       InIdOrder(orders, [](const DeadOrder& x) -> const Fence& { return x.fence; })) {
    ids.push_back(o->fence.id);
    tokens.push_back(o->fence.claim_token);
    errors.push_back(o->error);
  }
  if (ids.empty()) return std::vector<std::string>{};
  static const std::string tmpl = FencedUpdate(
      "{state} = 'dead', {claimed_at} = NULL, {claim_token} = NULL, {lease_expires_at} = NULL, "
      "{last_error} = f.qb_error, {updated_at} = clock_timestamp()",
      "$1::uuid[], $2::uuid[], $3::text[]", "qb_id, qb_token, qb_error");
  return OutcomeIds(tmpl, {PgArray(ids), PgArray(tokens), PgArray(errors)});
}

Result<std::vector<std::string>> PostgresOutboxStore::Renew(std::span<const Fence> fences,
                                                            int64_t lease_ms) {
  std::vector<std::string> ids, tokens;
  for (const Fence* f : InIdOrder(fences, [](const Fence& x) -> const Fence& { return x; })) {
    ids.push_back(f->id);
    tokens.push_back(f->claim_token);
  }
  if (ids.empty()) return std::vector<std::string>{};
  QB_RETURN_IF_ERROR(ValidateClaim(1, lease_ms));
  static const std::string tmpl =
      FencedUpdate("{lease_expires_at} = clock_timestamp() + $3::bigint" + std::string(kMs),
                   "$1::uuid[], $2::uuid[]", "qb_id, qb_token");
  return Ids(tmpl, {PgArray(ids), PgArray(tokens), lease_ms});
}

Result<int64_t> PostgresOutboxStore::ReclaimExpired() {
  int64_t changes = 0;
  // SKIP LOCKED: a row whose lease expired while a replica writes its outcome or renews it is
  // locked by that write; waiting for it could deadlock with the write's other rows (locked in
  // id order, InIdOrder). The write's fence rejects an expired lease, so the row is still
  // expired afterwards and the next reclaim (every claimTimeoutMs / 5) returns it.
  static const std::string sql =
      "UPDATE {T} SET {state} = 'pending', {claimed_at} = NULL, {updated_at} = clock_timestamp() "
      "WHERE {id} IN (SELECT r.{id} FROM {T} AS r WHERE r.{state} = 'processing' AND "
      "(r.{lease_expires_at} IS NULL OR r.{lease_expires_at} <= clock_timestamp()) "
      "FOR UPDATE OF r SKIP LOCKED)";
  QB_RETURN_IF_ERROR(Run(sql, {}, &changes).status());
  // Reclaimed rows keep their due time, which may lie before the window start.
  if (changes > 0) window_start_.Reset();
  return changes;
}

Result<std::string> PostgresOutboxStore::Insert(const NewOutboxRow& row) {
  std::string cols = "{topic}, {payload}";
  std::string values = "$1, $2::jsonb";
  std::vector<SqlParam> params{row.topic, row.payload};
  auto add = [&](const char* col, SqlParam p, const std::string& before, const std::string& after) {
    params.push_back(std::move(p));
    cols += std::string(", ") + col;
    values += ", " + before + "$" + std::to_string(params.size()) + after;
  };
  if (row.id) add("{id}", *row.id, "", "::uuid");
  if (row.key) add("{key}", *row.key, "", "");
  if (row.headers) add("{headers}", *row.headers, "", "::jsonb");
  if (row.aggregate_type) add("{aggregate_type}", *row.aggregate_type, "", "");
  if (row.max_attempts) add("{max_attempts}", int64_t{*row.max_attempts}, "", "::int");
  if (row.delay_ms) {
    add("{scheduled_at}", *row.delay_ms, "clock_timestamp() + ", "::bigint" + std::string(kMs));
  }
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      Run("INSERT INTO {T} (" + cols + ") VALUES (" + values + ") RETURNING {id}::text", params));
  if (rows.empty() || !rows[0][0]) return Internal("The insert returned no id.");
  return *rows[0][0];
}

Result<OutboxStats> PostgresOutboxStore::Stats() {
  QB_ASSIGN_OR_RETURN(SqlRows by_state, Run("SELECT {state}, count(*) FROM {T} GROUP BY {state}"));
  QB_ASSIGN_OR_RETURN(SqlRows oldest,
                      Run("SELECT EXTRACT(EPOCH FROM clock_timestamp() - min({created_at}))"
                          "::float8 FROM {T} WHERE {state} = 'pending'"));
  QB_ASSIGN_OR_RETURN(
      SqlRows dead,
      Run("SELECT {topic}, count(*) FROM {T} WHERE {state} = 'dead' GROUP BY {topic}"));
  return ToStats(by_state, oldest, dead);
}

std::vector<ReplicaInfo> PostgresOutboxStore::Replicas() {
  std::vector<ReplicaInfo> out;
  // The replica table is optional (key affinity off, database.migrate false): no rows then.
  Result<SqlRows> rows =
      Run("SELECT name, EXTRACT(EPOCH FROM clock_timestamp() - heartbeat_at)::float8, " +
              Ts("started_at") +
              " FROM queuebox_relay_replicas WHERE outbox_table = $1::text"
              " AND expires_at > clock_timestamp() ORDER BY replica_id",
          {config_.outbox_table});
  if (!rows.ok()) return out;
  for (const SqlRow& r : *rows) {
    if (r.size() != 3 || !r[0] || !r[1] || !r[2]) continue;
    out.push_back({*r[0], std::strtod(r[1]->c_str(), nullptr), *r[2]});
  }
  return out;
}

Result<std::vector<std::string>> PostgresOutboxStore::DistinctTopics() {
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run("SELECT DISTINCT {topic} FROM {T} ORDER BY 1"));
  return FirstColumn(rows);
}

Result<int64_t> PostgresOutboxStore::Replay(const ReplayFilter& filter) {
  static const ReplayDialect kDialect{
      "clock_timestamp()", [](size_t n) { return "$" + std::to_string(n); },
      [](const std::string& col, const std::string& p) {
        // ids are UUIDs: a malformed one is kInvalidArgument (SQLSTATE 22P02).
        return col + " = ANY (" + p + (col == "{id}" ? "::uuid[])" : "::text[])");
      },
      &PgArray, [](const std::string& p) { return p + "::timestamptz"; }};
  QB_ASSIGN_OR_RETURN(std::optional<ReplayStatement> st, BuildReplay(filter, kDialect));
  if (!st) return int64_t{0};
  int64_t changes = 0;
  QB_RETURN_IF_ERROR(Run(st->sql, st->params, &changes).status());
  return changes;
}

Result<std::vector<DeadRow>> PostgresOutboxStore::ListDead(int limit) {
  if (limit <= 0) return InvalidArgument("The limit must be above 0.");
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      Run("SELECT {id}::text, {topic}, {key}, {attempt}, {last_error}, " + Ts("{updated_at}") +
              " FROM {T} WHERE {state} = 'dead' ORDER BY {updated_at} DESC, {sequence} DESC "
              "LIMIT $1::int",
          {int64_t{limit}}));
  std::vector<DeadRow> out;
  for (const SqlRow& r : rows) out.push_back(ToDeadRow(r));
  return out;
}

Result<int64_t> PostgresOutboxStore::DeleteOlderThan(const std::string& state, int64_t max_age_ms,
                                                     int batch) {
  QB_RETURN_IF_ERROR(ValidateRetention(state, max_age_ms, "max_age_ms", batch));
  int64_t changes = 0;
  // A MATERIALIZED CTE: `IN (subquery ... LIMIT)` can be planned as a rescanned semi-join inner
  // side, each rescan taking another batch.
  QB_RETURN_IF_ERROR(
      Run("WITH doomed AS MATERIALIZED (SELECT {id} AS qb_id FROM {T} WHERE {state} = $1 AND "
          "{updated_at} < clock_timestamp() - $2::bigint" +
              std::string(kMs) +
              " ORDER BY {updated_at} LIMIT $3::int FOR UPDATE SKIP LOCKED) "
              "DELETE FROM {T} WHERE {state} = $1 AND {id} IN (SELECT qb_id FROM doomed)",
          {state, max_age_ms, int64_t{batch}}, &changes)
          .status());
  return changes;
}

Result<int64_t> PostgresOutboxStore::DeleteBeyondCount(const std::string& state, int64_t max_count,
                                                       int batch) {
  QB_RETURN_IF_ERROR(ValidateRetention(state, max_count, "max_count", batch));
  int64_t changes = 0;
  QB_RETURN_IF_ERROR(
      Run("WITH doomed AS MATERIALIZED (SELECT {id} AS qb_id FROM {T} WHERE {state} = $1 "
          "ORDER BY {updated_at} DESC, {sequence} DESC OFFSET $2::bigint LIMIT $3::int "
          "FOR UPDATE SKIP LOCKED) "
          "DELETE FROM {T} WHERE {state} = $1 AND {id} IN (SELECT qb_id FROM doomed)",
          {state, max_count, int64_t{batch}}, &changes)
          .status());
  return changes;
}

}  // namespace queuebox::store
