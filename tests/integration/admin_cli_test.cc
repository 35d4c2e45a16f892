// `queuebox status`, `queuebox replay` and `queuebox dead list` as functions over a real store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "admin/cli.h"
#include "integration/admin_test_support.h"

namespace queuebox::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

using CliTest = AdminStoreTest;

TEST_P(CliTest, StatusAsTableAndJson) {
  Row("order.created", "pending", "2024-01-01T00:00:00.000Z");
  Row("order.created", "sent");
  Row("order.created", "dead");
  Row("order.created", "dead");
  Row("user.created", "dead");
  std::ostringstream out, err;
  ASSERT_EQ(
      RunStatusCommand(*store_, store_->replica_membership(), config_, /*json=*/true, out, err), 0)
      << err.str();
  json j = json::parse(out.str());
  EXPECT_EQ(j["rowsByState"]["pending"], 1);
  EXPECT_EQ(j["rowsByState"]["processing"], 0);
  EXPECT_EQ(j["rowsByState"]["sent"], 1);
  EXPECT_EQ(j["rowsByState"]["dead"], 3);
  EXPECT_EQ(j["deadByTopic"]["order.created"], 2);
  EXPECT_EQ(j["deadByTopic"]["user.created"], 1);
  EXPECT_GT(j["oldestPendingAgeSeconds"].get<double>(), 86400.0);

  std::ostringstream table;
  ASSERT_EQ(
      RunStatusCommand(*store_, store_->replica_membership(), config_, /*json=*/false, table, err),
      0);
  EXPECT_THAT(table.str(), HasSubstr("STATE       ROWS\n"));
  EXPECT_THAT(table.str(), HasSubstr("dead        3\n"));
  EXPECT_THAT(table.str(), HasSubstr("Oldest pending age: "));
  EXPECT_THAT(table.str(), HasSubstr("order.created  2\n"));
}

// Key affinity: status lists the live replicas of this outbox in rank order (PostgreSQL only).
TEST_P(CliTest, StatusListsTheLiveReplicasOfThisOutbox) {
  if (GetParam() != "postgresql") {
    std::ostringstream out, err;
    ASSERT_EQ(
        RunStatusCommand(*store_, store_->replica_membership(), config_, /*json=*/true, out, err),
        0)
        << err.str();
    EXPECT_TRUE(json::parse(out.str())["replicas"].empty());
    return;
  }
  db_->Exec(
      "INSERT INTO queuebox_relay_replicas (replica_id, outbox_table, name, started_at, "
      "heartbeat_at, expires_at) VALUES "
      "('00000000-0000-4000-8000-000000000002', 'outbox', 'b:2', clock_timestamp(), "
      "clock_timestamp(), clock_timestamp() + interval '1 hour'), "
      "('00000000-0000-4000-8000-000000000001', 'outbox', 'a:1', clock_timestamp(), "
      "clock_timestamp() - interval '2 seconds', clock_timestamp() + interval '1 hour'), "
      "('00000000-0000-4000-8000-000000000003', 'outbox', 'expired:3', clock_timestamp(), "
      "clock_timestamp(), clock_timestamp() - interval '1 second'), "
      "('00000000-0000-4000-8000-000000000004', 'billing_outbox', 'other:4', clock_timestamp(), "
      "clock_timestamp(), clock_timestamp() + interval '1 hour')");
  std::ostringstream out, err;
  ASSERT_EQ(
      RunStatusCommand(*store_, store_->replica_membership(), config_, /*json=*/true, out, err), 0)
      << err.str();
  json replicas = json::parse(out.str())["replicas"];
  ASSERT_EQ(replicas.size(), 2u) << out.str();
  EXPECT_EQ(replicas[0]["name"], "a:1");
  EXPECT_EQ(replicas[1]["name"], "b:2");
  EXPECT_GE(replicas[0]["heartbeatAgeSeconds"].get<double>(), 2.0);
  std::ostringstream table;
  ASSERT_EQ(
      RunStatusCommand(*store_, store_->replica_membership(), config_, /*json=*/false, table, err),
      0);
  EXPECT_THAT(table.str(), HasSubstr("SHARE  REPLICA"));
  EXPECT_THAT(table.str(), HasSubstr("1      b:2"));
}

