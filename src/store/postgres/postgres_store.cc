#include "store/postgres/postgres_store.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <utility>

#include "store/migrate.h"
#include "store/postgres/claim_sql.h"
#include "store/postgres/pg_arrays.h"
#include "store/postgres/pg_fenced.h"

namespace queuebox::store {
namespace {

// The console's runner: one statement on a pooled connection, planned per call.
SqlConsole::Reader ConsoleRunner(PgPool& pool) {
  return [&pool](const std::string& sql, const std::vector<SqlParam>& params) -> Result<SqlRows> {
    QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool.Acquire());
    return conn->Query(sql, params, nullptr, PgConnection::Plan::kPerCall);
  };
}

// Drops the NOTICEs of idempotent DDL; a WARNING still reaches stderr as libpq would print it.
void MigrationNotice(void* /*arg*/, const PGresult* res) {
  const char* severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (severity != nullptr && std::string_view(severity) == "NOTICE") return;
  std::fputs(PQresultErrorMessage(res), stderr);
}

// ScheduleRetry's (the attempt spent) or Release's fenced UPDATE: $1 ids, $2 tokens, $3 delays
// (ms), $4 errors; the recorded form adds the attempt history's arrays at $5..$8.
constexpr const char* kRescheduleArrays = "$1::uuid[], $2::uuid[], $3::bigint[], $4::text[]";
constexpr const char* kRescheduleNames = "qb_id, qb_token, qb_delay, qb_error";

std::string RescheduleSet(bool spend_attempt) {
  return std::string("{state} = 'pending', ") +
         (spend_attempt ? "{attempt} = o.{attempt} + 1, " : "") +
         "{scheduled_at} = clock_timestamp() + f.qb_delay" + std::string(kMs) +
         ", {claimed_at} = NULL, {claim_token} = NULL, {lease_expires_at} = NULL, {last_error} "
         "= f.qb_error, {updated_at} = clock_timestamp()";
}

// MarkSent's fenced UPDATE: $1 ids, $2 tokens (the recorded form: history at $3..$6).
constexpr const char* kSentSet =
    "{state} = 'sent', {updated_at} = clock_timestamp(), {claim_token} = NULL, "
    "{lease_expires_at} = NULL";

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
    : config_(std::move(config)),
      pool_(std::move(settings)),
      fenced_({"o", ", {updated_at} = clock_timestamp()", ""},
              [this](const std::string& tmpl, const std::vector<SqlParam>& params, int64_t* changes,
                     PgConnection::Plan plan) { return Run(tmpl, params, changes, plan); }),
      heartbeat_(pool_, config_.outbox_table, [this] { window_.ShareChanged(); }),
      inbox_(config_, pool_, &window_),
      sent_sql_(fenced_.Update(kSentSet, "$1::uuid[], $2::uuid[]", "qb_id, qb_token")),
      retry_sql_(fenced_.Update(RescheduleSet(true), kRescheduleArrays, kRescheduleNames)),
      release_sql_(fenced_.Update(RescheduleSet(false), kRescheduleArrays, kRescheduleNames)),
      sent_recorded_(fenced_.Recorded(kSentSet, "$1::uuid[], $2::uuid[]", "qb_id, qb_token", 3,
                                      kAttemptSent, false)),
      retry_recorded_(fenced_.Recorded(RescheduleSet(true), kRescheduleArrays, kRescheduleNames, 5,
                                       kAttemptRetry, true)),
      release_recorded_(fenced_.Recorded(RescheduleSet(false), kRescheduleArrays, kRescheduleNames,
                                         5, kAttemptReleased, true)),
      console_(config_, /*postgres=*/true, ConsoleRunner(pool_), ConsoleRunner(pool_),
               [this](const std::string& table, const std::vector<std::string>& ids) {
                 if (table == "inbox") return inbox_.DiscardDead(ids);
                 return fenced_.DeleteWithHistory(
                     "SELECT {id} AS qb_id FROM {T} WHERE {state} = $1 AND {id} = ANY($2::uuid[]) "
                     "FOR UPDATE SKIP LOCKED",
                     {std::string("dead"), PgArray(ids)});
               }),
      claim_sql_(Sql(ClaimSqlTemplate(false))),
      claim_strict_sql_(Sql(ClaimSqlTemplate(true))) {}

std::string PostgresOutboxStore::Sql(std::string_view tmpl) const {
  return RenderSql(tmpl, config_.outbox_table, config_.columns);
}

Result<SqlRows> PostgresOutboxStore::Run(const std::string& tmpl,
                                         const std::vector<SqlParam>& params, int64_t* changes,
                                         PgConnection::Plan plan) {
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  return conn->Query(Sql(tmpl), params, changes, plan);
}

Result<SqlTable> PostgresOutboxStore::RunTable(const std::string& tmpl,
                                               const std::vector<SqlParam>& params) {
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  return conn->QueryTable(Sql(tmpl), params);
}

Result<std::vector<std::string>> PostgresOutboxStore::OutcomeIds(
    Result<std::vector<std::string>> ids) {
  if (ids.ok() && !ids->empty()) window_.OutcomeWritten();
  return ids;
}

Result<MigrateReport> PostgresOutboxStore::Migrate(std::optional<int> baseline) {
  QB_RETURN_IF_ERROR(RequireDefaultSchema(config_));
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  // The idempotent DDL (IF NOT EXISTS) answers with a NOTICE per object that exists; libpq would
  // print each on stderr. The connection returns to the pool with libpq's receiver back.
  PQnoticeReceiver previous = PQsetNoticeReceiver(conn->native(), MigrationNotice, nullptr);
  Migrator migrator(*conn);
  Result<MigrateReport> report =
      RunMigrations(migrator, PostgresMigrations(), config_, baseline, PostgresEarlierChecksums());
  PQsetNoticeReceiver(conn->native(), previous, nullptr);  // libpq's default takes no arg
  return report;
}

Status PostgresOutboxStore::Ping() { return Run("SELECT 1").status(); }

Status PostgresOutboxStore::CheckSchema() {
  const std::string& column = config_.columns.sequence;
  QB_ASSIGN_OR_RETURN(SqlRows cols, Run(kPgTableColumnsSql, {config_.outbox_table}));
  QB_RETURN_IF_ERROR(
      RequireColumn(OutboxSequenceColumn(config_, "ALTER TABLE " + Quote(config_.outbox_table) +
                                                      " ADD COLUMN " + Quote(column) +
                                                      " BIGINT GENERATED BY DEFAULT AS IDENTITY;"),
                    FirstColumn(cols)));
  // The payload column's type, in every schema of the search path that has the table: jsonb
  // read as UTF-8 holds only JSON our check accepts (jsonb refuses a lone surrogate, which json
  // keeps), so the claimed rows say so (OutboxRow::payload_is_json). A jsonb number beyond a
  // double's range (1e400) is valid JSON and is sent as PostgreSQL writes it.
  bool seen = false, all_jsonb = true;
  for (const SqlRow& r : cols) {
    if (r.size() < 3 || !r[0] || !EqualsIgnoreCase(*r[0], config_.columns.payload)) continue;
    seen = true;
    all_jsonb = all_jsonb && r[1] == "jsonb" && r[2] == "UTF8";
  }
  payload_is_json_.store(seen && all_jsonb);
  return Status::Ok();
}

Result<std::vector<OutboxRow>> PostgresOutboxStore::Claim(int limit, int64_t lease_ms) {
  QB_RETURN_IF_ERROR(ValidateClaim(limit, lease_ms));
  const KeyShare share = heartbeat_.ShareForClaim();
  ClaimParams params;
  params.batch_size = limit;
  params.lease_ms = lease_ms;
  params.window_rows = int64_t{limit} * kClaimWindowFactor;
  params.window = window_.Next();
  params.replicas = share.count;
  params.replica_index = share.index;
  QB_ASSIGN_OR_RETURN(PgPool::Lease conn, pool_.Acquire());
  if (strict_) {
    // The reading comes before the claim's snapshot (its statement starts after it).
    QB_ASSIGN_OR_RETURN(StrictOrderBound::Reading reading, StrictReading(*conn));
    params.strict = true;
    params.strict_bound = reading.bound;
    ClaimWindowState::NextClaim& w = params.window;
    if (reading.window_from_at && w.window_from_at != "-infinity" &&
        *reading.window_from_at < w.window_from_at) {
      w.window_from_at = *reading.window_from_at;
      w.window_from_sequence = 0;
    }
  }
  QB_ASSIGN_OR_RETURN(
      SqlTable table,
      conn->QueryTable(params.strict ? claim_strict_sql_ : claim_sql_, BindClaim(params)));
  // Only a replica whose claims succeed heartbeats: one that cannot claim (a bad column mapping,
  // a lost database) drops out after its ttl and the others take its keys.
  heartbeat_.AfterClaim();
  QB_ASSIGN_OR_RETURN(ClaimResult claimed, ReadClaimResult(std::move(table)));
  window_.Claimed(params.window, claimed.report);
  SortClaimed(claimed.rows);
  if (payload_is_json_.load(std::memory_order_relaxed)) {
    for (OutboxRow& row : claimed.rows) row.payload_is_json = true;
  }
  return std::move(claimed.rows);
}

Status PostgresOutboxStore::EnableStrictOrdering() {
  const std::string& column = config_.columns.sequence;
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run(kStrictSequenceSql, {config_.outbox_table, column}));
  if (rows.empty() || rows[0].size() < 2 || !rows[0][0]) {
    return FailedPrecondition("outbox.ordering: strict needs the column " + column + " of " +
                              config_.outbox_table +
                              " filled by a sequence (a serial or identity column).");
  }
  if (IntOr(rows[0][1], 0) != 1) {
    return FailedPrecondition("outbox.ordering: strict needs the sequence " + *rows[0][0] +
                              " to hand out one value at a time: ALTER SEQUENCE " + *rows[0][0] +
                              " CACHE 1;");
  }
  strict_sequence_ = *rows[0][0];
  strict_ = true;
  return Status::Ok();
}

