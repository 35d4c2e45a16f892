// store_test_support.h: a migrated store of either dialect plus raw SQL access to its database,
// shared by the store contract suites (tests/contract/store_*_test.cc); and OutboxUnderTest, the
// subject of the claims contract: a SQL store or the in-memory twin (testing/fake_store.h).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/store.h"
#include "store/open_store.h"
#include "testing/env.h"
#include "testing/fake_store.h"
#include "testing/pg.h"

namespace queuebox::testing {

// One test database: a temp SQLite file or a TempPgDatabase, with SQL run outside the store.
class StoreDb {
 public:
  explicit StoreDb(std::string dialect) : dialect_(std::move(dialect)) {}
  ~StoreDb() {
    if (sqlite_ != nullptr) sqlite3_close(sqlite_);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Creates the database; for PostgreSQL `pg_url` is QB_TEST_PG_URL.
  void Create(const std::string& pg_url) {
    config_.type = dialect_;
    if (dialect_ == "postgresql") {
      pg_ = std::make_unique<TempPgDatabase>(pg_url);
      config_.url = pg_->url();
      config_.pool_size = 8;
    } else {
      char tmpl[] = "/tmp/qb_store_test_XXXXXX";
      char* dir = mkdtemp(tmpl);
      ASSERT_NE(dir, nullptr);
      dir_ = dir;
      config_.url = "sqlite:" + dir_ + "/outbox.db";
      ASSERT_EQ(sqlite3_open((dir_ + "/outbox.db").c_str(), &sqlite_), SQLITE_OK);
      sqlite3_busy_timeout(sqlite_, 30000);
    }
  }

  bool pg() const { return dialect_ == "postgresql"; }
  DatabaseConfig& config() { return config_; }

  // Create, then a store opened on the database and migrated in `store`; check
  // HasFatalFailure() after.
  void CreateMigrated(const std::string& pg_url, std::unique_ptr<OutboxStore>& store) {
    Create(pg_url);
    store = Open();
    ASSERT_NE(store, nullptr);
    auto report = store->Migrate(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
  }

  std::unique_ptr<OutboxStore> Open() {
    auto store = OpenStore(config_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Rows as text; NULL is "<null>". Aborts the test binary on an SQL error.
  std::vector<std::vector<std::string>> Query(const std::string& sql) {
    if (pg_) return pg_->Query(sql);
    std::vector<std::vector<std::string>> rows;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(sqlite_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sqlite3_errmsg(sqlite_) << " in " << sql;
      return rows;
    }
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      std::vector<std::string> row;
      for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
        const unsigned char* t = sqlite3_column_text(stmt, i);
        row.push_back(t == nullptr ? "<null>" : reinterpret_cast<const char*>(t));
      }
      rows.push_back(std::move(row));
    }
    if (rc != SQLITE_DONE) ADD_FAILURE() << sqlite3_errmsg(sqlite_) << " in " << sql;
    sqlite3_finalize(stmt);
    return rows;
  }
  std::string Scalar(const std::string& sql) {
    auto rows = Query(sql);
    return rows.empty() || rows[0].empty() ? "" : rows[0][0];
  }
  void Exec(const std::string& sql) {
    if (pg_) {
      pg_->Exec(sql);
      return;
    }
    char* err = nullptr;
    if (sqlite3_exec(sqlite_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      ADD_FAILURE() << (err ? err : "?") << " in " << sql;
      sqlite3_free(err);
    }
  }

  // The database clock, as an SQL expression comparable with the timestamp columns.
  std::string Now() const {
    return pg_ ? "clock_timestamp()" : "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
  }
  // The database clock plus `seconds` (negative: in the past).
  std::string NowPlus(int64_t seconds) const {
    if (pg_) return "(clock_timestamp() + interval '" + std::to_string(seconds) + " seconds')";
    return "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '" + std::string(seconds >= 0 ? "+" : "") +
           std::to_string(seconds) + " seconds')";
  }
  // Column `col` of the outbox row `id`.
  std::string Field(const std::string& id, const std::string& col) {
    return Scalar("SELECT " + col + " FROM outbox WHERE id = '" + id + "'");
  }
  // True when the SQL condition holds for row `id`.
  bool Holds(const std::string& id, const std::string& condition) {
    return Scalar("SELECT count(*) FROM outbox WHERE id = '" + id + "' AND (" + condition + ")") ==
           "1";
  }
  // Moves the lease of `id` one hour into the past (an expired claim).
  void ExpireLease(const std::string& id) {
    Exec("UPDATE outbox SET lease_expires_at = " + NowPlus(-3600) + " WHERE id = '" + id + "'");
  }

 private:
  std::string dialect_;
  DatabaseConfig config_;
  std::unique_ptr<TempPgDatabase> pg_;
  std::string dir_;
  sqlite3* sqlite_ = nullptr;
};

// A PostgreSQL-only suite's fixture: its own database and a store on it (not migrated).
class PgStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url_);
    db_ = std::make_unique<StoreDb>("postgresql");
    db_->Create(pg_url_);
    store_ = db_->Open();
    ASSERT_NE(store_, nullptr);
  }

