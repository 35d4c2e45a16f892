// Adopting a PostgreSQL database that QueueBox migrated: QueueBox's own V1..V11
// statements (tests/testing/queuebox_flyway/) with flyway_schema_history filled as Flyway fills
// it; OutboxStore::Migrate records QueueBox's versions as the baseline, applies only QueueBox
// C++'s later ones, and refuses a history with a failed or unknown migration, changing nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "queuebox/inbox.h"
#include "queuebox/store.h"
#include "store/open_store.h"
#include "testing/env.h"
#include "testing/pg.h"
#include "testing/queuebox_flyway.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using testing::FlywayHistoryRow;
using ::testing::HasSubstr;
using testing::QueueBoxFlywayOptions;
using Rows = std::vector<std::vector<std::string>>;

class FlywayAdoptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    db_ = std::make_unique<testing::TempPgDatabase>(url);
  }

  std::unique_ptr<OutboxStore> Open() {
    DatabaseConfig config;
    config.type = "postgresql";
    config.url = db_->url();
    auto store = OpenStore(config);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Our history as "version:checksum-or-NULL:description" rows.
  Rows History() {
    return db_->Query(
        "SELECT version::text, CASE WHEN checksum IS NULL THEN 'NULL' ELSE 'sum' END, "
        "description FROM queuebox_schema_history AS h ORDER BY h.version");
  }

  bool TableExists(const std::string& table) {
    return db_->Scalar("SELECT count(*) FROM information_schema.tables WHERE table_name = '" +
                       table + "'") == "1";
  }

  // Everything a refused run must leave as it was: the tables, columns and indexes, and the
  // Flyway history.
  std::string Snapshot() {
    return db_->Scalar(
               "SELECT string_agg(table_name || '.' || column_name, ',' ORDER BY table_name, "
               "column_name) FROM information_schema.columns WHERE table_schema = 'public'") +
           "|" +
           db_->Scalar(
               "SELECT string_agg(indexname, ',' ORDER BY indexname) FROM pg_indexes "
               "WHERE schemaname = 'public'") +
           "|" +
           db_->Scalar(
               "SELECT string_agg(installed_rank || ':' || coalesce(version, '-') || ':' "
               "|| success, ',' ORDER BY installed_rank) FROM flyway_schema_history");
  }

  void ExpectRefused(const std::string& message) {
    std::string before = Snapshot();
    auto store = Open();
    ASSERT_NE(store, nullptr);
    auto report = store->Migrate(std::nullopt);
    ASSERT_FALSE(report.ok());
    EXPECT_EQ(report.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_THAT(report.status().message(), HasSubstr(message));
    EXPECT_FALSE(TableExists("queuebox_schema_history"));
    EXPECT_EQ(Snapshot(), before) << "a refused run changes nothing";
  }

  std::unique_ptr<testing::TempPgDatabase> db_;
};

Rows AdoptedHistory(int up_to) {
  const char* ours[] = {"create outbox",     "create inbox",           "add claimed at",
                        "add last error",    "add correlation id",     "add consumption and leases",
                        "capture state",     "add pull claim indexes", "add aggregate type",
                        "add inbox headers", "add outbox sequence"};
  Rows rows;
  for (int v = 1; v <= up_to; ++v) {
    rows.push_back(
        {std::to_string(v), "NULL", std::string(ours[v - 1]) + " (adopted from Flyway)"});
  }
  return rows;
}

TEST_F(FlywayAdoptionTest, ADatabaseQueueBoxMigratedIsAdoptedAndOnlyLaterVersionsApplied) {
  testing::BuildQueueBoxDatabase(*db_);
  const std::string inbox_before = db_->Scalar(
      "SELECT string_agg(column_name || ' ' || data_type, ',' ORDER BY column_name) FROM "
      "information_schema.columns WHERE table_name = 'inbox'");
  ASSERT_EQ(db_->Scalar("SELECT count(*) FROM flyway_schema_history WHERE success"), "11");

  auto store = Open();
  ASSERT_NE(store, nullptr);
  auto report = store->Migrate(std::nullopt);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->adopted_version, 11);
  EXPECT_EQ(report->adopted_flyway,
            std::optional<std::string>(
                "QueueBox V1-V11 (V1-V11 applied by Flyway; installed_rank 1-11)"));
  EXPECT_THAT(report->applied, ElementsAre(12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26));

  Rows history = History();
  ASSERT_EQ(history.size(), 25u);
  EXPECT_EQ(Rows(history.begin(), history.begin() + 11), AdoptedHistory(11));
  EXPECT_EQ(history[11], (std::vector<std::string>{"12", "sum", "add pending due index"}));
  EXPECT_TRUE(store->CheckSchema().ok());
  // QueueBox's tables and its Flyway history stay as QueueBox left them.
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM flyway_schema_history"), "11");
  EXPECT_EQ(
      db_->Scalar("SELECT string_agg(column_name || ' ' || data_type, ',' ORDER BY column_name) "
                  "FROM information_schema.columns WHERE table_name = 'inbox'"),
      inbox_before);
  EXPECT_TRUE(TableExists("queuebox_capture_state"));
  // Our later indexes are there.
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM pg_indexes WHERE indexname IN "
                        "('idx_outbox_pending_due', 'idx_outbox_pending_unkeyed')"),
            "2");

  // The next start finds our history and adopts nothing again.
  auto again = store->Migrate(std::nullopt);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->applied.empty());
  EXPECT_FALSE(again->adopted_flyway.has_value());
}

