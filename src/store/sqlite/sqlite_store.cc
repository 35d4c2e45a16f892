#include "store/sqlite/sqlite_store.h"

#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "store/inbox_common.h"
#include "store/migrate.h"

namespace queuebox::store {
namespace {

// SQLite's clock, as the text every timestamp column holds.
constexpr const char* kNow = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
// A random lowercase UUID v4, made in SQL (the same expression as the id default of V1).
constexpr const char* kNewUuid =
    "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || "
    "substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || "
    "substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)))";

// 'now' plus `ms_expr` milliseconds, as timestamp text.
std::string NowPlus(const std::string& ms_expr) {
  return "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', (" + ms_expr +
         ") / 1000.0))";
}

constexpr const char* kRowColumns =
    "{id}, {topic}, {key}, {payload}, {headers}, {aggregate_type}, {attempt}, {max_attempts}, "
    "{sequence}, {claim_token}, {created_at}, {scheduled_at}";

// The JSON array text of a batch: [{"id":..,"token":..,...}, ...]. Invalid UTF-8 is replaced,
// never thrown (no exception crosses the module boundary).
std::string ToJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The fence of a batch element, with its attempt's record when it carries one.
nlohmann::json FenceJson(const Fence& f) {
  nlohmann::json j{{"id", f.id}, {"token", f.claim_token}};
  if (f.record) {
    j["attempt"] = f.record->attempt;
    j["dest"] = f.record->destination;
    j["ms"] = f.record->duration_ms;
    j["answer"] = f.record->answer;
  }
  return j;
}

// The attempts of the rows ?2 (JSON array of ids) from the batch ?1; ?3 outcome, ?4 row table.
constexpr const char* kInsertAttemptsSql =
    "INSERT INTO outbox_attempts (message_id, attempt, row_table, destination, outcome, "
    "duration_ms, answer, error) SELECT json_extract(value, '$.id'), "
    "coalesce(json_extract(value, '$.attempt'), 0), ?4, NULLIF(json_extract(value, '$.dest'), "
    "''), ?3, NULLIF(json_extract(value, '$.ms'), -1), NULLIF(json_extract(value, '$.answer'), "
    "''), json_extract(value, '$.error') FROM json_each(?1) WHERE json_extract(value, '$.id') IN "
    "(SELECT value FROM json_each(?2))";

Status StatusFromSqlite(int rc, const std::string& what, const char* message) {
  std::string text = what + ": " + (message != nullptr ? message : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_FULL:
    case SQLITE_PROTOCOL:
      return Unavailable(text);
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
      return InvalidArgument(text);
    default:
      return Internal(text);
  }
}

}  // namespace

// MigrationBackend over the store's connection; the store's mutex is held for the whole run.
class SqliteOutboxStore::Migrator final : public MigrationBackend {
 public:
  explicit Migrator(SqliteOutboxStore& s) : s_(s) {}
  Status Begin() override { return s_.ExecLocked("BEGIN IMMEDIATE"); }
  Status Commit() override { return s_.ExecLocked("COMMIT"); }
  void Rollback() override { (void)s_.ExecLocked("ROLLBACK"); }
  Status ExecScript(const std::string& sql) override { return s_.ExecLocked(sql); }
  Result<bool> TableExists(const std::string& table) override {
    QB_ASSIGN_OR_RETURN(
        SqlRows rows,
        s_.RunLocked("SELECT 1 FROM sqlite_master WHERE type = 'table' AND lower(name) = lower(?1)",
                     {table}));
    return !rows.empty();
  }
  Status CreateHistory() override {
    return s_.ExecLocked(std::string("CREATE TABLE IF NOT EXISTS ") + kHistoryTable +
                         " (version INTEGER PRIMARY KEY, description TEXT NOT NULL, "
                         "checksum INTEGER, applied_at TEXT NOT NULL DEFAULT (" +
                         kNow + "))");
  }
  Result<SqlRows> Query(const std::string& sql, const std::vector<SqlParam>& params) override {
    return s_.RunLocked(sql, params);
  }
  std::string Param(int n) const override { return "?" + std::to_string(n); }