  std::string pg_url_;
  std::unique_ptr<StoreDb> db_;
  std::unique_ptr<OutboxStore> store_;
};

// PgStoreTest with the bundled migrations applied.
class MigratedPgStoreTest : public PgStoreTest {
 protected:
  void SetUp() override {
    PgStoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto report = store_->Migrate(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
  }
};

// The subject of the claims contract (OutboxClaims): a store, the rows inserted into it, and the
// table behind it, read and changed outside the store as another process would.
class OutboxUnderTest {
 public:
  virtual ~OutboxUnderTest() = default;

  virtual OutboxClaims& claims() = 0;
  virtual Result<std::string> Insert(const NewOutboxRow& row) = 0;
  // Another claimer of the same table (its own store and connections where the store has them).
  virtual std::shared_ptr<OutboxClaims> OpenAnother() = 0;
  // Inserts `count` rows of topic 't' and payload '{}' in order of n = 0..count-1 (ascending
  // sequence), with key `key(n)` (nullopt: NULL).
  virtual void InsertRows(int count, const std::function<std::optional<std::string>(int)>& key) = 0;

  // Column `column` of row `id` as text: "<null>" for NULL, "" when there is no such row.
  // Columns: state, attempt, sequence, claim_token, last_error, claimed_at, lease_expires_at.
  virtual std::string Field(const std::string& id, const std::string& column) = 0;
  // The lowest sequence in the table, as text.
  virtual std::string MinSequence() = 0;
  // True when the time column `column` (lease_expires_at, scheduled_at) of row `id` is later /
  // earlier than the database clock plus `seconds`.
  virtual bool IsLaterThanNowPlus(const std::string& id, const std::string& column,
                                  int64_t seconds) = 0;
  virtual bool IsEarlierThanNowPlus(const std::string& id, const std::string& column,
                                    int64_t seconds) = 0;
  // created_at = the database clock plus `seconds`.
  virtual void SetCreatedAt(const std::string& id, int64_t seconds) = 0;
  // Moves the lease of `id` one hour into the past (an expired claim).
  virtual void ExpireLease(const std::string& id) = 0;
  // lease_expires_at = NULL.
  virtual void ClearLease(const std::string& id) = 0;
};

// A migrated SQLite or PostgreSQL store and its database (StoreDb).
class SqlOutboxUnderTest final : public OutboxUnderTest {
 public:
  explicit SqlOutboxUnderTest(const std::string& dialect) : db_(dialect) {}

  // Creates the database, opens the store and migrates it; check HasFatalFailure() after.
  void Create(const std::string& pg_url) {
    ASSERT_NO_FATAL_FAILURE(db_.CreateMigrated(pg_url, store_));
    Status schema = store_->CheckSchema();
    ASSERT_TRUE(schema.ok()) << schema.ToString();
  }

  StoreDb& db() { return db_; }
  OutboxStore& store() { return *store_; }

  OutboxClaims& claims() override { return *store_; }
  Result<std::string> Insert(const NewOutboxRow& row) override { return store_->Insert(row); }
  std::shared_ptr<OutboxClaims> OpenAnother() override { return db_.Open(); }
  void InsertRows(int count, const std::function<std::optional<std::string>(int)>& key) override {
    std::string sql = "INSERT INTO outbox (topic, key, payload) VALUES ";
    for (int n = 0; n < count; ++n) {
      const std::optional<std::string> k = key(n);
      std::string literal = "NULL";
      if (k.has_value()) {
        literal = "'";
        for (char c : *k) literal += c == '\'' ? std::string("''") : std::string(1, c);
        literal += "'";
      }
      sql += (n > 0 ? ", " : "") + std::string("('t', ") + literal + ", '{}')";
    }
    db_.Exec(sql);
  }
  std::string Field(const std::string& id, const std::string& column) override {
    return db_.Field(id, column);
  }
  std::string MinSequence() override { return db_.Scalar("SELECT min(sequence) FROM outbox"); }
  bool IsLaterThanNowPlus(const std::string& id, const std::string& column,
                          int64_t seconds) override {
    return db_.Holds(id, column + " > " + db_.NowPlus(seconds));
  }
  bool IsEarlierThanNowPlus(const std::string& id, const std::string& column,
                            int64_t seconds) override {
    return db_.Holds(id, column + " < " + db_.NowPlus(seconds));
  }
  void SetCreatedAt(const std::string& id, int64_t seconds) override {
    db_.Exec("UPDATE outbox SET created_at = " + db_.NowPlus(seconds) + " WHERE id = '" + id + "'");
  }
  void ExpireLease(const std::string& id) override { db_.ExpireLease(id); }
  void ClearLease(const std::string& id) override {
    db_.Exec("UPDATE outbox SET lease_expires_at = NULL WHERE id = '" + id + "'");
  }

