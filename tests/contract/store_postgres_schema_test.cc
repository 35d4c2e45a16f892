// The PostgreSQL outbox schema after the bundled migrations is exactly seed 000's table but for
// the id default (V21: time-ordered, still UUID), plus migration history, baseline, refusals,
// mapped names and connection handling.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store_test_support.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Rows = std::vector<std::vector<std::string>>;

class PostgresSchemaTest : public testing::PgStoreTest {
 protected:
  void Migrate() {
    auto report = store_->Migrate(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
  }
};

TEST_F(PostgresSchemaTest, MigratedColumnsAreTheSeedTable) {
  Migrate();
  Rows cols = db_->Query(
      "SELECT column_name, data_type, coalesce(character_maximum_length::text, '-'), "
      "is_nullable, coalesce(column_default, '-') FROM information_schema.columns "
      "WHERE table_name = 'outbox' ORDER BY column_name");
  EXPECT_EQ(cols, (Rows{
                      {"aggregate_type", "character varying", "255", "YES", "-"},
                      {"attempt", "integer", "-", "NO", "0"},
                      {"claim_token", "uuid", "-", "YES", "-"},
                      {"claimed_at", "timestamp with time zone", "-", "YES", "-"},
                      {"created_at", "timestamp with time zone", "-", "NO", "CURRENT_TIMESTAMP"},
                      {"headers", "jsonb", "-", "NO", "'{}'::jsonb"},
                      {"id", "uuid", "-", "NO", "queuebox_uuid_v7()"},
                      {"key", "character varying", "255", "YES", "-"},
                      {"last_error", "text", "-", "YES", "-"},
                      {"lease_expires_at", "timestamp with time zone", "-", "YES", "-"},
                      {"max_attempts", "integer", "-", "NO", "5"},
                      {"payload", "jsonb", "-", "NO", "-"},
                      {"scheduled_at", "timestamp with time zone", "-", "NO", "CURRENT_TIMESTAMP"},
                      {"sequence", "bigint", "-", "NO", "nextval('outbox_sequence_seq'::regclass)"},
                      {"state", "character varying", "50", "NO", "'pending'::character varying"},
                      {"topic", "character varying", "255", "NO", "-"},
                      {"updated_at", "timestamp with time zone", "-", "NO", "CURRENT_TIMESTAMP"},
                  }));
}

TEST_F(PostgresSchemaTest, MigratedIndexesAreTheSeedsPlusTheClaimIndexes) {
  Migrate();
  Rows idx = db_->Query(
      "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'outbox' "
      "ORDER BY indexname");
  const std::string on = " ON public.outbox USING btree ";
  const std::string pending = " WHERE ((state)::text = 'pending'::text)";
  EXPECT_EQ(
      idx,
      (Rows{
          {"idx_outbox_dead_updated", "CREATE INDEX idx_outbox_dead_updated" + on +
                                          "(updated_at, sequence) WHERE ((state)::text = "
                                          "'dead'::text)"},
          {"idx_outbox_inbox_id",
           "CREATE INDEX idx_outbox_inbox_id" + on +
               "(((headers ->> 'x-inbox-id'::text))) WHERE (headers ? 'x-inbox-id'::text)"},
          {"idx_outbox_key_sequence",
           "CREATE INDEX idx_outbox_key_sequence" + on +
               "(key, sequence) WHERE ((state)::text = ANY ((ARRAY['pending'::character varying, "
               "'processing'::character varying])::text[]))"},
          {"idx_outbox_pending_created",
           "CREATE INDEX idx_outbox_pending_created" + on + "(created_at)" + pending},
          {"idx_outbox_pending_due",
           "CREATE INDEX idx_outbox_pending_due" + on + "(scheduled_at, sequence)" + pending},
          {"idx_outbox_pending_scheduled",
           "CREATE INDEX idx_outbox_pending_scheduled" + on + "(state, scheduled_at)" + pending},
          {"idx_outbox_pending_unkeyed",
           "CREATE INDEX idx_outbox_pending_unkeyed" + on +
               "(scheduled_at, sequence) WHERE (((state)::text = 'pending'::text) AND ((key IS "
               "NULL) OR ((key)::text = ''::text)))"},
          {"idx_outbox_processing_claimed",
           "CREATE INDEX idx_outbox_processing_claimed" + on +
               "(claimed_at) WHERE ((state)::text = 'processing'::text)"},
          {"idx_outbox_sent_updated", "CREATE INDEX idx_outbox_sent_updated" + on +
                                          "(updated_at) WHERE ((state)::text = 'sent'::text)"},
          {"idx_outbox_topic", "CREATE INDEX idx_outbox_topic" + on + "(topic)"},
          {"outbox_pkey", "CREATE UNIQUE INDEX outbox_pkey" + on + "(id)"},
      }));
  EXPECT_EQ(db_->Scalar("SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                        "WHERE conrelid = 'outbox'::regclass AND contype = 'p'"),
            "PRIMARY KEY (id)");
}

TEST_F(PostgresSchemaTest, TheSequenceIsBigintAndOwnedByTheColumn) {
  Migrate();
  EXPECT_EQ(db_->Scalar("SELECT data_type FROM pg_sequences "
                        "WHERE sequencename = 'outbox_sequence_seq'"),
            "bigint");
  EXPECT_EQ(db_->Scalar("SELECT pg_get_serial_sequence('outbox', 'sequence')"),
            "public.outbox_sequence_seq");
}

TEST_F(PostgresSchemaTest, AnInsertNeedsOnlyTopicAndPayloadAndAnExplicitNullHeadersFails) {
  Migrate();
  db_->Exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{\"a\":1}')");
  EXPECT_EQ(db_->Scalar("SELECT headers::text || state || attempt || max_attempts FROM outbox"),
            "{}pending05");
  NewOutboxRow row;
  row.topic = "t";
  row.payload = "{}";
  row.headers = "null";  // JSON null is not an SQL NULL: the column takes it
  EXPECT_TRUE(store_->Insert(row).ok());
  // The seed: an explicit SQL NULL fails the insert.
  auto conn = PQconnectdb(db_->config().url.c_str());
  PGresult* r =
      PQexec(conn, "INSERT INTO outbox (topic, payload, headers) VALUES ('t', '{}', NULL)");
  EXPECT_EQ(PQresultStatus(r), PGRES_FATAL_ERROR);
  EXPECT_STREQ(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23502");  // not_null_violation
  PQclear(r);
  PQfinish(conn);
}

// V21: an insert without an id gets a UUID version 7 whose first 48 bits are the insert time in
// Unix milliseconds, so later rows get higher ids; an id the application writes is kept as is.
TEST_F(PostgresSchemaTest, NewRowsTakeTimeOrderedIdsAndAnApplicationIdIsKept) {
  Migrate();
  NewOutboxRow row;
  row.topic = "t";
  row.payload = "{}";
  auto first = store_->Insert(row);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  db_->Exec("SELECT pg_sleep(0.005)");  // the next row falls in a later millisecond
  db_->Exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{}')");
  std::string second = db_->Scalar("SELECT id::text FROM outbox WHERE id <> '" + *first + "'");
  const std::string ms = "('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint";
  for (const std::string& id : {*first, second}) {
    // Version 7, RFC 4122 variant.
    EXPECT_THAT(id,
                ::testing::MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                                        "[0-9a-f]{12}"));
    // The time prefix lies between the insert's transaction start and now.
    EXPECT_EQ(db_->Scalar("SELECT " + ms +
                          " BETWEEN floor(extract(epoch FROM created_at) * 1000) "
                          "AND floor(extract(epoch FROM clock_timestamp()) * 1000) FROM outbox "
                          "WHERE id = '" +
                          id + "'"),
              "t");
  }
  EXPECT_EQ(db_->Scalar("SELECT (SELECT " + ms + " FROM outbox WHERE id = '" + second +
                        "') > (SELECT " + ms + " FROM outbox WHERE id = '" + *first + "')"),
            "t");
  EXPECT_LT(*first, second);
  // An application id (version 4 here) is stored and returned unchanged.
  row.id = "5b0e3f63-9c1d-4a8e-9f3b-2c7d1e6a4b50";
  auto mine = store_->Insert(row);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(*mine, *row.id);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE id = '" + *row.id + "'"), "1");
}

// V21: the application's role, which inserts rows without an id, may call the id default also
// where the DBA revoked EXECUTE on new functions from PUBLIC (gen_random_uuid(), the default
// before, is PUBLIC's in pg_catalog). Found by review: the insert failed with "permission denied
// for function queuebox_uuid_v7".
TEST_F(PostgresSchemaTest, AnApplicationRoleCanInsertWithTheIdDefault) {
  const std::string role = "qb_schema_test_app_" + std::to_string(getpid());
  db_->Exec("DROP ROLE IF EXISTS " + role);
  db_->Exec("CREATE ROLE " + role);
  db_->Exec("ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC");
  Migrate();
  db_->Exec("GRANT INSERT, SELECT ON outbox TO " + role + "; GRANT USAGE ON SEQUENCE " +
            "outbox_sequence_seq TO " + role);
  auto conn = PQconnectdb(db_->config().url.c_str());
  PGresult* r = PQexec(
      conn,
      ("SET ROLE " + role + "; INSERT INTO outbox (topic, payload) VALUES ('t', '{}')").c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(conn);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "1");
  db_->Exec("DROP OWNED BY " + role + "; DROP ROLE " + role);
}

TEST_F(PostgresSchemaTest, MigrateRecordsEveryVersionAndASecondRunAppliesNothing) {
  auto first = store_->Migrate(std::nullopt);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_THAT(first->applied, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 18,
                                          19, 20, 21, 22, 23, 24, 25, 26));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM queuebox_schema_history WHERE checksum IS NOT NULL"),
            "25");
  EXPECT_EQ(db_->Scalar("SELECT description FROM queuebox_schema_history WHERE version = 11"),
            "add outbox sequence");
  auto second = store_->Migrate(std::nullopt);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->applied.empty());
  EXPECT_TRUE(store_->CheckSchema().ok());
}

