// End to end (issue 13 item 5): the queuebox binary starts on a PostgreSQL database that QueueBox
// migrated with Flyway (QueueBox's V1..V11 statements, flyway_schema_history as Flyway fills it)
// and that QueueBox left with claimed rows whose leases have expired: no manual step, it adopts
// the history, applies only its later migrations, reclaims the rows and delivers every row in
// key order to a real HTTP receiver. A history it cannot adopt stops the start with the reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"
#include "testing/queuebox_flyway.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using testing::HttpReceiver;
using ::testing::Not;
using testing::TempDir;
using testing::TempPgDatabase;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);

class FlywayAdoptionE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    pg_ = std::make_unique<TempPgDatabase>(url);
    ASSERT_TRUE(receiver_.Start().ok());
    dir_.Write("q.yml", "database:\n  type: postgresql\n  url: " + pg_->url() +
                            "\n  startupTimeoutMs: 20000\n"
                            "server:\n  address: 127.0.0.1\n  httpPort: " +
                            std::to_string(testing::UnusedLoopbackPort()) +
                            "\noutbox:\n  pollIntervalMs: 50\n  batchSize: 10\n  concurrency: 4\n"
                            "  claimTimeoutMs: 5000\n"
                            "routes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
                            "destinations:\n  receiver:\n    type: http\n    baseUrl: " +
                            receiver_.BaseUrl() +
                            "\n    path: /events\nlogging:\n  format: text\n  level: info\n");
  }

  int RunBinary(const std::vector<std::string>& command, std::string* out) {
    std::vector<std::string> args{"--config", dir_.File("q.yml")};
    args.insert(args.end(), command.begin(), command.end());
    return testing::RunCommand(kBinary, args, {}, out, 120s);
  }

  std::unique_ptr<TempPgDatabase> pg_;
  HttpReceiver receiver_;
  TempDir dir_;
};

