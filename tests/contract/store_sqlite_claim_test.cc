// The SQLite claim (SqliteOutboxStore::Claim, docs/schema.md): its plan reads only indexes, and a
// table without the bundled claim indexes (made by hand, or mapped names) is claimed correctly
// without the index hints. The claim's outcomes are in the store contract suite (both dialects).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "store/sqlite/sqlite_store.h"
#include "store_test_support.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StoreDb;

class SqliteClaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_.Create("");
    auto store = db_.Open();
    ASSERT_NE(store, nullptr);
    auto report = store->Migrate(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
  }

  // 100 rows of key 'hot', then a, a, b, NULL, '', c: returns the ids of the last six.
  std::vector<std::string> InsertHotKeyAhead(const std::string& table) {
    db_.Exec(
        "WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < 99) "
        "INSERT INTO " +
        table + " (topic, key, payload) SELECT 't', 'hot', '{}' FROM g");
    std::vector<std::string> ids;
    for (const char* key : {"'a'", "'a'", "'b'", "NULL", "''", "'c'"}) {
      db_.Exec("INSERT INTO " + table + " (topic, key, payload) VALUES ('t', " + key + ", '{}')");
      ids.push_back(db_.Scalar("SELECT id FROM " + table + " ORDER BY sequence DESC LIMIT 1"));
    }
    return ids;
  }

  // One claim of 10 takes hot's head and the heads behind it, never a's second row.
  void ExpectHotKeyClaim(OutboxStore& store, const std::string& table) {
    std::vector<std::string> ids = InsertHotKeyAhead(table);
    auto rows = store.Claim(10, 60000);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_EQ(rows->size(), 6u);
    EXPECT_EQ((*rows)[0].key, "hot");
    EXPECT_EQ(std::to_string((*rows)[0].sequence),
              db_.Scalar("SELECT min(sequence) FROM " + table));
    std::vector<std::string> claimed;
    for (size_t i = 1; i < rows->size(); ++i) claimed.push_back((*rows)[i].id);
    EXPECT_THAT(claimed, ElementsAre(ids[0], ids[2], ids[3], ids[4], ids[5]));
    EXPECT_EQ(db_.Scalar("SELECT state FROM " + table + " WHERE id = '" + ids[1] + "'"), "pending");
  }

  StoreDb db_{"sqlite"};
};

TEST_F(SqliteClaimTest, TheClaimPlanReadsTheClaimIndexesAndScansNoTable) {
  std::string sql = store::SqliteOutboxStore::ClaimSql(db_.config(), true);
  std::string plan;
  for (const auto& row : db_.Query("EXPLAIN QUERY PLAN " + sql)) plan += row[3] + "\n";
  EXPECT_THAT(plan, HasSubstr("USING INDEX idx_outbox_pending_due (scheduled_at<?)"));
  EXPECT_THAT(plan, HasSubstr("USING INDEX idx_outbox_key_sequence (key=? AND sequence<?)"));
  EXPECT_THAT(plan, HasSubstr("USING INDEX idx_outbox_key_sequence (key>?)"));
  EXPECT_THAT(plan, HasSubstr("USING INDEX idx_outbox_pending_unkeyed (scheduled_at<?)"));
  // A full read of the outbox (under any of the statement's aliases) would be O(backlog).
  std::regex table_scan(R"(^SCAN (outbox|head|prior|k|n)( |$))", std::regex::multiline);
  EXPECT_FALSE(std::regex_search(plan, table_scan)) << plan;
}

// The work of one claim, in SQLite virtual-machine steps (a count, not a time): the claim
// statement run on the test's file inside a rolled-back transaction.
int64_t ClaimSteps(const std::string& path, const std::string& sql, int limit) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_bind_int64(st, 1, limit);
  sqlite3_bind_int64(st, 2, 60000);
  sqlite3_bind_int64(st, 3, 2 * int64_t{limit});
  EXPECT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  int rows = 0;
  while (sqlite3_step(st) == SQLITE_ROW) ++rows;
  EXPECT_EQ(rows, limit);
  int64_t steps = sqlite3_stmt_status(st, SQLITE_STMTSTATUS_VM_STEP, 0);
  sqlite3_finalize(st);
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  return steps;
}

TEST_F(SqliteClaimTest, TheWorkOfAClaimDoesNotGrowWithTheBacklog) {
  const std::string path = db_.config().url.substr(std::string("sqlite:").size());
  const std::string sql = store::SqliteOutboxStore::ClaimSql(db_.config(), true);
  auto add = [&](int rows, const std::string& key_sql) {
    db_.Exec("WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < " +
             std::to_string(rows - 1) + ") INSERT INTO outbox (topic, key, payload) SELECT 't', " +
             key_sql + ", '{}' FROM g");
  };
  // Uniform: 50 keys round-robin, the window path. 1,000 rows, then 20,000.
  add(1000, "'k' || (n % 50)");
  int64_t small = ClaimSteps(path, sql, 20);
  add(19000, "'k' || (n % 50)");
  int64_t large = ClaimSteps(path, sql, 20);
  EXPECT_LT(large, small * 3 / 2) << small << " steps at 1,000 rows, " << large << " at 20,000";
  // Skewed: a hot key's 5,000 rows ahead of the same 20,000, the fallback path.
  db_.Exec("DELETE FROM outbox");
  add(500, "'hot'");
  add(1000, "'k' || (n % 50)");
  int64_t skewed_small = ClaimSteps(path, sql, 20);
  db_.Exec("DELETE FROM outbox");
  add(5000, "'hot'");
  add(20000, "'k' || (n % 50)");
  int64_t skewed_large = ClaimSteps(path, sql, 20);
  EXPECT_LT(skewed_large, skewed_small * 3 / 2)
      << skewed_small << " steps behind 500 hot rows, " << skewed_large << " behind 5,000";
}

TEST_F(SqliteClaimTest, ATableWithoutTheClaimIndexesIsClaimedWithoutHints) {
  // As a table made by hand and baselined might be: no V12/V15 indexes.
  db_.Exec("DROP INDEX idx_outbox_pending_due");
  db_.Exec("DROP INDEX idx_outbox_pending_unkeyed");
  auto store = db_.Open();
  ASSERT_NE(store, nullptr);
  ExpectHotKeyClaim(*store, "outbox");
}

TEST_F(SqliteClaimTest, AMappedTableIsClaimedWithoutHints) {
  db_.Exec("ALTER TABLE outbox RENAME TO events");
  db_.config().outbox_table = "events";
  db_.config().migrate = false;
  auto store = db_.Open();
  ASSERT_NE(store, nullptr);
  ExpectHotKeyClaim(*store, "events");
}

}  // namespace
}  // namespace queuebox