 private:
  SqliteOutboxStore& s_;
};

Result<std::string> SqliteOutboxStore::PathFromUrl(const std::string& url) {
  std::string path = url;
  for (const char* prefix : {"jdbc:sqlite:", "sqlite://", "sqlite:"}) {
    std::string p(prefix);
    if (path.rfind(p, 0) == 0) {
      path = path.substr(p.size());
      break;
    }
  }
  if (path.empty()) {
    return InvalidArgument(
        "database.url is empty: give the SQLite file path, e.g. "
        "/var/lib/queuebox/outbox.db or sqlite:outbox.db.");
  }
  return path;
}

namespace {

// The write gate of a database file (SqliteOutboxStore::write_gate_), by its canonical path.
std::shared_ptr<std::mutex> WriteGateFor(const std::string& path) {
  static std::mutex registry_mu;
  static std::map<std::string, std::weak_ptr<std::mutex>> registry;
  std::error_code ec;
  std::string key = path;
  if (path != ":memory:" && !path.starts_with("file:")) {
    std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
    if (!ec) key = canonical.string();
  }
  std::lock_guard<std::mutex> lock(registry_mu);
  for (auto it = registry.begin(); it != registry.end();) {
    it = it->second.expired() ? registry.erase(it) : std::next(it);
  }
  if (key == ":memory:") return std::make_shared<std::mutex>();  // a database per connection
  std::shared_ptr<std::mutex> gate = registry[key].lock();
  if (gate == nullptr) {
    gate = std::make_shared<std::mutex>();
    registry[key] = gate;
  }
  return gate;
}

}  // namespace

Result<sqlite3*> SqliteOutboxStore::OpenConnection(const DatabaseConfig& config, int flags) {
  QB_ASSIGN_OR_RETURN(std::string path, PathFromUrl(config.url));
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    Status s = Unavailable("Cannot open the SQLite database '" + path +
                           "': " + (db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    return s;
  }
  int64_t busy_ms = config.connection_timeout_ms > 0 ? config.connection_timeout_ms : 30000;
  sqlite3_busy_timeout(db, static_cast<int>(std::min<int64_t>(busy_ms, 2147483647)));
  return db;
}

Result<std::unique_ptr<SqliteOutboxStore>> SqliteOutboxStore::Open(const DatabaseConfig& config) {
  QB_RETURN_IF_ERROR(ValidateIdentifiers(config));
  QB_ASSIGN_OR_RETURN(std::string path, PathFromUrl(config.url));
  QB_ASSIGN_OR_RETURN(sqlite3 * db,
                      OpenConnection(config, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  std::unique_ptr<SqliteOutboxStore> store(new SqliteOutboxStore(db, config));
  store->write_gate_ = WriteGateFor(path);
  store->inbox_ = std::make_unique<SqliteInboxStore>(*store);
  SqliteOutboxStore* self = store.get();
  store->console_ = std::make_unique<SqlConsole>(
      config, /*postgres=*/false,
      [self](const std::string& sql, const std::vector<SqlParam>& params) {
        return self->Read(sql, params);
      },
      [self](const std::string& sql, const std::vector<SqlParam>& params) {
        return self->Write(sql, params);
      },
      [self](const std::string& table, const std::vector<std::string>& ids) {
        const std::string tmpl =
            "DELETE FROM {T} WHERE {state} = 'dead' AND {id} IN (SELECT value FROM json_each(?1)) "
            "RETURNING {id}";
        return self->DeleteWithHistory(
            table == "inbox" ? RenderInboxSql(tmpl, self->config_) : self->Sql(tmpl),
            {ToJson(nlohmann::json(ids))});
      });
  {
    std::lock_guard<std::mutex> lock(store->mu_);
    // WAL: readers never block the writer. ":memory:" stays in its own journal mode.
    QB_RETURN_IF_ERROR(store->ExecLocked("PRAGMA journal_mode = WAL"));
  }
  return store;
}

SqliteOutboxStore::SqliteOutboxStore(sqlite3* db, DatabaseConfig config)
    : db_(db), config_(std::move(config)) {}

SqliteOutboxStore::~SqliteOutboxStore() {
  console_.reset();
  inbox_.reset();
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

std::string SqliteOutboxStore::Sql(std::string_view tmpl) const {
  return RenderSql(tmpl, config_.outbox_table, config_.columns);
}

Status SqliteOutboxStore::ErrorLocked(int rc, const std::string& what) const {
  return StatusFromSqlite(rc, what, sqlite3_errmsg(db_));
}

Status SqliteOutboxStore::ExecLocked(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  Status s = StatusFromSqlite(rc, "SQLite", err);
  sqlite3_free(err);
  return s;
}

Result<SqlRows> SqliteOutboxStore::RunLocked(const std::string& sql,
                                             const std::vector<SqlParam>& params,
                                             int64_t* changes) {
  sqlite3_stmt* stmt = nullptr;
  if (auto it = statements_.find(sql); it != statements_.end()) {
    stmt = it->second;
  } else {
    int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr);
    if (rc != SQLITE_OK) return ErrorLocked(rc, "SQLite prepare");
    statements_.emplace(sql, stmt);
  }
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  for (size_t i = 0; i < params.size(); ++i) {
    int idx = static_cast<int>(i) + 1;
    int rc = SQLITE_OK;
    if (const auto* n = std::get_if<int64_t>(&params[i])) {
      rc = sqlite3_bind_int64(stmt, idx, *n);
    } else if (const auto* t = std::get_if<std::string>(&params[i])) {
      rc = sqlite3_bind_text(stmt, idx, t->data(), static_cast<int>(t->size()), SQLITE_TRANSIENT);
    } else {
      rc = sqlite3_bind_null(stmt, idx);
    }
    if (rc != SQLITE_OK) return ErrorLocked(rc, "SQLite bind");
  }
  SqlRows rows;
  for (;;) {
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      Status s = ErrorLocked(rc, "SQLite");
      sqlite3_reset(stmt);
      return s;
    }
    int n = sqlite3_column_count(stmt);
    SqlRow row;
    row.reserve(static_cast<size_t>(n));
    for (int c = 0; c < n; ++c) {
      if (sqlite3_column_type(stmt, c) == SQLITE_NULL) {
        row.emplace_back(std::nullopt);
      } else {
        const unsigned char* text = sqlite3_column_text(stmt, c);
        int len = sqlite3_column_bytes(stmt, c);
        row.emplace_back(
            std::string(reinterpret_cast<const char*>(text), static_cast<size_t>(len)));
      }
    }
    rows.push_back(std::move(row));
  }
  if (changes != nullptr) *changes = sqlite3_changes64(db_);
  sqlite3_reset(stmt);
  return rows;
}

Result<SqlRows> SqliteOutboxStore::Read(const std::string& sql,
                                        const std::vector<SqlParam>& params) {
  std::lock_guard<std::mutex> lock(mu_);
  return RunLocked(sql, params);
}

Result<SqlRows> SqliteOutboxStore::Write(const std::string& sql,
                                         const std::vector<SqlParam>& params, int64_t* changes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::lock_guard<std::mutex> gate(*write_gate_);
  QB_RETURN_IF_ERROR(ExecLocked("BEGIN IMMEDIATE"));
  Result<SqlRows> rows = RunLocked(sql, params, changes);
  if (!rows.ok()) {
    (void)ExecLocked("ROLLBACK");
    return rows;
  }
  Status commit = ExecLocked("COMMIT");
  if (!commit.ok()) {
    (void)ExecLocked("ROLLBACK");
    return commit;
  }
  return rows;
}

Status SqliteOutboxStore::Transaction(const std::function<Status()>& body) {
  std::lock_guard<std::mutex> lock(mu_);
  std::lock_guard<std::mutex> gate(*write_gate_);
  QB_RETURN_IF_ERROR(ExecLocked("BEGIN IMMEDIATE"));
  Status s;
  try {
    s = body();
  } catch (const std::exception& e) {  // never leave the one connection inside a transaction
    s = Internal(std::string("a write transaction failed: ") + e.what());
  }
  if (s.ok()) s = ExecLocked("COMMIT");
  if (!s.ok()) (void)ExecLocked("ROLLBACK");
  return s;
}

Result<MigrateReport> SqliteOutboxStore::Migrate(std::optional<int> baseline) {
  std::lock_guard<std::mutex> lock(mu_);
  Migrator migrator(*this);
  claim_sql_.clear();  // the migration may add the claim's indexes: choose the hints again
  return RunMigrations(migrator, SqliteMigrations(), config_, baseline, SqliteEarlierChecksums());
}

Status SqliteOutboxStore::Ping() { return Read("SELECT 1").status(); }

Status SqliteOutboxStore::CheckSchema() {
  const std::string& column = config_.columns.sequence;
  QB_ASSIGN_OR_RETURN(SqlRows cols, Read(kSqliteTableColumnsSql, {config_.outbox_table}));
  return RequireColumn(
      OutboxSequenceColumn(
          config_, "rebuild the table with " + Quote(column) +
                       " INTEGER PRIMARY KEY AUTOINCREMENT (docs/schema.md, SQLite) and copy the "
                       "rows into it in created_at order."),
      FirstColumn(cols));
}

namespace {

// The claim statement (docs/schema.md, SQLite; docs/claim-plans.md has the plans): one UPDATE,
// O(batch) at any backlog, also when one key has a long run of rows ahead of the others.
// ?1 limit, ?2 lease ms, ?3 window (= kClaimWindowFactor x limit).
// - qb_fast: the heads among the first ?3 due pending rows in claim order, read from
//   idx_outbox_pending_due (scheduled_at, sequence = rowid), at most ?1. A head has no
//   key or no lower pending/processing row of its key (a probe of idx_outbox_key_sequence).
// - qb_gate: true when qb_fast found fewer than ?1 heads and more due rows lie beyond the window
//   (the window was full of rows blocked behind their key's head).
// - only then: qb_keys, a skip scan over idx_outbox_key_sequence (one seek per active key, each
//   giving the key's lowest pending/processing row, its head), plus the first ?1 due unkeyed
//   rows from idx_outbox_pending_unkeyed (V15); qb_slow keeps the first ?1 in claim order.
// `hints` pins each read to the bundled migrations' index (INDEXED BY): without statistics the
// planner reads unkeyed rows through idx_outbox_pending_scheduled, O(backlog). A mapped table, or
// one made by hand without these indexes, is left to the planner (ClaimSqlLocked).
// The fallback's reads are gated by their LIMIT (0 when the gate is closed): SQLite evaluates a
// LIMIT once before the loop, while a gate in WHERE is tested row by row, so a closed gate would
// still walk all of idx_outbox_key_sequence (O(backlog); found by bench/sqlite_bench.sh).
// 'now' is one instant for the whole statement, and the write lock (BEGIN IMMEDIATE) serialises
// claimers, so no row changes between the reads and the UPDATE.
std::string ClaimTemplate(bool hints) {
  auto by = [hints](const char* index) {
    return hints ? std::string(" INDEXED BY ") + index : std::string();
  };
  const std::string key_seq = by("idx_outbox_key_sequence");
  const std::string active = "{state} IN ('pending', 'processing')";
  const std::string window = "SELECT {sequence} AS qb_s, {scheduled_at} AS qb_at FROM {T}" +
                             by("idx_outbox_pending_due") +
                             " WHERE {state} = 'pending' AND {scheduled_at} <= " + kNow +
                             " ORDER BY {scheduled_at}, {sequence}";
  const std::string gate = "(SELECT qb_on FROM qb_gate)";
  return "WITH RECURSIVE "
         // The window and its heads.
         "qb_fast (qb_s, qb_at) AS MATERIALIZED (SELECT win.qb_s, win.qb_at FROM (" +
         window + " LIMIT ?3) AS win JOIN {T} AS head ON head.{sequence} = win.qb_s" +
         " WHERE head.{key} IS NULL OR head.{key} = '' OR NOT EXISTS (SELECT 1 FROM {T} AS prior" +
         key_seq + " WHERE prior.{key} = head.{key} AND prior." + active +
         " AND prior.{sequence} < head.{sequence}) ORDER BY win.qb_at, win.qb_s LIMIT ?1), "
         // Fallback needed?
         "qb_gate (qb_on) AS MATERIALIZED (SELECT (SELECT count(*) FROM qb_fast) < ?1 AND EXISTS "
         "(" +
         window +
         " LIMIT 1 OFFSET ?3)), "
         // The skip scan: each active key's lowest row, key by key.
         "qb_keys (qb_k, qb_s, qb_st, qb_at) AS (SELECT * FROM (SELECT {key}, {sequence}, "
         "{state}, {scheduled_at} FROM {T}" +
         key_seq + " WHERE " + active + " AND {key} > '' ORDER BY {key}, {sequence} LIMIT " + gate +
         ") UNION ALL SELECT n.{key}, n.{sequence}, "
         "n.{state}, n.{scheduled_at} FROM qb_keys JOIN {T} AS n ON n.{sequence} = (SELECT "
         "k.{sequence} FROM {T} AS k" +
         key_seq + " WHERE k." + active +
         " AND k.{key} > qb_keys.qb_k ORDER BY k.{key}, k.{sequence} LIMIT 1)), "
         // Due heads and due unkeyed rows, first ?1 in claim order.
         "qb_slow (qb_s) AS (SELECT qb_s FROM (SELECT qb_s, qb_at FROM qb_keys WHERE qb_st = "
         "'pending' AND qb_at <= " +
         kNow + " UNION ALL SELECT * FROM (SELECT {sequence}, {scheduled_at} FROM {T}" +
         by("idx_outbox_pending_unkeyed") +
         " WHERE {state} = 'pending' AND ({key} IS NULL OR {key} = '') AND {scheduled_at} <= " +
         kNow + " ORDER BY {scheduled_at}, {sequence} LIMIT ?1 * " + gate +
         ")) ORDER BY qb_at, qb_s LIMIT ?1), "
         "qb_pick (qb_s) AS (SELECT qb_s FROM qb_fast WHERE NOT " +
         gate +
         " UNION ALL SELECT qb_s FROM qb_slow) "
         "UPDATE {T} SET {state} = 'processing', {claim_token} = " +
         kNewUuid + ", {claimed_at} = " + kNow + ", {updated_at} = " + kNow +
         ", {lease_expires_at} = " + NowPlus("?2") +
         " WHERE {sequence} IN (SELECT qb_s FROM qb_pick) RETURNING " + kRowColumns;
}

}  // namespace

std::string SqliteOutboxStore::ClaimSql(const DatabaseConfig& config, bool index_hints) {
  static const std::string hinted = ClaimTemplate(true);
  static const std::string plain = ClaimTemplate(false);
  return RenderSql(index_hints ? hinted : plain, config.outbox_table, config.columns);
}

Result<std::string> SqliteOutboxStore::ClaimSqlLocked() {
  if (!claim_sql_.empty()) return claim_sql_;
  // Hints only on the default names with every claim index in place: a table made by hand (a
  // baseline, or mapped names) may lack them, and INDEXED BY a missing index fails to prepare.
  bool hints = RequireDefaultSchema(config_).ok();
  if (hints) {
    QB_ASSIGN_OR_RETURN(SqlRows found,
                        RunLocked("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                                  "name IN ('idx_outbox_pending_due', 'idx_outbox_key_sequence', "
                                  "'idx_outbox_pending_unkeyed') AND tbl_name = ?1",
                                  {config_.outbox_table}));
    hints = !found.empty() && found[0][0] == "3";
  }
  claim_sql_ = ClaimSql(config_, hints);
  return claim_sql_;
}

Result<std::vector<OutboxRow>> SqliteOutboxStore::Claim(int limit, int64_t lease_ms) {
  QB_RETURN_IF_ERROR(ValidateClaim(limit, lease_ms));
  std::string sql;
  {
    std::lock_guard<std::mutex> lock(mu_);
    QB_ASSIGN_OR_RETURN(sql, ClaimSqlLocked());
  }
  QB_ASSIGN_OR_RETURN(SqlRows rows,
                      Write(sql, {int64_t{limit}, lease_ms, int64_t{limit} * kClaimWindowFactor}));
  std::vector<OutboxRow> out;
  out.reserve(rows.size());
  for (const SqlRow& r : rows) out.push_back(ToOutboxRow(r));
  SortClaimed(out);
  return out;
}

Result<std::vector<std::string>> SqliteOutboxStore::FencedWrite(const std::string& tmpl,
                                                                const std::string& batch,
                                                                std::vector<SqlParam> extra) {
  std::vector<SqlParam> params{batch};
  for (auto& p : extra) params.push_back(std::move(p));
  QB_ASSIGN_OR_RETURN(SqlRows rows, Write(Sql(tmpl), params));
  return FirstColumn(rows);
}

Result<std::vector<std::string>> SqliteOutboxStore::RecordedWrite(const std::string& sql,
                                                                  const std::string& batch,
                                                                  std::string_view outcome,
                                                                  std::string_view row_table) {
  std::vector<std::string> done;
  Status s = Transaction([&]() -> Status {
    QB_ASSIGN_OR_RETURN(SqlRows rows, RunLocked(sql, {batch}));
    done = FirstColumn(rows);
    if (done.empty()) return Status::Ok();
    return RunLocked(kInsertAttemptsSql, {batch, ToJson(nlohmann::json(done)), std::string(outcome),
                                          std::string(row_table)})
        .status();
  });
  if (!s.ok()) return s;
  return done;
}

Result<int64_t> SqliteOutboxStore::DeleteWithHistory(const std::string& sql,
                                                     const std::vector<SqlParam>& params) {
  QB_ASSIGN_OR_RETURN(bool history, HistoryTableExists());
  int64_t deleted = 0;
  Status s = Transaction([&]() -> Status {
    QB_ASSIGN_OR_RETURN(SqlRows rows, RunLocked(sql, params));
    deleted = static_cast<int64_t>(rows.size());
    if (!history || rows.empty()) return Status::Ok();
    return RunLocked(
               "DELETE FROM outbox_attempts WHERE message_id IN (SELECT value FROM "
               "json_each(?1))",
               {ToJson(nlohmann::json(FirstColumn(rows)))})
        .status();
  });
  if (!s.ok()) return s;
  return deleted;
}

Result<bool> SqliteOutboxStore::HistoryTableExists() {
  const int known = history_table_.load();
  if (known >= 0) return known == 1;
  QB_ASSIGN_OR_RETURN(SqlRows rows, Read("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                         "AND name = 'outbox_attempts'"));
  const bool exists = !rows.empty() && rows[0][0] == "1";
  history_table_ = exists ? 1 : 0;
  return exists;
}

Status SqliteOutboxStore::EnableAttemptHistory() {
  QB_ASSIGN_OR_RETURN(bool exists, HistoryTableExists());
  if (!exists) {
    return FailedPrecondition(
        "the table outbox_attempts does not exist; `queuebox migrate` creates it (V22), or "
        "create it as docs/schema.md shows");
  }
  history_ = true;
  return Status::Ok();
}

Result<std::vector<AttemptRow>> SqliteOutboxStore::Attempts(const std::string& message_id) {
  QB_ASSIGN_OR_RETURN(bool exists, HistoryTableExists());
  if (!exists) return FailedPrecondition("the table outbox_attempts does not exist");
  QB_ASSIGN_OR_RETURN(SqlRows rows,
                      Read("SELECT message_id, " + std::string(kAttemptColumns) +
                               ", recorded_at FROM outbox_attempts WHERE message_id = ?1 "
                               "ORDER BY recorded_at, rowid",
                           {message_id}));
  std::vector<AttemptRow> out;
  for (const SqlRow& r : rows) out.push_back(ToAttemptRow(r));
  return out;
}

namespace {

// UPDATE ... FROM the JSON batch ?1, fenced by id, token, state and an unexpired lease.
std::string SqliteFencedUpdate(const std::string& set) {
  return "UPDATE {T} SET " + set +
         " FROM (SELECT json_extract(value, '$.id') AS qb_id,"
         " json_extract(value, '$.token') AS qb_token,"
         " json_extract(value, '$.delay') AS qb_delay,"
         " json_extract(value, '$.error') AS qb_error FROM json_each(?1)) AS qb_f"
         " WHERE {T}.{id} = qb_f.qb_id AND {T}.{claim_token} = qb_f.qb_token"
         " AND {T}.{state} = 'processing' AND {T}.{lease_expires_at} > " +
         kNow + " RETURNING {id}";
}

}  // namespace

namespace {
const std::string& MarkSentTemplate() {
  static const std::string tmpl =
      SqliteFencedUpdate(std::string("{state} = 'sent', {updated_at} = ") + kNow +
                         ", {claim_token} = NULL, {lease_expires_at} = NULL");
  return tmpl;
}
}  // namespace

std::string SqliteOutboxStore::MarkSentSql(const DatabaseConfig& config) {
  return RenderSql(MarkSentTemplate(), config.outbox_table, config.columns);
}

Result<std::vector<std::string>> SqliteOutboxStore::MarkSent(std::span<const Fence> fences) {
  if (fences.empty()) return std::vector<std::string>{};
  nlohmann::json batch = nlohmann::json::array();
  for (const Fence& f : fences) batch.push_back(FenceJson(f));
  if (Recording(fences.front())) {
    return RecordedWrite(Sql(MarkSentTemplate()), ToJson(batch), kAttemptSent, "outbox");
  }
  return FencedWrite(MarkSentTemplate(), ToJson(batch));
}

Result<std::vector<std::string>> SqliteOutboxStore::ScheduleRetry(
    std::span<const RetryOrder> orders) {
  if (orders.empty()) return std::vector<std::string>{};
  static const std::string tmpl = SqliteFencedUpdate(
      std::string("{state} = 'pending', {attempt} = {attempt} + 1, {scheduled_at} = ") +
      NowPlus("qb_f.qb_delay") + ", {claimed_at} = NULL, {claim_token} = NULL, " +
      "{lease_expires_at} = NULL, {last_error} = qb_f.qb_error, {updated_at} = " + kNow);
  nlohmann::json batch = nlohmann::json::array();
  for (const RetryOrder& o : orders) {
    nlohmann::json j = FenceJson(o.fence);
    j["delay"] = o.delay_ms < 0 ? 0 : o.delay_ms;
    j["error"] = o.error;
    batch.push_back(std::move(j));
  }
  if (Recording(orders.front().fence)) {
    return RecordedWrite(Sql(tmpl), ToJson(batch), kAttemptRetry, "outbox");
  }
  return FencedWrite(tmpl, ToJson(batch));
}

Result<std::vector<std::string>> SqliteOutboxStore::Release(std::span<const ReleaseOrder> orders) {
  if (orders.empty()) return std::vector<std::string>{};
  // As ScheduleRetry, with the attempt kept: the destination was out, the message not at fault.
  static const std::string tmpl = SqliteFencedUpdate(
      std::string("{state} = 'pending', {scheduled_at} = ") + NowPlus("qb_f.qb_delay") +
      ", {claimed_at} = NULL, {claim_token} = NULL, {lease_expires_at} = NULL, " +
      "{last_error} = qb_f.qb_error, {updated_at} = " + kNow);
  nlohmann::json batch = nlohmann::json::array();
  for (const ReleaseOrder& o : orders) {
    nlohmann::json j = FenceJson(o.fence);
    j["delay"] = o.delay_ms < 0 ? 0 : o.delay_ms;
    j["error"] = o.error;
    batch.push_back(std::move(j));
  }
  if (Recording(orders.front().fence)) {
    return RecordedWrite(Sql(tmpl), ToJson(batch), kAttemptReleased, "outbox");
  }
  return FencedWrite(tmpl, ToJson(batch));
}

Result<std::vector<std::string>> SqliteOutboxStore::MarkDead(std::span<const DeadOrder> orders) {
  if (orders.empty()) return std::vector<std::string>{};
  static const std::string tmpl = SqliteFencedUpdate(
      std::string("{state} = 'dead', {claimed_at} = NULL, {claim_token} = NULL, ") +
      "{lease_expires_at} = NULL, {last_error} = qb_f.qb_error, {updated_at} = " + kNow);
  nlohmann::json batch = nlohmann::json::array();
  for (const DeadOrder& o : orders) {
    nlohmann::json j = FenceJson(o.fence);
    j["error"] = o.error;
    batch.push_back(std::move(j));
  }
  if (Recording(orders.front().fence)) {
    return RecordedWrite(Sql(tmpl), ToJson(batch), kAttemptDead, "outbox");
  }
  return FencedWrite(tmpl, ToJson(batch));
}

Result<std::vector<std::string>> SqliteOutboxStore::Renew(std::span<const Fence> fences,
                                                          int64_t lease_ms) {
  if (fences.empty()) return std::vector<std::string>{};
  QB_RETURN_IF_ERROR(ValidateClaim(1, lease_ms));
  static const std::string tmpl = SqliteFencedUpdate("{lease_expires_at} = " + NowPlus("?2"));
  nlohmann::json batch = nlohmann::json::array();
  for (const Fence& f : fences) batch.push_back(FenceJson(f));
  return FencedWrite(tmpl, ToJson(batch), {lease_ms});
}

Result<int64_t> SqliteOutboxStore::ReclaimExpired() {
  static const std::string tmpl =
      std::string("UPDATE {T} SET {state} = 'pending', {claimed_at} = NULL, {updated_at} = ") +
      kNow + " WHERE {state} = 'processing' AND ({lease_expires_at} IS NULL OR " +
      "{lease_expires_at} <= " + kNow + ")";
  int64_t changes = 0;
  QB_RETURN_IF_ERROR(Write(Sql(tmpl), {}, &changes).status());
  return changes;
}

Result<std::string> SqliteOutboxStore::Insert(const NewOutboxRow& row) {
  std::string cols = "{topic}, {payload}";
  std::string values = "?1, ?2";
  std::vector<SqlParam> params{row.topic, row.payload};
  auto add = [&](const char* col, SqlParam p, const std::string& expr = "") {
    params.push_back(std::move(p));
    std::string ph = "?" + std::to_string(params.size());
    cols += std::string(", ") + col;
    values += ", " + (expr.empty() ? ph : expr + ph + ")");
  };
  if (row.id) add("{id}", *row.id);
  if (row.key) add("{key}", *row.key);
  if (row.headers) add("{headers}", *row.headers);
  if (row.aggregate_type) add("{aggregate_type}", *row.aggregate_type);
  if (row.max_attempts) add("{max_attempts}", int64_t{*row.max_attempts});
  if (row.delay_ms) {
    params.push_back(int64_t{*row.delay_ms});
    cols += ", {scheduled_at}";
    values += ", " + NowPlus("?" + std::to_string(params.size()));
  }
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      Write(Sql("INSERT INTO {T} (" + cols + ") VALUES (" + values + ") RETURNING {id}"), params));
  if (rows.empty() || !rows[0][0]) return Internal("The insert returned no id.");
  return *rows[0][0];
}

Result<OutboxStats> SqliteOutboxStore::Stats() {
  QB_ASSIGN_OR_RETURN(SqlRows by_state,
                      Read(Sql("SELECT {state}, count(*) FROM {T} GROUP BY {state}")));
  QB_ASSIGN_OR_RETURN(
      SqlRows oldest,
      Read(Sql("SELECT (julianday('now') - julianday(min({created_at}))) * 86400.0 FROM {T} "
               "WHERE {state} = 'pending'")));
  QB_ASSIGN_OR_RETURN(SqlRows dead,
                      Read(Sql("SELECT {topic}, count(*) FROM {T} WHERE {state} = 'dead' "
                               "GROUP BY {topic}")));
  return ToStats(by_state, oldest, dead);
}

// Pending rows only (idx_outbox_pending_created), not every sent row kept.
Result<OutboxStats> SqliteOutboxStore::PendingGauges() {
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      Read(Sql("SELECT count(*), (julianday('now') - julianday(min({created_at}))) * 86400.0 "
               "FROM {T} WHERE {state} = 'pending'")));
  return ToPendingStats(rows);
}

Result<std::vector<std::string>> SqliteOutboxStore::DistinctTopics() {
  QB_ASSIGN_OR_RETURN(SqlRows rows, Read(Sql("SELECT DISTINCT {topic} FROM {T} ORDER BY 1")));
  return FirstColumn(rows);
}

Result<int64_t> SqliteOutboxStore::Replay(const ReplayFilter& filter) {
  static const ReplayDialect kDialect{
      kNow, [](size_t n) { return "?" + std::to_string(n); },
      [](const std::string& col, const std::string& p) {
        return col + " IN (SELECT value FROM json_each(" + p + "))";
      },
      [](const std::vector<std::string>& items) { return ToJson(nlohmann::json(items)); },
      [](const std::string& p) { return "strftime('%Y-%m-%dT%H:%M:%fZ', " + p + ")"; }};
  QB_ASSIGN_OR_RETURN(std::optional<ReplayStatement> st, BuildReplay(filter, kDialect));
  if (!st) return int64_t{0};
  int64_t changes = 0;
  QB_RETURN_IF_ERROR(Write(Sql(st->sql), st->params, &changes).status());
  return changes;
}

Result<std::vector<DeadRow>> SqliteOutboxStore::ListDead(int limit) {
  if (limit <= 0) return InvalidArgument("The limit must be above 0.");
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      Read(Sql("SELECT {id}, {topic}, {key}, {attempt}, {last_error}, {updated_at} FROM {T} "
               "WHERE {state} = 'dead' ORDER BY {updated_at} DESC, {sequence} DESC LIMIT ?1"),
           {int64_t{limit}}));
  std::vector<DeadRow> out;
  for (const SqlRow& r : rows) out.push_back(ToDeadRow(r));
  return out;
}

Result<int64_t> SqliteOutboxStore::DeleteOlderThan(const std::string& state, int64_t max_age_ms,
                                                   int batch) {
  QB_RETURN_IF_ERROR(ValidateRetention(state, max_age_ms, "max_age_ms", batch));
  static const std::string tmpl =
      "DELETE FROM {T} WHERE {state} = ?1 AND {id} IN (SELECT {id} FROM {T} WHERE {state} = ?1 "
      "AND {updated_at} < " +
      NowPlus("-?2") + " ORDER BY {updated_at} LIMIT ?3) RETURNING {id}";
  return DeleteWithHistory(Sql(tmpl), {state, max_age_ms, int64_t{batch}});
}

Result<int64_t> SqliteOutboxStore::DeleteBeyondCount(const std::string& state, int64_t max_count,
                                                     int batch) {
  QB_RETURN_IF_ERROR(ValidateRetention(state, max_count, "max_count", batch));
  static const std::string tmpl =
      "DELETE FROM {T} WHERE {state} = ?1 AND {id} IN (SELECT {id} FROM {T} WHERE {state} = ?1 "
      "ORDER BY {updated_at} DESC, {sequence} DESC LIMIT ?3 OFFSET ?2) RETURNING {id}";
  return DeleteWithHistory(Sql(tmpl), {state, max_count, int64_t{batch}});
}

}  // namespace queuebox::store