TEST_F(FlywayAdoptionTest, AnAdoptedDatabaseKeepsQueueBoxsInboxAndTheRelayForwardsItsRows) {
  testing::BuildQueueBoxDatabase(*db_);
  // A message QueueBox received and has not forwarded yet.
  db_->Exec(
      "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers) "
      "VALUES ('stripe', 'evt_1', 'cus_1', 'payment.succeeded', '{\"id\":\"evt_1\"}', "
      "'{\"X-Tenant\":\"acme\"}')");
  auto store = Open();
  ASSERT_TRUE(store->Migrate(std::nullopt).ok());
  InboxStore* inbox = store->inbox();
  ASSERT_NE(inbox, nullptr);
  EXPECT_TRUE(inbox->CheckSchema().ok());
  // QueueBox's dedup holds: the same key is a duplicate.
  NewInboxMessage again;
  again.source = "stripe";
  again.idempotency_key = "evt_1";
  again.payload = "{}";
  auto stored = inbox->Store(std::vector<NewInboxMessage>{again});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ((*stored)[0].kind, InboxStoreOutcome::Kind::kDuplicate);
  auto rows = inbox->ClaimPush(10, 60000);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  std::vector<InboxForward> forward{
      {{(*rows)[0].id, (*rows)[0].claim_token}, "payment.succeeded", "{}", 5}};
  auto done = inbox->Forward(forward);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->size(), 1u);
  EXPECT_EQ(db_->Scalar("SELECT key || ' ' || topic FROM outbox"), "cus_1 payment.succeeded");
}

TEST_F(FlywayAdoptionTest, QueueBoxsBaselineAtZeroIsAdopted) {
  testing::BuildQueueBoxDatabase(*db_, {.baseline = 0});
  auto report = Open()->Migrate(std::nullopt);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->adopted_flyway,
            std::optional<std::string>("QueueBox V1-V11 (Flyway baseline V0; V1-V11 applied by "
                                       "Flyway; installed_rank 1-12)"));
  EXPECT_THAT(report->applied, ElementsAre(12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26));
  Rows history = History();
  ASSERT_EQ(history.size(), 25u);
  EXPECT_EQ(Rows(history.begin(), history.begin() + 11), AdoptedHistory(11));
}

TEST_F(FlywayAdoptionTest, ABaselineRecordedByQueueBoxCoversTheVersionsAppliedByHand) {
  // V1..V4 ran by hand, `queuebox migrate --baseline 4` (QueueBox), then V5..V11 by Flyway.
  testing::BuildQueueBoxDatabase(*db_, {.baseline = 4});
  auto report = Open()->Migrate(std::nullopt);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->adopted_flyway,
            std::optional<std::string>("QueueBox V1-V11 (Flyway baseline V4; V5-V11 applied by "
                                       "Flyway; installed_rank 1-8)"));
  EXPECT_EQ(report->adopted_version, 11);
  EXPECT_THAT(report->applied, ElementsAre(12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26));
}

TEST_F(FlywayAdoptionTest, AnOlderQueueBoxIsAdoptedAtItsVersionAndBroughtUpToDate) {
  // QueueBox before V10/V11: rows carry no sequence yet.
  testing::BuildQueueBoxDatabase(*db_, {.up_to = 9});
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload, created_at) VALUES "
      "('t', 'k', '{\"n\":2}', now() - interval '1 min'), "
      "('t', 'k', '{\"n\":1}', now() - interval '2 min')");
  auto store = Open();
  auto report = store->Migrate(std::nullopt);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->adopted_version, 9);
  EXPECT_THAT(report->applied,
              ElementsAre(10, 11, 12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26));
  Rows history = History();
  ASSERT_EQ(history.size(), 25u);
  EXPECT_EQ(Rows(history.begin(), history.begin() + 9), AdoptedHistory(9));
  // Our V11 numbered QueueBox's rows in created_at order.
  EXPECT_EQ(db_->Scalar("SELECT string_agg(payload->>'n', ',' ORDER BY sequence) FROM outbox"),
            "1,2");
  EXPECT_TRUE(store->CheckSchema().ok());
  // Our V10 added QueueBox's inbox headers column.
  EXPECT_TRUE(store->inbox()->CheckSchema().ok());
}

