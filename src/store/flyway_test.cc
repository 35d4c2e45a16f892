#include "store/flyway.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace queuebox::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// QueueBox's V<from>..V<to> as Flyway records them, ranks from `rank`.
std::vector<FlywayRow> Applied(int from, int to, int64_t rank = 1) {
  std::vector<FlywayRow> rows;
  for (int v = from; v <= to; ++v) {
    rows.push_back({rank++, std::to_string(v), "d", "SQL", QueueBoxScript(v), true});
  }
  return rows;
}

FlywayRow Baseline(int64_t rank, const std::string& version) {
  return {rank, version, "<< Flyway Baseline >>", "BASELINE", "<< Flyway Baseline >>", true};
}

std::string Error(std::vector<FlywayRow> rows) {
  Result<FlywayAdoption> r = RecogniseQueueBoxHistory(std::move(rows));
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  return r.status().message();
}

TEST(FlywayHistoryTest, AdoptsQueueBoxV1ToV11) {
  auto r = RecogniseQueueBoxHistory(Applied(1, 11));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, 11);
  EXPECT_FALSE(r->baseline.has_value());
  EXPECT_EQ(r->applied.size(), 11u);
  EXPECT_EQ(r->Summary(), "QueueBox V1-V11 (V1-V11 applied by Flyway; installed_rank 1-11)");
}

TEST(FlywayHistoryTest, AdoptsABaselineAtZeroThenTheMigrationsInAnyRowOrder) {
  std::vector<FlywayRow> rows = Applied(1, 11, 2);
  rows.push_back(Baseline(1, "0"));
  std::swap(rows[0], rows[5]);
  auto r = RecogniseQueueBoxHistory(rows);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, 11);
  EXPECT_EQ(r->baseline, std::optional<int>(0));
  EXPECT_EQ(r->Summary(),
            "QueueBox V1-V11 (Flyway baseline V0; V1-V11 applied by Flyway; installed_rank 1-12)");
}

TEST(FlywayHistoryTest, ABaselineCoversTheVersionsBelowIt) {
  std::vector<FlywayRow> rows{Baseline(1, "4")};
  for (FlywayRow& r : Applied(5, 11, 2)) rows.push_back(r);
  auto r = RecogniseQueueBoxHistory(rows);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, 11);
  EXPECT_EQ(r->applied.front(), 5);
  EXPECT_EQ(r->Summary(),
            "QueueBox V1-V11 (Flyway baseline V4; V5-V11 applied by Flyway; installed_rank 1-8)");
}

TEST(FlywayHistoryTest, AnOlderQueueBoxIsAdoptedAtItsLastVersion) {
  auto r = RecogniseQueueBoxHistory(Applied(1, 9));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, 9);
}

TEST(FlywayHistoryTest, SchemaRowsAndEquivalentVersionTextsAreAccepted) {
  std::vector<FlywayRow> rows{
      {0, std::nullopt, "<< Flyway Schema Creation >>", "SCHEMA", "\"public\"", true}};
  for (FlywayRow& r : Applied(1, 6, 1)) rows.push_back(r);
  rows[6].version = "06";
  rows[5].version = "5.0";
  rows[4].script = "db/postgresql/V4__add_last_error.sql";
  auto r = RecogniseQueueBoxHistory(rows);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->version, 6);
  EXPECT_THAT(r->applied, ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(FlywayHistoryTest, AnEmptyHistoryOrABaselineAtZeroAloneIsVersionZero) {
  auto empty = RecogniseQueueBoxHistory({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->version, 0);
  auto zero = RecogniseQueueBoxHistory({Baseline(1, "0")});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->version, 0);
}

TEST(FlywayHistoryTest, AFailedMigrationIsRefusedNamingItsRow) {
  std::vector<FlywayRow> rows = Applied(1, 6);
  rows[5].success = false;
  EXPECT_EQ(Error(rows),
            "flyway_schema_history shows a failed migration (installed_rank 6, version 6, type "
            "SQL, script V6__add_consumption_and_leases.sql, success = false). QueueBox C++ "
            "cannot tell what a failed migration left in the database, so it does not adopt it. "
            "Finish or undo that migration by hand and delete its row (Flyway's `repair` deletes "
            "failed rows), then start QueueBox C++ again. Once the schema matches a QueueBox "
            "version, record that version with `queuebox migrate --baseline <version>` "
            "(docs/schema.md, \"Adopting a database that QueueBox migrated\").");
}

TEST(FlywayHistoryTest, AVersionBeyondV11IsRefused) {
  std::vector<FlywayRow> rows = Applied(1, 11);
  rows.push_back(
      {12, "12", "add outbox partitions", "SQL", "V12__add_outbox_partitions.sql", true});
  EXPECT_THAT(Error(rows),
              HasSubstr("flyway_schema_history shows migration V12 (installed_rank 12, version "
                        "12, type SQL, script V12__add_outbox_partitions.sql), beyond V11, the "
                        "last QueueBox migration this build of QueueBox C++ knows."));
  rows.pop_back();
  rows.push_back(Baseline(12, "15"));
  EXPECT_THAT(Error(rows), HasSubstr("shows migration V15 (installed_rank 12"));
}

TEST(FlywayHistoryTest, MigrationsQueueBoxNeverShippedAreRefused) {
  std::vector<FlywayRow> dotted = Applied(1, 5);
  dotted.push_back({6, "5.1", "tweak", "SQL", "V5_1__tweak.sql", true});
  EXPECT_THAT(Error(dotted),
              HasSubstr("flyway_schema_history shows a migration QueueBox never shipped "
                        "(installed_rank 6, version 5.1, type SQL, script V5_1__tweak.sql): "
                        "version 5.1 is not a whole number. QueueBox's migrations are V1-V11 "
                        "(V1__create_outbox.sql to V11__add_outbox_sequence.sql), so QueueBox C++ "
                        "does not adopt this database"));

  std::vector<FlywayRow> renamed = Applied(1, 5);
  renamed[2].script = "V3__my_columns.sql";
  EXPECT_THAT(Error(renamed), HasSubstr("(installed_rank 3, version 3, type SQL, script "
                                        "V3__my_columns.sql): QueueBox's V3 is "
                                        "V3__add_claimed_at.sql."));

  std::vector<FlywayRow> repeatable = Applied(1, 11);
  repeatable.push_back({12, std::nullopt, "views", "SQL", "R__views.sql", true});
  EXPECT_THAT(Error(repeatable), HasSubstr("a repeatable migration (no version)"));

  std::vector<FlywayRow> java = Applied(1, 11);
  java.push_back({12, "11.5", "backfill", "JDBC", "db.migration.V11_5__Backfill", true});
  EXPECT_THAT(Error(java), HasSubstr("QueueBox ships SQL migrations only, not type JDBC"));
}

TEST(FlywayHistoryTest, AGapInTheAppliedVersionsIsRefused) {
  std::vector<FlywayRow> rows = Applied(1, 5);
  for (FlywayRow& r : Applied(7, 11, 6)) rows.push_back(r);
  EXPECT_THAT(Error(rows),
              HasSubstr("flyway_schema_history shows QueueBox V7 (V7__capture_state.sql) applied "
                        "but not V6 (V6__add_consumption_and_leases.sql)"));
  // `flyway repair` marking a missing migration deleted leaves the same gap.
  std::vector<FlywayRow> deleted = Applied(1, 11);
  deleted.push_back({12, "6", "add consumption and leases", "DELETE",
                     "V6__add_consumption_and_leases.sql", true});
  EXPECT_THAT(Error(deleted), HasSubstr("applied but not V6"));
}

}  // namespace
}  // namespace queuebox::store
