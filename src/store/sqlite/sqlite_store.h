// sqlite_store.h: the outbox store on SQLite (sqlite3 C API), the embedded default.
//
// Schema (docs/adr/0001-sqlite-outbox-schema.md, docs/schema.md): the seed's columns with SQLite
// types; `sequence` INTEGER PRIMARY KEY AUTOINCREMENT, `id` TEXT UNIQUE (random UUID v4 made in
// SQL), timestamps ISO-8601 UTC text with milliseconds ('%Y-%m-%dT%H:%M:%fZ') so they compare as
// text, payload/headers CHECK(json_valid(...)).
//
// One connection per store, guarded by a mutex (SQLite has one writer anyway); WAL journal,
// busy_timeout = connection_timeout_ms. Every write runs in a BEGIN IMMEDIATE transaction, so
// several stores (or processes) on one file serialise their claims. The clock is SQLite's 'now'.
//
// database.url: a file path, or the same path after `sqlite:`, `sqlite://` or `jdbc:sqlite:`; a
// `file:` URI is handed to SQLite as a URI (file:/tmp/outbox.db?mode=rwc). ":memory:" works
// (one private database per store).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/store.h"
#include "store/common.h"
#include "store/console_sql.h"
#include "store/sqlite/sqlite_inbox_store.h"

namespace queuebox::store {

// The column names of table ?1, for the schema guard (common.h RequireColumn).
inline constexpr const char* kSqliteTableColumnsSql = "SELECT name FROM pragma_table_info(?1)";

class SqliteOutboxStore final : public OutboxStore {
 public:
  // Opens (creating it when missing) the file config.url names. kInvalidArgument for a bad URL or
  // name; kUnavailable when the file cannot be opened.
  static Result<std::unique_ptr<SqliteOutboxStore>> Open(const DatabaseConfig& config);
  // The file path (or file: URI) that database.url names; kInvalidArgument when empty.
  static Result<std::string> PathFromUrl(const std::string& url);
  // A connection to the file config.url names, opened with `flags` (SQLITE_OPEN_*; URI and
  // NOMUTEX are added) and database.connectionTimeoutMs as its busy timeout (30000 when unset).
  // The caller owns it (sqlite3_close). kInvalidArgument for a bad URL; kUnavailable when the
  // file cannot be opened.
  static Result<sqlite3*> OpenConnection(const DatabaseConfig& config, int flags);

  // The statements as Claim and MarkSent run them for `config` (names mapped), for EXPLAIN QUERY
  // PLAN in bench/ and docs/claim-plans.md. Claim: ?1 limit, ?2 lease ms, ?3 window rows;
  // `index_hints` pins its reads to the bundled migrations' indexes (INDEXED BY), which Claim
  // does when the table has the default names and those indexes. MarkSent: ?1 the JSON array
  // [{"id": .., "token": ..}, ...].
  static std::string ClaimSql(const DatabaseConfig& config, bool index_hints);
  static std::string MarkSentSql(const DatabaseConfig& config);

  ~SqliteOutboxStore() override;
  SqliteOutboxStore(const SqliteOutboxStore&) = delete;
  SqliteOutboxStore& operator=(const SqliteOutboxStore&) = delete;

  std::string_view dialect() const override { return "sqlite"; }
  Result<MigrateReport> Migrate(std::optional<int> baseline) override;
  Status Ping() override;
  Status CheckSchema() override;
  Result<std::vector<OutboxRow>> Claim(int limit, int64_t lease_ms) override;
  Result<std::vector<std::string>> MarkSent(std::span<const Fence> fences) override;
  Result<std::vector<std::string>> ScheduleRetry(std::span<const RetryOrder> orders) override;
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) override;
  Result<std::vector<std::string>> Release(std::span<const ReleaseOrder> orders) override;
  Result<std::vector<std::string>> Renew(std::span<const Fence> fences, int64_t lease_ms) override;
  Result<int64_t> ReclaimExpired() override;
  Result<std::string> Insert(const NewOutboxRow& row) override;
  Result<OutboxStats> Stats() override;
  Result<OutboxStats> PendingGauges() override;
  Result<std::vector<std::string>> DistinctTopics() override;
  Result<int64_t> Replay(const ReplayFilter& filter) override;
  Result<std::vector<DeadRow>> ListDead(int limit) override;
  Result<int64_t> DeleteOlderThan(const std::string& state, int64_t max_age_ms, int batch) override;
  Result<int64_t> DeleteBeyondCount(const std::string& state, int64_t max_count,
                                    int batch) override;
  Result<std::vector<AttemptRow>> Attempts(const std::string& message_id) override;
  Status EnableAttemptHistory() override;
  // The inbox on the same connection (sqlite_inbox_store.h).
  InboxStore* inbox() override { return inbox_.get(); }
  // The console's reads on the same connection (console_sql.h).
  ConsoleQueries* console() override { return console_.get(); }