TEST_F(FlywayAdoptionTest, AFailedFlywayMigrationIsRefused) {
  // A V6 that failed half-way (a database without transactional DDL, or Flyway's
  // executeInTransaction off): Flyway records it with success = false.
  testing::BuildQueueBoxDatabase(*db_, {.up_to = 5});
  db_->Exec("ALTER TABLE outbox ADD COLUMN claim_token UUID");
  testing::AddFlywayRow(*db_, {.version = "6",
                               .description = "add consumption and leases",
                               .script = "V6__add_consumption_and_leases.sql",
                               .checksum = testing::FlywayChecksum(testing::QueueBoxScript(6)),
                               .success = false});
  ExpectRefused(
      "flyway_schema_history shows a failed migration (installed_rank 6, version 6, type SQL, "
      "script V6__add_consumption_and_leases.sql, success = false). QueueBox C++ cannot tell what "
      "a failed migration left in the database, so it does not adopt it.");
}

TEST_F(FlywayAdoptionTest, AMigrationBeyondTheLastQueueBoxVersionKnownIsRefused) {
  testing::BuildQueueBoxDatabase(*db_);
  db_->Exec("CREATE INDEX idx_outbox_created ON outbox (created_at)");
  testing::AddFlywayRow(*db_, {.version = "12",
                               .description = "add outbox created index",
                               .script = "V12__add_outbox_created_index.sql",
                               .checksum = 12345});
  ExpectRefused(
      "flyway_schema_history shows migration V12 (installed_rank 12, version 12, type SQL, "
      "script V12__add_outbox_created_index.sql), beyond V11, the last QueueBox migration this "
      "build of QueueBox C++ knows.");
}

TEST_F(FlywayAdoptionTest, AMigrationQueueBoxNeverShippedIsRefused) {
  testing::BuildQueueBoxDatabase(*db_, {.up_to = 4});
  testing::AddFlywayRow(*db_, {.version = "4.1",
                               .description = "tenant column",
                               .script = "V4_1__tenant_column.sql",
                               .checksum = 99});
  ExpectRefused(
      "flyway_schema_history shows a migration QueueBox never shipped (installed_rank 5, version "
      "4.1, type SQL, script V4_1__tenant_column.sql): version 4.1 is not a whole number.");
}

TEST_F(FlywayAdoptionTest, AnExplicitBaselineOverridesTheFlywayHistory) {
  // The way out of a refusal: the operator checked the schema and records its version.
  testing::BuildQueueBoxDatabase(*db_, {.up_to = 5});
  db_->Exec(testing::QueueBoxScript(6));
  testing::AddFlywayRow(*db_, {.version = "6",
                               .description = "add consumption and leases",
                               .script = "V6__add_consumption_and_leases.sql",
                               .success = false});
  auto report = Open()->Migrate(6);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->adopted_flyway.has_value());
  EXPECT_THAT(report->applied,
              ElementsAre(7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26));
  EXPECT_EQ(db_->Scalar("SELECT description FROM queuebox_schema_history WHERE version = 6"),
            "add consumption and leases");
}

TEST_F(FlywayAdoptionTest, AFlywayHistoryWithoutMigrationsOverAnOutboxIsRefusedAsNoHistory) {
  // QueueBox baselined at 0 and its first migration failed and rolled back; the application's
  // own outbox table is there.
  testing::CreateFlywayHistory(*db_);
  testing::AddFlywayRow(*db_, {.version = "0",
                               .description = "<< Flyway Baseline >>",
                               .type = "BASELINE",
                               .script = "<< Flyway Baseline >>"});
  db_->Exec(testing::QueueBoxScript(1));
  ExpectRefused("QueueBox tables exist without a migration history.");
}

TEST_F(FlywayAdoptionTest, AFlywayHistoryWithoutMigrationsOnAnEmptyDatabaseMigratesFromV1) {
  testing::CreateFlywayHistory(*db_);
  testing::AddFlywayRow(*db_, {.version = "0",
                               .description = "<< Flyway Baseline >>",
                               .type = "BASELINE",
                               .script = "<< Flyway Baseline >>"});
  auto report = Open()->Migrate(std::nullopt);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->adopted_flyway.has_value());
  EXPECT_EQ(report->applied.front(), 1);
}

}  // namespace
}  // namespace queuebox
