// The inbox schema after the bundled migrations: on PostgreSQL exactly QueueBox's final inbox
// (reference §3.3: columns, types, defaults, the unique (source, idempotency_key), the nine
// indexes) plus our relay indexes (V19, V20); on both dialects, a database migrated while V2-V10
// were placeholders is accepted and gets the whole inbox from V18.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store_test_support.h"
#include "testing/status_matchers.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::StatusIs;
using Rows = std::vector<std::vector<std::string>>;

class InboxSchemaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string pg_url;
    if (GetParam() == "postgresql") QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
    db_ = std::make_unique<testing::StoreDb>(GetParam());
    db_->Create(pg_url);
    store_ = db_->Open();
    ASSERT_NE(store_, nullptr);
  }

  Result<MigrateReport> Migrate() { return store_->Migrate(std::nullopt); }

  // The database as the release before the inbox left it: V2..V10 applied with their earlier
  // text (the placeholders; V3 and V6 without their inbox part), no inbox table, no V18/V19.
  void RewindToThePlaceholders() {
    ASSERT_TRUE(Migrate().ok());
    db_->Exec("DROP TABLE inbox");
    db_->Exec("DELETE FROM queuebox_schema_history WHERE version IN (18, 19)");
    if (db_->pg()) {
      db_->Exec(
          "UPDATE queuebox_schema_history SET checksum = CASE version WHEN 2 THEN -1913712939 "
          "WHEN 3 THEN 2008463858 WHEN 5 THEN -1185798742 WHEN 6 THEN 1705602405 WHEN 8 THEN "
          "-1669315349 WHEN 10 THEN -1696740570 ELSE checksum END");
    } else {
      db_->Exec("UPDATE queuebox_schema_history SET checksum = -1913712939 WHERE version = 2");
    }
  }

  std::unique_ptr<testing::StoreDb> db_;
  std::unique_ptr<OutboxStore> store_;
};

TEST_P(InboxSchemaTest, ADatabaseMigratedWithThePlaceholdersIsAcceptedAndGetsTheInboxFromV18) {
  RewindToThePlaceholders();
  EXPECT_THAT(store_->inbox()->CheckSchema(), StatusIs(StatusCode::kNotFound));
  auto report = Migrate();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_THAT(report->applied, ElementsAre(18, 19));
  EXPECT_TRUE(store_->inbox()->CheckSchema().ok());
  NewInboxMessage m;
  m.source = "stripe";
  m.idempotency_key = "evt_1";
  m.payload = "{}";
  auto stored = store_->inbox()->Store(std::vector<NewInboxMessage>{m, m});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ((*stored)[0].kind, InboxStoreOutcome::Kind::kStored);
  EXPECT_EQ((*stored)[1].kind, InboxStoreOutcome::Kind::kDuplicate);
  // The history keeps the checksums that were applied; the next run applies nothing.
  auto again = Migrate();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->applied.empty());
}

TEST_P(InboxSchemaTest, AnyOtherChangedChecksumIsStillRefused) {
  ASSERT_TRUE(Migrate().ok());
  db_->Exec("UPDATE queuebox_schema_history SET checksum = 12345 WHERE version = 2");
  EXPECT_THAT(Migrate(), StatusIs(StatusCode::kFailedPrecondition,
                                  HasSubstr("Migration V2 (create inbox) changed after it was "
                                            "applied")));
}

TEST_P(InboxSchemaTest, TheInboxHasTheNineIndexesAndTheRelayIndex) {
  ASSERT_TRUE(Migrate().ok());
  std::string sql = db_->pg() ? "SELECT indexname FROM pg_indexes WHERE tablename = 'inbox' "
                                "ORDER BY indexname"
                              : "SELECT name FROM sqlite_master WHERE type = 'index' AND "
                                "tbl_name = 'inbox' AND name LIKE 'idx_%' ORDER BY name";
  std::vector<std::string> names;
  for (const auto& r : db_->Query(sql)) names.push_back(r[0]);
  std::vector<std::string> want = {"idx_inbox_aggregate_state", "idx_inbox_consumption_pending",
                                   "idx_inbox_pending",         "idx_inbox_processing_claimed",
                                   "idx_inbox_pull_busy",       "idx_inbox_pull_pending",
                                   "idx_inbox_push_due",        "idx_inbox_push_head",
                                   "idx_inbox_source",          "idx_inbox_state_created"};
  if (db_->pg()) {
    want.push_back("inbox_pkey");
    want.push_back("uq_inbox_source_idempotency");
    std::sort(want.begin(), want.end());
  }
  EXPECT_EQ(names, want);
}

INSTANTIATE_TEST_SUITE_P(Dialects, InboxSchemaTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });

class PostgresInboxSchemaTest : public testing::MigratedPgStoreTest {};