 private:
  class Migrator;
  friend class SqliteInboxStore;

  SqliteOutboxStore(sqlite3* db, DatabaseConfig config);
  std::string Sql(std::string_view tmpl) const;

  // Runs one statement (cached, prepared once). Callers hold mu_. `changes` gets the rows changed.
  Result<SqlRows> RunLocked(const std::string& sql, const std::vector<SqlParam>& params,
                            int64_t* changes = nullptr);
  Status ExecLocked(const std::string& sql);  // several statements, no parameters
  // Read: one statement under the mutex.
  Result<SqlRows> Read(const std::string& sql, const std::vector<SqlParam>& params = {});
  // Write: one statement inside BEGIN IMMEDIATE ... COMMIT under the mutex.
  Result<SqlRows> Write(const std::string& sql, const std::vector<SqlParam>& params,
                        int64_t* changes = nullptr);
  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT under the mutex and the write gate; any error
  // (from `body` or the commit) rolls back. `body` calls RunLocked.
  Status Transaction(const std::function<Status()>& body);
  Status ErrorLocked(int rc, const std::string& what) const;
  // The claim statement for this table: with index hints when the claim's indexes exist.
  Result<std::string> ClaimSqlLocked();
  Result<std::vector<std::string>> FencedWrite(const std::string& sql, const std::string& batch,
                                               std::vector<SqlParam> extra = {});
  // The attempt history (outbox.attemptHistory.enabled). Recording: the history is on and the
  // batch's fences carry their AttemptRecord. RecordedWrite runs `sql` (rendered: a fenced
  // UPDATE over the JSON batch ?1, RETURNING the id) and inserts the attempt of each row it
  // changed, from the batch's "attempt", "dest", "ms", "answer" and "error" keys, in one
  // transaction. Returns the ids changed.
  bool Recording(const Fence& first) const { return history_.load() && first.record.has_value(); }
  Result<std::vector<std::string>> RecordedWrite(const std::string& sql, const std::string& batch,
                                                 std::string_view outcome,
                                                 std::string_view row_table);
  // Retention: `sql` (rendered: a DELETE ... RETURNING the id) and, when the table
  // outbox_attempts exists, the deleted rows' attempts, in one transaction. Returns rows deleted.
  Result<int64_t> DeleteWithHistory(const std::string& sql, const std::vector<SqlParam>& params);
  // Whether outbox_attempts exists (asked once, then remembered).
  Result<bool> HistoryTableExists();

  sqlite3* db_;
  DatabaseConfig config_;
  std::string claim_sql_;  // chosen at the first claim (ClaimSqlLocked); guarded by mu_
  std::mutex mu_;
  // One per database file in this process, shared by every store open on it: writers queue
  // here in turn instead of in SQLite's busy handler, which sleeps and retries with no order and
  // let one of four claimers on one file starve past the 30 s busy timeout. Other processes
  // still meet the busy timeout. Taken after mu_, around BEGIN IMMEDIATE ... COMMIT.
  std::shared_ptr<std::mutex> write_gate_;
  std::map<std::string, sqlite3_stmt*> statements_;  // by SQL text
  std::unique_ptr<SqliteInboxStore> inbox_;          // uses this store's connection
  std::unique_ptr<SqlConsole> console_;              // uses this store's connection
  std::atomic<bool> history_{false};                 // EnableAttemptHistory
  std::atomic<int> history_table_{-1};               // -1 not asked yet, 0 missing, 1 there
};

}  // namespace queuebox::store
