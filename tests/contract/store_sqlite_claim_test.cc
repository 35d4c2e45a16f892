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