 private:
  StoreDb db_;
  std::unique_ptr<OutboxStore> store_;
};

// The in-memory twin (FakeStore); every claimer shares it.
class MemoryOutboxUnderTest final : public OutboxUnderTest {
 public:
  OutboxClaims& claims() override { return store_; }
  Result<std::string> Insert(const NewOutboxRow& row) override { return store_.Insert(row); }
  std::shared_ptr<OutboxClaims> OpenAnother() override {
    return std::shared_ptr<OutboxClaims>(std::shared_ptr<void>(), &store_);  // not owned
  }
  void InsertRows(int count, const std::function<std::optional<std::string>(int)>& key) override {
    for (int n = 0; n < count; ++n) {
      NewOutboxRow row;
      row.topic = "t";
      row.key = key(n);
      row.payload = "{}";
      auto id = store_.Insert(row);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
    }
  }
  std::string Field(const std::string& id, const std::string& column) override {
    const FakeStore::Row r = store_.Get(id);
    if (r.row.id.empty()) return "";
    const auto time = [](const std::optional<int64_t>& ms) {
      return ms.has_value() ? std::to_string(*ms) : std::string("<null>");
    };
    if (column == "state") return r.state;
    if (column == "attempt") return std::to_string(r.row.attempt);
    if (column == "sequence") return std::to_string(r.row.sequence);
    if (column == "claim_token") return r.row.claim_token.empty() ? "<null>" : r.row.claim_token;
    if (column == "last_error") return r.last_error.empty() ? "<null>" : r.last_error;
    if (column == "claimed_at") return time(r.claimed_at_ms);
    if (column == "lease_expires_at") return time(r.lease_expires_at_ms);
    ADD_FAILURE() << "MemoryOutboxUnderTest has no column " << column;
    return "";
  }
  std::string MinSequence() override {
    std::optional<int64_t> min;
    for (const FakeStore::Row& r : store_.All()) {
      if (!min.has_value() || r.row.sequence < *min) min = r.row.sequence;
    }
    return min.has_value() ? std::to_string(*min) : "<null>";
  }
  bool IsLaterThanNowPlus(const std::string& id, const std::string& column,
                          int64_t seconds) override {
    const std::optional<int64_t> t = TimeOf(id, column);
    return t.has_value() && *t > store_.NowMs() + seconds * 1000;
  }
  bool IsEarlierThanNowPlus(const std::string& id, const std::string& column,
                            int64_t seconds) override {
    const std::optional<int64_t> t = TimeOf(id, column);
    return t.has_value() && *t < store_.NowMs() + seconds * 1000;
  }
  void SetCreatedAt(const std::string& id, int64_t seconds) override {
    const int64_t at = store_.NowMs() + seconds * 1000;
    EXPECT_TRUE(store_.Update(id, [at](FakeStore::Row& r) { r.created_at_ms = at; }));
  }
  void ExpireLease(const std::string& id) override {
    const int64_t at = store_.NowMs() - 3600 * 1000;
    EXPECT_TRUE(store_.Update(id, [at](FakeStore::Row& r) { r.lease_expires_at_ms = at; }));
  }
  void ClearLease(const std::string& id) override {
    EXPECT_TRUE(store_.Update(id, [](FakeStore::Row& r) { r.lease_expires_at_ms.reset(); }));
  }

 private:
  std::optional<int64_t> TimeOf(const std::string& id, const std::string& column) {
    FakeStore::Row r = store_.Get(id);
    if (column == "lease_expires_at") return r.lease_expires_at_ms;
    if (column == "scheduled_at") return r.scheduled_at_ms;
    ADD_FAILURE() << "MemoryOutboxUnderTest has no time column " << column;
    return std::nullopt;
  }

  FakeStore store_;
};

}  // namespace queuebox::testing
