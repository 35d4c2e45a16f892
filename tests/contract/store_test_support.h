// store_test_support.h: a migrated store of either dialect plus raw SQL access to its database,
// shared by the store contract suites (tests/contract/store_*_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/store.h"
#include "testing/env.h"
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

}  // namespace queuebox::testing