// A stopped relay's capture slot keeps WAL: status shows it with what it retains (PostgreSQL).
TEST_P(CliTest, StatusShowsTheCaptureSlotAndTheWalItRetains) {
  config_.outbox.capture.mode = "postgres-logical";
  if (GetParam() != "postgresql") {
    // Capture is PostgreSQL's: on SQLite, status has no capture part even with the mode set.
    std::ostringstream out, err;
    ASSERT_EQ(
        RunStatusCommand(*store_, store_->replica_membership(), config_, /*json=*/true, out, err),
        0)
        << err.str();
    EXPECT_FALSE(json::parse(out.str()).contains("capture")) << out.str();
    EXPECT_EQ(err.str(), "");
    return;
  }
  config_.database = db_->config();
  // Slot names are cluster-wide: one per test database.
  config_.outbox.capture.slot = db_->Query("SELECT current_database()")[0][0];
  config_.outbox.capture.slot_retention_warn_bytes = 4096;
  std::ostringstream out, err;
  ASSERT_EQ(
      RunStatusCommand(*store_, store_->replica_membership(), config_, /*json=*/false, out, err), 0)
      << err.str();
  EXPECT_THAT(out.str(), HasSubstr("Change capture: postgres-logical, identity queuebox (not "
                                   "recorded yet"));
  EXPECT_THAT(out.str(), HasSubstr("does not exist (capture creates it on its first start)"));

  db_->Exec("SELECT pg_create_logical_replication_slot('" + config_.outbox.capture.slot +
            "', 'pgoutput')");
  db_->Exec(
      "INSERT INTO queuebox_capture_state VALUES ('queuebox', "
      "'00000000-0000-4000-8000-000000000001', 'f')");
  db_->Exec(
      "CREATE TABLE filler (s text); INSERT INTO filler SELECT repeat('x', 100) FROM "
      "generate_series(1, 1000)");
  std::ostringstream json_out;
  ASSERT_EQ(RunStatusCommand(*store_, store_->replica_membership(), config_, /*json=*/true,
                             json_out, err),
            0)
      << err.str();
  json capture = json::parse(json_out.str())["capture"];
  EXPECT_EQ(capture["identity"], "queuebox");
  EXPECT_EQ(capture["recorded"], true);
  EXPECT_EQ(capture["slot"]["exists"], true);
  EXPECT_EQ(capture["slot"]["active"], false);
  EXPECT_GT(capture["slot"]["retainedBytes"].get<int64_t>(), 4096);
  EXPECT_EQ(capture["slot"]["overThreshold"], true);
  std::ostringstream table;
  ASSERT_EQ(
      RunStatusCommand(*store_, store_->replica_membership(), config_, /*json=*/false, table, err),
      0);
  EXPECT_THAT(table.str(), HasSubstr("SLOT"));
  EXPECT_THAT(table.str(), HasSubstr("RETAINED WAL"));
  EXPECT_THAT(table.str(), HasSubstr(config_.outbox.capture.slot + "  no"));
  EXPECT_THAT(table.str(), HasSubstr("Warning: the slot retains more WAL than "
                                     "outbox.capture.slotRetentionWarnBytes (4096)"));
}