Result<StrictOrderBound::Reading> PostgresOutboxStore::StrictReading(PgConnection& conn) {
  std::lock_guard<std::mutex> lock(strict_mu_);
  QB_ASSIGN_OR_RETURN(SqlRows last, conn.Query(StrictLastValueSql(strict_sequence_)));
  QB_ASSIGN_OR_RETURN(SqlRows rows, conn.Query(kStrictHoldersSql, {strict_sequence_}));
  const int64_t last_value = last.empty() || last[0].empty() ? 0 : IntOr(last[0][0], 0);
  std::vector<StrictOrderBound::Holder> holders;
  for (const SqlRow& r : rows) {
    StrictOrderBound::Holder h;
    h.vxid = r.empty() ? "" : TextOr(r[0]);
    if (r.size() > 1 && r[1]) h.started_at = *r[1];
    holders.push_back(std::move(h));
  }
  return strict_order_.Observe(last_value, holders);
}

Result<std::vector<std::string>> PostgresOutboxStore::MarkSent(std::span<const Fence> fences) {
  HistoryArrays history;
  const bool recording = !fences.empty() && fenced_.Recording(fences.front());
  FenceArrays batch = FencedBatch(
      fences, [](const Fence& f) -> const Fence& { return f; },
      [&](const Fence& f) {
        if (recording) history.Add(f);
      });
  if (batch.empty()) return std::vector<std::string>{};
  std::vector<SqlParam> params{PgArray(batch.ids), PgArray(batch.tokens)};
  if (!recording) return OutcomeIds(fenced_.Ids(sent_sql_, params));
  history.AppendTo(params);
  return OutcomeIds(fenced_.Ids(sent_recorded_, params));
}