TEST_F(PostgresSchemaTest, OutboxTablesWithoutHistoryAreRefused) {
  db_->Exec("CREATE TABLE outbox (id UUID PRIMARY KEY, topic VARCHAR(255) NOT NULL)");
  auto report = store_->Migrate(std::nullopt);
  EXPECT_EQ(report.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      report.status().message(),
      HasSubstr("QueueBox tables exist without a migration history. Run `queuebox "
                "migrate --baseline <version>` with the last version you applied by hand."));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM information_schema.tables "
                        "WHERE table_name = 'queuebox_schema_history'"),
            "0");
}

TEST_F(PostgresSchemaTest, BaselineRecordsEarlierVersionsThenAppliesTheLaterOnes) {
  // A table as QueueBox V4 left it, applied by hand; rows without a sequence yet.
  db_->Exec(
      "CREATE TABLE outbox (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), topic VARCHAR(255) NOT "
      "NULL, key VARCHAR(255), payload JSONB NOT NULL, headers JSONB NOT NULL DEFAULT '{}', state "
      "VARCHAR(50) NOT NULL DEFAULT 'pending', attempt INTEGER NOT NULL DEFAULT 0, max_attempts "
      "INTEGER NOT NULL DEFAULT 5, scheduled_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT "
      "CURRENT_TIMESTAMP, created_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP, "
      "updated_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP, claimed_at "
      "TIMESTAMPTZ, last_error TEXT);"
      "INSERT INTO outbox (topic, payload, created_at) VALUES ('t', '{}', now() - interval '2 "
      "min'), ('t', '{}', now() - interval '1 min');");
  auto report = store_->Migrate(4);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_THAT(report->applied, ElementsAre(5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 18, 19, 20,
                                           21, 22, 23, 24, 25, 26));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM queuebox_schema_history WHERE checksum IS NULL"),
            "4");
  // V11 numbered the existing rows in created_at order; new rows follow.
  EXPECT_EQ(db_->Scalar("SELECT string_agg(sequence::text, ',' ORDER BY created_at) FROM outbox"),
            "1,2");
  NewOutboxRow row;
  row.topic = "t";
  row.payload = "{}";
  auto id = store_->Insert(row);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(db_->Scalar("SELECT sequence FROM outbox WHERE id = '" + *id + "'"), "3");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM information_schema.columns "
                        "WHERE table_name = 'outbox'"),
            "17");
}