TEST_P(CliTest, ReplayUsesTheAdminFilters) {
  config_.routes = {{"order.*", "web", std::nullopt, ""}, {"**", "other", std::nullopt, ""}};
  std::string dead = Row("order.created", "dead");
  std::string other = Row("user.created", "dead");
  std::string processing = Row("order.created", "processing");
  std::ostringstream out, err;
  EXPECT_EQ(RunReplayCommand(*store_, config_, ReplayRequest{}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("A replay needs at least one filter."));
  ReplayRequest bad;
  bad.created_after = "yesterday";
  EXPECT_EQ(RunReplayCommand(*store_, config_, bad, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("Invalid request: 'createdAfter'"));

  ReplayRequest by_destination;
  by_destination.destination = "web";
  ASSERT_EQ(RunReplayCommand(*store_, config_, by_destination, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "Moved 1 row(s).\n");
  EXPECT_EQ(db_->Field(dead, "state"), "pending");
  EXPECT_EQ(db_->Field(other, "state"), "dead");
  EXPECT_EQ(db_->Field(processing, "state"), "processing");
}

TEST_P(CliTest, DeadListAsTableAndJson) {
  std::ostringstream empty, err;
  ASSERT_EQ(RunDeadListCommand(*store_, config_, 50, false, empty, err), 0);
  EXPECT_EQ(empty.str(), "No dead rows.\n");
  std::string id = Row("order.created", "dead");
  db_->Exec("UPDATE outbox SET key = 'k-1', last_error = 'HTTP 500\nbody' WHERE id = '" + id + "'");
  std::ostringstream out;
  ASSERT_EQ(RunDeadListCommand(*store_, config_, 50, true, out, err), 0) << err.str();
  json j = json::parse(out.str());
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["id"], id);
  EXPECT_EQ(j[0]["topic"], "order.created");
  EXPECT_EQ(j[0]["key"], "k-1");
  EXPECT_EQ(j[0]["attempt"], 3);
  EXPECT_EQ(j[0]["lastError"], "HTTP 500\nbody");
  EXPECT_FALSE(j[0]["updatedAt"].get<std::string>().empty());
  std::ostringstream table;
  ASSERT_EQ(RunDeadListCommand(*store_, config_, 50, false, table, err), 0);
  EXPECT_THAT(table.str(), HasSubstr("ID"));
  EXPECT_THAT(table.str(), HasSubstr("LAST ERROR"));
  EXPECT_THAT(table.str(), HasSubstr(id));
  EXPECT_THAT(table.str(), HasSubstr("HTTP 500 body"));  // one line per row
  EXPECT_EQ(RunDeadListCommand(*store_, config_, 0, false, table, err), 2);
}

// `queuebox replay --table inbox` and `queuebox dead list --table inbox`: dead inbox rows of one
// source go back to pending (attempt and error cleared); other sources and active rows stay.
TEST_P(CliTest, InboxReplayAndDeadListBySource) {
  InboxStore* inbox = store_->inbox();
  ASSERT_NE(inbox, nullptr);
  auto add = [&](const std::string& source, const std::string& key, const std::string& state) {
    NewInboxMessage m;
    m.source = source;
    m.idempotency_key = key;
    m.aggregate_id = "cus_1";
    m.payload = R"({"k":")" + key + R"("})";
    auto out = inbox->Store(std::span<const NewInboxMessage>(&m, 1));
    EXPECT_TRUE(out.ok() && out->size() == 1u);
    const std::string id = out.ok() ? (*out)[0].id : "";
    db_->Exec("UPDATE inbox SET state = '" + state +
              "', attempt = 2, last_error = 'relay failed' WHERE id = '" + id + "'");
    return id;
  };
  const std::string dead = add("stripe", "evt_1", "dead");
  const std::string other = add("github", "evt_2", "dead");
  const std::string active = add("stripe", "evt_3", "processing");

  std::ostringstream list, err;
  ASSERT_EQ(RunInboxDeadListCommand(*inbox, 50, true, list, err), 0) << err.str();
  json j = json::parse(list.str());
  ASSERT_EQ(j.size(), 2u);

  ReplayRequest request;
  request.table = "inbox";
  request.source = "stripe";
  std::ostringstream out;
  ASSERT_EQ(RunReplayCommand(*store_, config_, request, out, err, inbox), 0) << err.str();
  EXPECT_EQ(out.str(), "Moved 1 inbox row(s).\n");
  EXPECT_EQ(db_->Scalar("SELECT state FROM inbox WHERE id = '" + dead + "'"), "pending");
  EXPECT_EQ(db_->Scalar("SELECT attempt FROM inbox WHERE id = '" + dead + "'"), "0");
  EXPECT_EQ(db_->Scalar("SELECT state FROM inbox WHERE id = '" + other + "'"), "dead");
  EXPECT_EQ(db_->Scalar("SELECT state FROM inbox WHERE id = '" + active + "'"), "processing");

  ReplayRequest no_inbox = request;
  std::ostringstream out2, err2;
  EXPECT_EQ(RunReplayCommand(*store_, config_, no_inbox, out2, err2, nullptr), 1);
  EXPECT_THAT(err2.str(), HasSubstr("no inbox"));
}

INSTANTIATE_TEST_SUITE_P(Dialects, CliTest, ::testing::Values("sqlite", "postgresql"), DialectName);

}  // namespace
}  // namespace queuebox::testing