TEST_F(PostgresInboxSchemaTest, MigratedColumnsAreQueueBoxsInbox) {
  Rows cols = db_->Query(
      "SELECT column_name, data_type, coalesce(character_maximum_length::text, '-'), "
      "is_nullable, coalesce(column_default, '-') FROM information_schema.columns "
      "WHERE table_name = 'inbox' ORDER BY column_name");
  EXPECT_EQ(cols, (Rows{
                      {"aggregate_id", "character varying", "255", "YES", "-"},
                      {"attempt", "integer", "-", "NO", "0"},
                      {"claim_token", "uuid", "-", "YES", "-"},
                      {"claimed_at", "timestamp with time zone", "-", "YES", "-"},
                      {"consumption", "character varying", "4", "NO", "'push'::character varying"},
                      {"correlation_id", "character varying", "128", "YES", "-"},
                      {"created_at", "timestamp with time zone", "-", "NO", "CURRENT_TIMESTAMP"},
                      {"event_type", "character varying", "255", "YES", "-"},
                      {"headers", "jsonb", "-", "NO", "'{}'::jsonb"},
                      {"id", "uuid", "-", "NO", "gen_random_uuid()"},
                      {"idempotency_key", "character varying", "255", "NO", "-"},
                      {"last_error", "text", "-", "YES", "-"},
                      {"lease_expires_at", "timestamp with time zone", "-", "YES", "-"},
                      {"payload", "jsonb", "-", "NO", "-"},
                      {"processed_at", "timestamp with time zone", "-", "YES", "-"},
                      {"scheduled_at", "timestamp with time zone", "-", "NO", "CURRENT_TIMESTAMP"},
                      {"source", "character varying", "255", "NO", "-"},
                      {"state", "character varying", "50", "NO", "'pending'::character varying"},
                  }));
  EXPECT_EQ(db_->Scalar("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = "
                        "'uq_inbox_source_idempotency'"),
            "UNIQUE (source, idempotency_key)");
  EXPECT_THAT(db_->Scalar("SELECT string_agg(pg_get_constraintdef(oid), ',') FROM pg_constraint "
                          "WHERE conrelid = 'inbox'::regclass AND contype = 'c'"),
              HasSubstr("'push'::character varying, 'pull'::character varying"));
}

TEST_F(PostgresInboxSchemaTest, TheIndexesAreQueueBoxsDefinitions) {
  Rows idx = db_->Query(
      "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'inbox' ORDER BY indexname");
  const std::string on = " ON public.inbox USING btree ";
  const std::string pull = "((consumption)::text = 'pull'::text)";
  EXPECT_EQ(
      idx,
      (Rows{
          {"idx_inbox_aggregate_state",
           "CREATE INDEX idx_inbox_aggregate_state" + on + "(aggregate_id, state)"},
          {"idx_inbox_consumption_pending", "CREATE INDEX idx_inbox_consumption_pending" + on +
                                                "(consumption, state, scheduled_at)"},
          {"idx_inbox_pending", "CREATE INDEX idx_inbox_pending" + on +
                                    "(state) WHERE ((state)::text = 'pending'::text)"},
          {"idx_inbox_processing_claimed",
           "CREATE INDEX idx_inbox_processing_claimed" + on +
               "(claimed_at) WHERE ((state)::text = 'processing'::text)"},
          {"idx_inbox_pull_busy", "CREATE INDEX idx_inbox_pull_busy" + on +
                                      "(source, aggregate_id, lease_expires_at) WHERE (" + pull +
                                      " AND ((state)::text = 'processing'::text))"},
          {"idx_inbox_pull_pending", "CREATE INDEX idx_inbox_pull_pending" + on +
                                         "(source, scheduled_at, created_at, id) WHERE (" + pull +
                                         " AND ((state)::text = 'pending'::text))"},
          {"idx_inbox_push_due", "CREATE INDEX idx_inbox_push_due" + on +
                                     "(scheduled_at, created_at, id) WHERE "
                                     "(((consumption)::text = 'push'::text) AND ((state)::text = "
                                     "'pending'::text))"},
          {"idx_inbox_push_head", "CREATE INDEX idx_inbox_push_head" + on +
                                      "(aggregate_id, scheduled_at, created_at, id) WHERE "
                                      "(((consumption)::text = 'push'::text) AND ((state)::text = "
                                      "'pending'::text))"},
          {"idx_inbox_source", "CREATE INDEX idx_inbox_source" + on + "(source)"},
          {"idx_inbox_state_created",
           "CREATE INDEX idx_inbox_state_created" + on + "(state, created_at)"},
          {"inbox_pkey", "CREATE UNIQUE INDEX inbox_pkey" + on + "(id)"},
          {"uq_inbox_source_idempotency",
           "CREATE UNIQUE INDEX uq_inbox_source_idempotency" + on + "(source, idempotency_key)"},
      }));
}

TEST_F(PostgresInboxSchemaTest, ABaselinePastV2WithoutAnInboxGetsTheInboxFromV18) {
  // An outbox made by hand up to QueueBox V4 by a QueueBox C++ user: no inbox. V5-V10 change
  // the inbox only where it exists; V18 creates it.
  testing::StoreDb fresh("postgresql");
  fresh.Create(pg_url_);
  fresh.Exec(
      "CREATE TABLE outbox (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), topic VARCHAR(255) NOT "
      "NULL, key VARCHAR(255), payload JSONB NOT NULL, headers JSONB NOT NULL DEFAULT '{}', state "
      "VARCHAR(50) NOT NULL DEFAULT 'pending', attempt INTEGER NOT NULL DEFAULT 0, max_attempts "
      "INTEGER NOT NULL DEFAULT 5, scheduled_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP, "
      "created_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP, updated_at TIMESTAMPTZ NOT NULL "
      "DEFAULT CURRENT_TIMESTAMP, claimed_at TIMESTAMPTZ, last_error TEXT)");
  auto store = fresh.Open();
  auto report = store->Migrate(4);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(store->inbox()->CheckSchema().ok());
  EXPECT_EQ(fresh.Scalar("SELECT count(*) FROM information_schema.columns WHERE table_name = "
                         "'inbox'"),
            "18");
}

}  // namespace
}  // namespace queuebox