TEST_F(PostgresSchemaTest, ABaselineOverAnExistingHistoryIsRefusedAndChangesNothing) {
  Migrate();
  std::string before = db_->Scalar(
      "SELECT string_agg(version || ':' || coalesce(checksum::text, "
      "'-'), ',' ORDER BY version) FROM queuebox_schema_history");
  auto report = store_->Migrate(5);
  EXPECT_EQ(report.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(db_->Scalar("SELECT string_agg(version || ':' || coalesce(checksum::text, '-'), ',' "
                        "ORDER BY version) FROM queuebox_schema_history"),
            before);
}

TEST_F(PostgresSchemaTest, MigrateRefusesARenamedTableOrColumn) {
  DatabaseConfig config = db_->config();
  config.outbox_table = "events";
  config.columns.key = "aggregate_id";
  auto store = OpenStore(config);
  ASSERT_TRUE(store.ok());
  auto report = (*store)->Migrate(std::nullopt);
  EXPECT_EQ(report.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(report.status().message(),
              HasSubstr("The bundled migrations create the default schema, so they cannot create "
                        "the one set by database.outboxTableName and "
                        "database.columnMapping.outbox.key. Set 'database.migrate' to "
                        "false and apply your own schema"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM information_schema.tables "
                        "WHERE table_schema = 'public'"),
            "0");
}

TEST_F(PostgresSchemaTest, AMappedTableAndColumnsWorkEndToEnd) {
  db_->Exec(
      "CREATE TABLE \"Events\" (event_id UUID PRIMARY KEY DEFAULT gen_random_uuid(), subject "
      "VARCHAR(255) NOT NULL, \"partition\" VARCHAR(255), body JSONB NOT NULL, meta JSONB NOT NULL "
      "DEFAULT '{}', kind VARCHAR(255), status VARCHAR(50) NOT NULL DEFAULT 'pending', tries INT "
      "NOT NULL DEFAULT 0, max_tries INT NOT NULL DEFAULT 5, due_at TIMESTAMPTZ NOT NULL DEFAULT "
      "now(), created TIMESTAMPTZ NOT NULL DEFAULT now(), updated TIMESTAMPTZ NOT NULL DEFAULT "
      "now(), claimed TIMESTAMPTZ, token UUID, lease_until TIMESTAMPTZ, error TEXT, seq BIGINT "
      "GENERATED BY DEFAULT AS IDENTITY)");
  DatabaseConfig config = db_->config();
  config.outbox_table = "Events";
  OutboxColumns& c = config.columns;
  c.id = "event_id";
  c.topic = "subject";
  c.key = "partition";
  c.payload = "body";
  c.headers = "meta";
  c.aggregate_type = "kind";
  c.state = "status";
  c.attempt = "tries";
  c.max_attempts = "max_tries";
  c.scheduled_at = "due_at";
  c.created_at = "created";
  c.updated_at = "updated";
  c.claimed_at = "claimed";
  c.claim_token = "token";
  c.lease_expires_at = "lease_until";
  c.last_error = "error";
  c.sequence = "seq";
  EXPECT_FALSE(c.IsDefault());
  auto opened = OpenStore(config);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  OutboxStore& store = **opened;
  EXPECT_TRUE(store.CheckSchema().ok());
  NewOutboxRow row;
  row.topic = "orders.created";
  row.key = "k1";
  row.payload = "{}";
  auto a = store.Insert(row);
  auto b = store.Insert(row);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString();
  auto claimed = store.Claim(10, 60000);
  ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
  ASSERT_EQ(claimed->size(), 1u);
  EXPECT_EQ((*claimed)[0].id, *a);
  std::vector<Fence> fences{{(*claimed)[0].id, (*claimed)[0].claim_token}};
  auto sent = store.MarkSent(fences);
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_THAT(*sent, ElementsAre(*a));
  EXPECT_EQ(db_->Scalar("SELECT status FROM \"Events\" WHERE event_id = '" + *a + "'"), "sent");
  auto next = store.Claim(10, 60000);
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ((*next)[0].id, *b);
  auto stats = store.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->rows_by_state["sent"], 1);
}

// A jsonb (or json) payload column holds only JSON: once the schema guard has read its type,
// claimed rows say so and destinations skip their own check of the payload. A text column does
// not: its rows are checked, and one that is not JSON goes dead (row_checks_test.cc).
TEST_F(PostgresSchemaTest, ClaimedRowsSayTheirPayloadIsJsonOnlyWhenTheColumnHoldsJson) {
  Migrate();
  NewOutboxRow row;
  row.topic = "orders.created";
  row.payload = R"({"a":1})";
  ASSERT_TRUE(store_->Insert(row).ok());
  auto before = store_->Claim(10, 60000);  // the guard has not run: nothing is assumed
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_EQ(before->size(), 1u);
  EXPECT_FALSE((*before)[0].payload_is_json);
  ASSERT_TRUE(store_->CheckSchema().ok());
  ASSERT_TRUE(store_->Insert(row).ok());
  auto after = store_->Claim(10, 60000);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(after->size(), 1u);
  EXPECT_TRUE((*after)[0].payload_is_json);

  db_->Exec(
      "CREATE TABLE text_outbox (id UUID PRIMARY KEY DEFAULT gen_random_uuid(), topic "
      "VARCHAR(255) NOT NULL, key VARCHAR(255), payload TEXT NOT NULL, headers JSONB NOT NULL "
      "DEFAULT '{}', aggregate_type VARCHAR(255), state VARCHAR(50) NOT NULL DEFAULT 'pending', "
      "attempt INT NOT NULL DEFAULT 0, max_attempts INT NOT NULL DEFAULT 5, scheduled_at "
      "TIMESTAMPTZ NOT NULL DEFAULT now(), created_at TIMESTAMPTZ NOT NULL DEFAULT now(), "
      "updated_at TIMESTAMPTZ NOT NULL DEFAULT now(), claimed_at TIMESTAMPTZ, claim_token UUID, "
      "lease_expires_at TIMESTAMPTZ, last_error TEXT, sequence BIGINT GENERATED BY DEFAULT AS "
      "IDENTITY)");
  db_->Exec("INSERT INTO text_outbox (topic, payload) VALUES ('orders.created', 'not json')");
  DatabaseConfig config = db_->config();
  config.outbox_table = "text_outbox";
  auto opened = OpenStore(config);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_TRUE((*opened)->CheckSchema().ok());
  auto text = (*opened)->Claim(10, 60000);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ASSERT_EQ(text->size(), 1u);
  EXPECT_EQ((*text)[0].payload, "not json");
  EXPECT_FALSE((*text)[0].payload_is_json);
}

TEST_F(PostgresSchemaTest, TheSchemaGuardNamesAMissingSequenceColumnAndTheAlterToAddIt) {
  db_->Exec("CREATE TABLE outbox (id UUID PRIMARY KEY, topic VARCHAR(255) NOT NULL)");
  Status s = store_->CheckSchema();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("'sequence'"));
  EXPECT_THAT(s.message(),
              ::testing::EndsWith("start QueueBox again: ALTER TABLE \"outbox\" ADD COLUMN "
                                  "\"sequence\" BIGINT GENERATED BY DEFAULT AS IDENTITY;"));
}