// ScheduleRetry and Release: back to `pending`, due after each order's delay (database clock),
// fenced; `tmpl` says whether the attempt is spent. One statement for the batch.
template <typename Order>
Result<std::vector<std::string>> PostgresOutboxStore::Reschedule(const std::string& tmpl,
                                                                 const std::string& recorded,
                                                                 std::span<const Order> orders) {
  std::vector<std::string> delays, errors;
  HistoryArrays history;
  const bool recording = !orders.empty() && fenced_.Recording(orders.front().fence);
  FenceArrays batch = FencedBatch(
      orders, [](const Order& x) -> const Fence& { return x.fence; },
      [&](const Order& o) {
        delays.push_back(std::to_string(o.delay_ms < 0 ? 0 : o.delay_ms));
        errors.push_back(o.error);
        if (recording) history.Add(o.fence);
      });
  if (batch.empty()) return std::vector<std::string>{};
  std::vector<SqlParam> params{PgArray(batch.ids), PgArray(batch.tokens), PgArray(delays),
                               PgArray(errors)};
  if (recording) history.AppendTo(params);
  Result<std::vector<std::string>> changed =
      OutcomeIds(fenced_.Ids(recording ? recorded : tmpl, params));
  // A head due later than its key's later rows: a window holding rows of every key no longer
  // means it judged every head.
  if (changed.ok() && !changed->empty()) {
    int64_t first_due = std::numeric_limits<int64_t>::max();
    for (const Order& o : orders) first_due = std::min(first_due, o.delay_ms);
    window_.RetryScheduled(first_due);
  }
  return changed;
}