TEST_F(FlywayAdoptionE2ETest, StartsOnAQueueBoxDatabaseAndDeliversItsClaimedRowsInKeyOrder) {
  testing::BuildQueueBoxDatabase(*pg_);
  // What QueueBox left behind when it stopped: per key, rows already sent, the key's head claimed
  // by a replica that is gone (lease expired five minutes ago), and the rows behind it pending;
  // unkeyed rows too, one of them claimed.
  pg_->Exec(
      "INSERT INTO outbox (topic, key, payload, created_at) "
      "SELECT 'order.' || k, 'cust-' || k, jsonb_build_object('key', k, 'n', n), "
      "       now() - interval '1 hour' + make_interval(secs => n * 10 + k) "
      "FROM generate_series(1, 3) AS k, generate_series(1, 5) AS n "
      "ORDER BY n, k;"
      "INSERT INTO outbox (topic, payload) VALUES ('audit.login', '{\"n\":1}'), "
      "('audit.login', '{\"n\":2}');"
      // key 1: n=1 sent, n=2 claimed; key 2: n=1 claimed; key 3: n=1,2 sent, n=3 claimed.
      "UPDATE outbox SET state = 'sent' WHERE (key = 'cust-1' AND payload->>'n' = '1') OR "
      "(key = 'cust-3' AND (payload->>'n')::int <= 2);"
      "UPDATE outbox SET state = 'processing', claim_token = gen_random_uuid(), "
      "claimed_at = now() - interval '10 minutes', "
      "lease_expires_at = now() - interval '5 minutes' "
      "WHERE (key = 'cust-1' AND payload->>'n' = '2') OR (key = 'cust-2' AND payload->>'n' = "
      "'1') OR (key = 'cust-3' AND payload->>'n' = '3') OR "
      "(key IS NULL AND payload->>'n' = '1');");
  ASSERT_EQ(pg_->Scalar("SELECT count(*) FROM outbox WHERE state = 'processing'"), "4");
  std::map<std::string, std::pair<std::string, int64_t>> expected;  // id -> (key, sequence)
  for (const auto& r :
       pg_->Query("SELECT id, coalesce(key, ''), sequence FROM outbox WHERE state <> 'sent'")) {
    expected[r[0]] = {r[1], std::stoll(r[2])};
  }
  ASSERT_EQ(expected.size(), 14u);

  std::string out;
  ASSERT_EQ(RunBinary({"run", "--until-idle"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("Adopted the migration history QueueBox recorded in "
                             "flyway_schema_history: QueueBox V1-V11 (V1-V11 applied by Flyway; "
                             "installed_rank 1-11); recorded as baseline V11 in "
                             "queuebox_schema_history."));
  EXPECT_THAT(
      out,
      HasSubstr("Applied 14 migration(s): V12, V13, V14, V16, V17, V18, V19, V20, V21, V22, V23, "
                "V24, V25, V26."));
  EXPECT_THAT(out, Not(HasSubstr("--baseline")));

  // Every row QueueBox had not sent arrived exactly once, each key in insert order.
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM outbox WHERE state <> 'sent'"), "0");
  std::map<std::string, int64_t> last;
  std::set<std::string> seen;
  for (const auto& req : receiver_.Requests()) {
    const std::string id = req.Header("X-Message-Id");
    auto it = expected.find(id);
    ASSERT_NE(it, expected.end()) << "a row that was already sent, or unknown: " << id;
    EXPECT_TRUE(seen.insert(id).second) << "delivered twice: " << id;
    const auto& [key, sequence] = it->second;
    if (!key.empty()) {
      EXPECT_GT(sequence, last[key]) << key << " out of insert order";
      last[key] = sequence;
    }
    EXPECT_EQ(req.target, "/events");
  }
  EXPECT_EQ(seen.size(), expected.size());
  // Reclaiming a lease that expired spends no attempt.
  EXPECT_EQ(pg_->Scalar("SELECT max(attempt) FROM outbox"), "0");

  // QueueBox's history is left as it was; ours starts with the adopted baseline.
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM flyway_schema_history"), "11");
  EXPECT_EQ(pg_->Scalar("SELECT string_agg(version::text, ',' ORDER BY version) FROM "
                        "queuebox_schema_history WHERE checksum IS NULL"),
            "1,2,3,4,5,6,7,8,9,10,11");

  // A second start (a restart, or another replica) migrates nothing and adopts nothing.
  ASSERT_EQ(RunBinary({"migrate"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("Applied 0 migration(s): none."));
  EXPECT_THAT(out, Not(HasSubstr("Adopted")));
}

TEST_F(FlywayAdoptionE2ETest, AFailedFlywayMigrationStopsTheStartWithTheReason) {
  testing::BuildQueueBoxDatabase(*pg_, {.up_to = 10});
  testing::AddFlywayRow(*pg_, {.version = "11",
                               .description = "add outbox sequence",
                               .script = "V11__add_outbox_sequence.sql",
                               .success = false});
  std::string out;
  EXPECT_EQ(RunBinary({"run"}, &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("QueueBox did not start. Reason: flyway_schema_history shows a "
                             "failed migration (installed_rank 11, version 11, type SQL, script "
                             "V11__add_outbox_sequence.sql, success = false)."));
  EXPECT_EQ(RunBinary({"migrate"}, &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("The migration failed. flyway_schema_history shows a failed "
                             "migration (installed_rank 11"));
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM information_schema.tables "
                        "WHERE table_name = 'queuebox_schema_history'"),
            "0");
}

TEST_F(FlywayAdoptionE2ETest, AnUnknownFlywayMigrationStopsTheStartWithTheReason) {
  testing::BuildQueueBoxDatabase(*pg_);
  testing::AddFlywayRow(*pg_, {.version = "12",
                               .description = "add outbox partitions",
                               .script = "V12__add_outbox_partitions.sql",
                               .checksum = 1});
  std::string out;
  EXPECT_EQ(RunBinary({"run"}, &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("QueueBox did not start. Reason: flyway_schema_history shows "
                             "migration V12 (installed_rank 12, version 12, type SQL, script "
                             "V12__add_outbox_partitions.sql), beyond V11"));
  // The way out the message gives: record the version the schema is at.
  ASSERT_EQ(RunBinary({"migrate", "--baseline", "11"}, &out), 0) << out;
  EXPECT_THAT(
      out,
      HasSubstr("Applied 14 migration(s): V12, V13, V14, V16, V17, V18, V19, V20, V21, V22, V23, "
                "V24, V25, V26."));
}

}  // namespace
}  // namespace queuebox