TEST_F(PostgresSchemaTest, ABadIdentifierIsRejected) {
  DatabaseConfig config = db_->config();
  config.outbox_table = "outbox\"; DROP TABLE x; --";
  auto store = OpenStore(config);
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("database.outboxTableName"));
  config.outbox_table = "1outbox";
  EXPECT_EQ(OpenStore(config).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(PostgresSchemaTest, AJdbcUrlConnects) {
  // postgresql://user@host:port/db -> jdbc:postgresql://host:port/db?user=user
  std::string url = db_->config().url;
  std::string rest = url.substr(url.find("://") + 3);
  std::string user = rest.substr(0, rest.find('@'));
  std::string host_db = rest.substr(rest.find('@') + 1);
  DatabaseConfig config = db_->config();
  config.url = "jdbc:postgresql://" + host_db + "?user=" + user + "&ApplicationName=qb-test";
  auto store = OpenStore(config);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Status ping = (*store)->Ping();
  EXPECT_TRUE(ping.ok()) << ping.ToString();
  config.url = "jdbc:postgresql://" + host_db + "?tcpKeepAlive=true";
  EXPECT_THAT(OpenStore(config).status().message(), HasSubstr("tcpKeepAlive"));
}

TEST_F(PostgresSchemaTest, AnUnreachableServerIsUnavailableAndThePasswordStaysSecret) {
  DatabaseConfig config;
  config.type = "postgresql";
  config.url = "postgresql://queuebox@127.0.0.1:1/app";
  config.password = "s3cret-pw";
  config.connection_timeout_ms = 2000;
  auto store = OpenStore(config);
  ASSERT_TRUE(store.ok());
  Status s = (*store)->Ping();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), Not(HasSubstr("s3cret-pw")));
}

TEST_F(PostgresSchemaTest, ABrokenConnectionIsReplacedOnTheNextCall) {
  Migrate();
  DatabaseConfig config = db_->config();
  config.pool_size = 1;
  config.url += (config.url.find('?') == std::string::npos ? "?" : "&");
  config.url += "application_name=qb_broken";
  auto opened = OpenStore(config);
  ASSERT_TRUE(opened.ok());
  OutboxStore& store = **opened;
  ASSERT_TRUE(store.Ping().ok());
  ASSERT_EQ(db_->Scalar("SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 10000) FROM "
                        "pg_stat_activity WHERE datname = current_database() AND pid <> "
                        "pg_backend_pid() AND application_name = 'qb_broken') t"),
            "1");
  Status lost = store.Ping();
  EXPECT_EQ(lost.code(), StatusCode::kUnavailable) << lost.ToString();
  Status again = store.Ping();
  EXPECT_TRUE(again.ok()) << again.ToString();
}

}  // namespace
}  // namespace queuebox