Result<std::vector<std::string>> PostgresOutboxStore::ScheduleRetry(
    std::span<const RetryOrder> orders) {
  return Reschedule(retry_sql_, retry_recorded_, orders);
}

// As ScheduleRetry, with the attempt kept: the destination was out, the message not at fault.
Result<std::vector<std::string>> PostgresOutboxStore::Release(
    std::span<const ReleaseOrder> orders) {
  return Reschedule(release_sql_, release_recorded_, orders);
}

Result<std::vector<std::string>> PostgresOutboxStore::MarkDead(std::span<const DeadOrder> orders) {
  return OutcomeIds(fenced_.MarkDead(orders));
}

Result<std::vector<std::string>> PostgresOutboxStore::Renew(std::span<const Fence> fences,
                                                            int64_t lease_ms) {
  return fenced_.Renew(fences, lease_ms);
}

Result<int64_t> PostgresOutboxStore::ReclaimExpired() {
  QB_ASSIGN_OR_RETURN(int64_t changes, fenced_.ReclaimExpired());
  // Reclaimed rows keep their due time, which may lie before the window start.
  if (changes > 0) window_.LeasesReclaimed();
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
  OutboxStats stats = ToStats(by_state, oldest, dead);
  QB_RETURN_IF_ERROR(ReadStrictBlocker(stats));
  return stats;
}

// Pending rows only: idx_outbox_pending_created holds them, so the cost follows the backlog, not
// the table (Stats' GROUP BY read every sent row kept, every pendingGaugeIntervalMs).
Result<OutboxStats> PostgresOutboxStore::PendingGauges() {
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      Run("SELECT count(*), EXTRACT(EPOCH FROM clock_timestamp() - min({created_at}))::float8 "
          "FROM {T} WHERE {state} = 'pending'"));
  OutboxStats stats = ToPendingStats(rows);
  QB_RETURN_IF_ERROR(ReadStrictBlocker(stats));
  return stats;
}

Status PostgresOutboxStore::ReadStrictBlocker(OutboxStats& stats) {
  if (!strict_) return Status::Ok();
  QB_ASSIGN_OR_RETURN(SqlRows holder, Run(kStrictOldestHolderSql, {strict_sequence_}));
  if (!holder.empty() && holder[0].size() == 2) {
    StrictBlocker blocker;
    blocker.pid = IntOr(holder[0][0], 0);
    if (holder[0][1]) blocker.age_seconds = std::strtod(holder[0][1]->c_str(), nullptr);
    stats.strict_blocker = blocker;
  }
  return Status::Ok();
}

Result<int64_t> PostgresOutboxStore::NextWakeDelayMs(int64_t max_wait_ms) {
  if (max_wait_ms < 1) return InvalidArgument("NextWakeDelayMs: max_wait_ms must be at least 1");
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      Run("SELECT GREATEST(1, LEAST($1::bigint, ceil(EXTRACT(EPOCH FROM min(due) - "
          "clock_timestamp()) * 1000)::bigint)) FROM ("
          "SELECT min({scheduled_at}) AS due FROM {T} WHERE {state} = 'pending' AND "
          "{scheduled_at} > clock_timestamp() "
          "UNION ALL SELECT min({lease_expires_at}) FROM {T} WHERE {state} = 'processing' AND "
          "{lease_expires_at} > clock_timestamp()) AS next_due",
          {max_wait_ms}));
  if (rows.empty() || rows[0].empty() || !rows[0][0]) return max_wait_ms;
  return ParseInt(*rows[0][0]).value_or(max_wait_ms);
}

Result<std::vector<std::string>> PostgresOutboxStore::DistinctTopics() {
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run("SELECT DISTINCT {topic} FROM {T} ORDER BY 1"));
  return FirstColumn(rows);
}

Result<int64_t> PostgresOutboxStore::Replay(const ReplayFilter& filter) {
  QB_ASSIGN_OR_RETURN(std::optional<ReplayStatement> st, BuildReplay(filter, PgReplayDialect()));
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
  return fenced_.DeleteWithHistory(
      "SELECT {id} AS qb_id FROM {T} WHERE {state} = $1 AND "
      "{updated_at} < clock_timestamp() - $2::bigint" +
          std::string(kMs) + " ORDER BY {updated_at} LIMIT $3::int FOR UPDATE SKIP LOCKED",
      {state, max_age_ms, int64_t{batch}});
}

Result<int64_t> PostgresOutboxStore::DeleteBeyondCount(const std::string& state, int64_t max_count,
                                                       int batch) {
  QB_RETURN_IF_ERROR(ValidateRetention(state, max_count, "max_count", batch));
  return fenced_.DeleteWithHistory(
      "SELECT {id} AS qb_id FROM {T} WHERE {state} = $1 "
      "ORDER BY {updated_at} DESC, {sequence} DESC OFFSET $2::bigint LIMIT $3::int "
      "FOR UPDATE SKIP LOCKED",
      {state, max_count, int64_t{batch}});
}

Status PostgresOutboxStore::EnableAttemptHistory() {
  QB_ASSIGN_OR_RETURN(bool exists, fenced_.HistoryTableExists());
  if (!exists) {
    return FailedPrecondition(
        "the table outbox_attempts does not exist; `queuebox migrate` creates it (V22), or "
        "create it as docs/schema.md shows");
  }
  fenced_.EnableHistory();
  inbox_.EnableAttemptHistory();
  return Status::Ok();
}

Result<std::vector<AttemptRow>> PostgresOutboxStore::Attempts(const std::string& message_id) {
  QB_ASSIGN_OR_RETURN(bool exists, fenced_.HistoryTableExists());
  if (!exists) return FailedPrecondition("the table outbox_attempts does not exist");
  std::vector<AttemptRow> out;
  if (!IsUuid(message_id)) return out;
  QB_ASSIGN_OR_RETURN(SqlRows rows, Run("SELECT message_id::text, " + std::string(kAttemptColumns) +
                                            ", " + Ts("recorded_at") +
                                            " FROM outbox_attempts WHERE message_id = $1::uuid "
                                            "ORDER BY recorded_at, attempt",
                                        {message_id}));
  for (const SqlRow& r : rows) out.push_back(ToAttemptRow(r));
  return out;
}

}  // namespace queuebox::store
