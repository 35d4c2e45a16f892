// End to end: `queuebox verify` and `queuebox receive`. Each invariant is caught on a violation
// planted by SQL (PostgreSQL; SQLite for two), the exit codes and the --json shape, and a clean
// verify after a chaos run: three replicas on PostgreSQL killed with SIGKILL while a producer
// inserts, `queuebox receive` as the destination.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "testing/broker_testing.h"
#include "testing/chaos.h"
#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::TempPgDatabase;
using namespace std::chrono_literals;

const char* const kVerifyBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);

// The configuration of `url`: one HTTP route to `base_url`, the lease `lease_ms` (the reclaim
// interval a fifth of it).
std::string VerifyConfigYaml(const std::string& url, const std::string& base_url,
                             int64_t lease_ms = 10000) {
  return "database:\n  url: " + url +
         "\n  startupTimeoutMs: 20000\n"
         "server:\n  address: 127.0.0.1\n  httpPort: " +
         std::to_string(testing::UnusedLoopbackPort()) +
         "\noutbox:\n  pollIntervalMs: 20\n  claimTimeoutMs: " + std::to_string(lease_ms) +
         "\n  retryBaseDelayMs: 50\n"
         "  shutdownTimeoutMs: 5000\n"
         "routes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
         "destinations:\n  receiver:\n    type: http\n    baseUrl: " +
         base_url +
         "\n    path: /events\n    timeoutMs: 5000\n"
         "logging:\n  format: json\n  level: warn\n";
}

struct VerifyRun {
  int code = -1;
  std::string output;
  nlohmann::json json;  // with --json
  // The check named `name` of the JSON report.
  nlohmann::json Check(const std::string& name) const {
    for (const auto& c : json["checks"]) {
      if (c["name"] == name) return c;
    }
    ADD_FAILURE() << "no check " << name << " in " << output;
    return {};
  }
};

VerifyRun RunVerify(const std::string& config, std::vector<std::string> extra) {
  VerifyRun run;
  std::vector<std::string> args{"--config", config, "verify", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  run.code = testing::RunCommand(kVerifyBinary, args, {}, &run.output);
  run.json = nlohmann::json::parse(run.output, nullptr, false);
  return run;
}

class VerifyE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    pg_ = std::make_unique<TempPgDatabase>(url);
    dir_.Write("q.yml", VerifyConfigYaml(pg_->url(), "http://127.0.0.1:9"));
    config_ = dir_.File("q.yml");
    std::string out;
    ASSERT_EQ(testing::RunCommand(kVerifyBinary, {"--config", config_, "migrate"}, {}, &out), 0)
        << out;
  }

  // Inserts a row and returns its id.
  std::string Insert(const std::string& key, const std::string& topic = "t") {
    return pg_->Scalar("INSERT INTO outbox (topic, key, payload) VALUES ('" + topic + "', " +
                       (key.empty() ? "NULL" : "'" + key + "'") + ", '{}') RETURNING id");
  }
  // Marks `id` sent as the relay does: claimed at `claimed`, sent now.
  void MarkSent(const std::string& id, const std::string& claimed = "clock_timestamp()") {
    pg_->Exec("UPDATE outbox SET state = 'sent', claimed_at = " + claimed +
              ", updated_at = clock_timestamp() WHERE id = '" + id + "'");
  }

  std::unique_ptr<TempPgDatabase> pg_;
  TempDir dir_;
  std::string config_;
};

TEST_F(VerifyE2ETest, CleanOutboxHoldsWithTheJsonShape) {
  std::string a = Insert("k"), b = Insert("k");
  MarkSent(a);
  MarkSent(b);
  Insert("k");
  VerifyRun run = RunVerify(config_, {});
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_EQ(run.json["dialect"], "postgresql");
  EXPECT_EQ(run.json["ordering"], "sequence");
  EXPECT_EQ(run.json["ok"], true);
  std::vector<std::string> names;
  for (const auto& c : run.json["checks"]) {
    names.push_back(c["name"]);
    EXPECT_TRUE(c["invariant"].is_string());
    EXPECT_TRUE(c["detail"].is_string());
    EXPECT_TRUE(c["rows"].is_array());
    EXPECT_EQ(c["count"], 0) << c.dump();
    EXPECT_NE(c["outcome"], "broken");
  }
  EXPECT_THAT(names, ElementsAre("key-order", "lease", "stalled", "inbox-forwarded", "dead-reason",
                                 "attempt-history"));
  EXPECT_EQ(run.Check("attempt-history")["outcome"], "holds");
  std::string text;
  EXPECT_EQ(testing::RunCommand(kVerifyBinary, {"--config", config_, "verify"}, {}, &text), 0);
  EXPECT_THAT(text, HasSubstr("Every invariant holds."));
}

// A lower row the relay had already changed (a retry) before the later row's claim: broken in
// every ordering mode.
TEST_F(VerifyE2ETest, KeyOrderCaughtWhenTheLowerRowWasVisibleAtTheClaim) {
  std::string lower = Insert("k"), later = Insert("k");
  pg_->Exec(
      "UPDATE outbox SET attempt = 1, updated_at = created_at + interval '1 second', "
      "scheduled_at = created_at + interval '1 hour' WHERE id = '" +
      lower + "'");
  MarkSent(later, "clock_timestamp() + interval '2 seconds'");
  VerifyRun run = RunVerify(config_, {});
  ASSERT_EQ(run.code, 1) << run.output;
  auto check = run.Check("key-order");
  EXPECT_EQ(check["outcome"], "broken");
  EXPECT_EQ(check["count"], 1);
  EXPECT_EQ(check["rows"][0]["id"], later);
  EXPECT_EQ(check["rows"][0]["lower_id"], lower);
  EXPECT_EQ(check["rows"][0]["lower_state"], "pending");
}

// A lower row never touched (it may have committed after the later row's claim): a warning under
// sequence ordering, broken under strict.
TEST_F(VerifyE2ETest, KeyOrderOverlappingWritersWarnUnderSequenceBreakUnderStrict) {
  std::string lower = Insert("k"), later = Insert("k");
  MarkSent(later);
  VerifyRun sequence = RunVerify(config_, {});
  ASSERT_EQ(sequence.code, 0) << sequence.output;
  EXPECT_EQ(sequence.Check("key-order")["outcome"], "warning");
  EXPECT_EQ(sequence.Check("key-order")["rows"][0]["lower_id"], lower);
  VerifyRun strict = RunVerify(config_, {"--ordering", "strict"});
  ASSERT_EQ(strict.code, 1) << strict.output;
  EXPECT_EQ(strict.json["ordering"], "strict");
  EXPECT_EQ(strict.Check("key-order")["outcome"], "broken");
  EXPECT_EQ(strict.Check("key-order")["rows"][0]["id"], later);
}

TEST_F(VerifyE2ETest, LeaseCaughtOnAProcessingRowPastItsLease) {
  std::string stuck = Insert("a"), fresh = Insert("b");
  pg_->Exec(
      "UPDATE outbox SET state = 'processing', claimed_at = now() - interval '5 minutes', "
      "lease_expires_at = now() - interval '1 minute' WHERE id = '" +
      stuck + "'");
  pg_->Exec(
      "UPDATE outbox SET state = 'processing', claimed_at = now(), "
      "lease_expires_at = now() + interval '10 seconds' WHERE id = '" +
      fresh + "'");
  VerifyRun run = RunVerify(config_, {});
  ASSERT_EQ(run.code, 1) << run.output;
  auto check = run.Check("lease");
  EXPECT_EQ(check["outcome"], "broken");
  EXPECT_EQ(check["count"], 1);
  EXPECT_EQ(check["rows"][0]["id"], stuck);
}

TEST_F(VerifyE2ETest, StalledCaughtOnlyWhileNoReplicaIsAlive) {
  std::string old = Insert("a");
  Insert("b");
  pg_->Exec("UPDATE outbox SET scheduled_at = now() - interval '10 minutes' WHERE id = '" + old +
            "'");
  VerifyRun run = RunVerify(config_, {"--stall-threshold-s", "60"});
  ASSERT_EQ(run.code, 1) << run.output;
  auto check = run.Check("stalled");
  EXPECT_EQ(check["outcome"], "broken");
  EXPECT_EQ(check["count"], 1);
  EXPECT_EQ(check["rows"][0]["id"], old);
  pg_->Exec(
      "INSERT INTO queuebox_relay_replicas (replica_id, outbox_table, name, started_at, "
      "heartbeat_at, expires_at) VALUES (gen_random_uuid(), 'outbox', 'h:1', now(), now(), "
      "now() + interval '1 minute')");
  VerifyRun alive = RunVerify(config_, {"--stall-threshold-s", "60"});
  EXPECT_EQ(alive.code, 0) << alive.output;
  EXPECT_EQ(alive.Check("stalled")["outcome"], "holds");
  EXPECT_THAT(alive.Check("stalled")["detail"].get<std::string>(), HasSubstr("1 replica"));
}

TEST_F(VerifyE2ETest, InboxForwardedCaughtWithoutItsOutboxRow) {
  pg_->Exec(
      "INSERT INTO outbox (topic, payload, created_at) VALUES ('t', '{}', now() - "
      "interval '1 hour')");
  std::string forwarded = pg_->Scalar(
      "INSERT INTO inbox (source, idempotency_key, payload, state, processed_at) VALUES ('s', "
      "'k1', '{}', 'processed', now()) RETURNING id");
  std::string lost = pg_->Scalar(
      "INSERT INTO inbox (source, idempotency_key, payload, state, processed_at) VALUES ('s', "
      "'k2', '{}', 'processed', now()) RETURNING id");
  pg_->Exec(
      "INSERT INTO inbox (source, idempotency_key, payload, state, consumption) VALUES "
      "('s', 'k3', '{}', 'processed', 'pull')");
  pg_->Exec(
      "INSERT INTO outbox (topic, payload, headers) VALUES ('t', '{}', "
      "jsonb_build_object('x-inbox-id', '" +
      forwarded + "'))");
  VerifyRun run = RunVerify(config_, {});
  ASSERT_EQ(run.code, 1) << run.output;
  auto check = run.Check("inbox-forwarded");
  EXPECT_EQ(check["outcome"], "broken");
  EXPECT_EQ(check["count"], 1);
  EXPECT_EQ(check["rows"][0]["id"], lost);
  EXPECT_EQ(check["rows"][0]["idempotency_key"], "k2");
}

TEST_F(VerifyE2ETest, DeadReasonCaughtOnADeadRowWithoutError) {
  std::string bare = Insert("a"), explained = Insert("b");
  pg_->Exec("UPDATE outbox SET state = 'dead', attempt = 5 WHERE id = '" + bare + "'");
  pg_->Exec("UPDATE outbox SET state = 'dead', last_error = 'HTTP 500' WHERE id = '" + explained +
            "'");
  VerifyRun run = RunVerify(config_, {});
  ASSERT_EQ(run.code, 1) << run.output;
  auto check = run.Check("dead-reason");
  EXPECT_EQ(check["count"], 1);
  EXPECT_EQ(check["rows"][0]["id"], bare);
  EXPECT_EQ(check["rows"][0]["attempt"], "5");
}

// The latest recorded attempt of a sent row says retry: the history and the row disagree.
TEST_F(VerifyE2ETest, AttemptHistoryCaughtWhenTheLatestAttemptDisagrees) {
  std::string lying = Insert("a"), agreeing = Insert("b"), unrecorded = Insert("c");
  MarkSent(lying);
  MarkSent(agreeing);
  MarkSent(unrecorded);
  pg_->Exec("INSERT INTO outbox_attempts (message_id, attempt, outcome, recorded_at) VALUES ('" +
            lying + "', 0, 'sent', now() - interval '1 minute'), ('" + lying +
            "', 1, 'retry', now()), ('" + agreeing +
            "', 0, 'retry', now() - interval '1 minute'), ('" + agreeing + "', 1, 'sent', now())");
  VerifyRun run = RunVerify(config_, {});
  ASSERT_EQ(run.code, 1) << run.output;
  auto check = run.Check("attempt-history");
  EXPECT_EQ(check["outcome"], "broken");
  ASSERT_EQ(check["count"], 1) << check.dump();
  EXPECT_EQ(check["rows"][0]["id"], lying);
  EXPECT_EQ(check["rows"][0]["latest_attempt_outcome"], "retry");
}

TEST_F(VerifyE2ETest, FiltersNarrowTheRowsChecked) {
  std::string dead = Insert("a", "billing.failed");
  pg_->Exec("UPDATE outbox SET state = 'dead' WHERE id = '" + dead + "'");
  EXPECT_EQ(RunVerify(config_, {"--topic", "orders"}).code, 0);
  EXPECT_EQ(RunVerify(config_, {"--key", "b"}).code, 0);
  EXPECT_EQ(RunVerify(config_, {"--since", "2999-01-01T00:00:00Z"}).code, 0);
  EXPECT_EQ(RunVerify(config_, {"--topic", "billing.failed", "--key", "a"}).code, 1);
  EXPECT_EQ(RunVerify(config_, {"--since", "2000-01-01T00:00:00+02:00"}).code, 1);
  EXPECT_EQ(RunVerify(config_, {"--since", "yesterday"}).code, 2);
}

TEST_F(VerifyE2ETest, CannotCheckExitsTwo) {
  dir_.Write("down.yml", VerifyConfigYaml("postgresql://postgres@127.0.0.1:" +
                                              std::to_string(testing::UnusedLoopbackPort()) +
                                              "/none?connect_timeout=2",
                                          "http://127.0.0.1:9"));
  VerifyRun down = RunVerify(dir_.File("down.yml"), {});
  EXPECT_EQ(down.code, 2) << down.output;
  EXPECT_THAT(down.output, HasSubstr("Cannot verify"));
  pg_->Exec("DROP TABLE outbox");
  VerifyRun no_table = RunVerify(config_, {});
  EXPECT_EQ(no_table.code, 2) << no_table.output;
  EXPECT_THAT(no_table.output, HasSubstr("does not exist"));
  VerifyRun no_file = RunVerify(config_, {"--received", dir_.File("none.jsonl")});
  EXPECT_EQ(no_file.code, 2) << no_file.output;
}

TEST_F(VerifyE2ETest, ReceivedFileCatchesMissingRowsCountsDuplicatesAndChecksKeyOrder) {
  std::string r1 = Insert("k"), r2 = Insert("k"), r3 = Insert("k");
  for (const auto& id : {r1, r2, r3}) MarkSent(id);
  auto line = [](const std::string& id) {
    return R"({"id":")" + id + R"(","key":"k","topic":"t","attempt":0,"time":"x"})" + "\n";
  };
  // r2 missing, r1 twice: one row lost, one duplicate, first receipts in order.
  dir_.Write("lost.jsonl", line(r1) + line(r1) + line(r3) + "{\"cut sh");
  VerifyRun lost = RunVerify(config_, {"--received", dir_.File("lost.jsonl")});
  ASSERT_EQ(lost.code, 1) << lost.output;
  EXPECT_EQ(lost.Check("received")["count"], 1);
  EXPECT_EQ(lost.Check("received")["rows"][0]["id"], r2);
  EXPECT_THAT(lost.Check("duplicates")["detail"].get<std::string>(), HasSubstr("1 unreadable"));
  EXPECT_EQ(lost.Check("duplicates")["count"], 1);
  EXPECT_EQ(lost.Check("duplicates")["outcome"], "holds");
  EXPECT_EQ(lost.Check("received-order")["count"], 0);
  // A byte order mark before a line (simdjson refuses it, nlohmann reads it), an id that is not
  // a string and a line that is not an object: r2 is read, the other two are unreadable.
  dir_.Write("odd.jsonl", "\xEF\xBB\xBF" + line(r2) + "{\"id\":5}\n[1]\n" + line(r1) + line(r3));
  VerifyRun odd = RunVerify(config_, {"--received", dir_.File("odd.jsonl")});
  EXPECT_EQ(odd.Check("received")["count"], 0) << odd.output;
  EXPECT_THAT(odd.Check("duplicates")["detail"].get<std::string>(), HasSubstr("2 unreadable"));
  // r3 first: out of order, a warning under sequence ordering, broken under strict.
  dir_.Write("order.jsonl", line(r3) + line(r1) + line(r2));
  VerifyRun order = RunVerify(config_, {"--received", dir_.File("order.jsonl")});
  ASSERT_EQ(order.code, 0) << order.output;
  EXPECT_EQ(order.Check("received-order")["outcome"], "warning");
  EXPECT_EQ(order.Check("received-order")["count"], 2);
  EXPECT_EQ(order.Check("received-order")["rows"][0]["received_after_id"], r3);
  VerifyRun strict =
      RunVerify(config_, {"--received", dir_.File("order.jsonl"), "--ordering", "strict"});
  EXPECT_EQ(strict.code, 1) << strict.output;
}

TEST_F(VerifyE2ETest, ChaosRunWithReplicasKilledVerifiesClean) {
  const std::string port = std::to_string(testing::UnusedLoopbackPort());
  const std::string received = dir_.File("received.jsonl");
  testing::ChildProcess receiver(kVerifyBinary,
                                 {"receive", "--listen", "127.0.0.1:" + port, "--out", received},
                                 {}, dir_.File("receive.log"));
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return receiver.Log().find("Listening on") != std::string::npos; }, 10s))
      << receiver.Log();
  dir_.Write("chaos.yml", VerifyConfigYaml(pg_->url(), "http://127.0.0.1:" + port, 2000));
  testing::ReplicaSet replicas(kVerifyBinary, dir_.File("chaos.yml"), dir_.path(), 3);
  constexpr int kRows = 3000;
  testing::RowProducer producer({.url = pg_->url(), .keys = 20, .max_rows = kRows});
  auto sent = [&] {
    return std::stoi(pg_->Scalar("SELECT count(*) FROM outbox WHERE state = 'sent'"));
  };
  // Two replicas die with SIGKILL in the middle of the run (their claims wait for the lease);
  // a new one starts in each one's place.
  for (size_t victim : {size_t{0}, size_t{1}}) {
    const int target = victim == 0 ? 300 : 1200;
    ASSERT_TRUE(testing::WaitUntil([&] { return sent() >= target; }, 60s)) << replicas.LogTails();
    replicas.KillAndReplace(victim);
  }
  producer.Join();
  ASSERT_TRUE(testing::WaitUntil([&] { return sent() == kRows; }, 90s)) << replicas.LogTails();
  EXPECT_THAT(replicas.exited_early(), ::testing::IsEmpty());
  replicas.StopAll(20s);
  receiver.Kill(SIGTERM);
  ASSERT_EQ(receiver.Wait(10s), std::optional<int>(0)) << receiver.Log();

  VerifyRun run = RunVerify(config_, {"--received", received, "--topic", "chaos"});
  ASSERT_EQ(run.code, 0) << run.output;
  for (const auto& check : run.json["checks"]) {
    EXPECT_THAT(check["outcome"].get<std::string>(), ::testing::AnyOf("holds", "skipped"))
        << check.dump();
  }
  EXPECT_EQ(run.Check("received")["count"], 0);
  EXPECT_THAT(run.Check("received")["detail"].get<std::string>(), HasSubstr("3000 sent row(s)"));
  EXPECT_EQ(run.Check("received-order")["count"], 0);
  EXPECT_EQ(run.Check("stalled")["outcome"], "holds");
}

// SQLite: the same statements in the other dialect.
// A migrated SQLite outbox in `dir` (o.db); gives its configuration's path.
std::string MigratedSqlite(TempDir& dir) {
  dir.Write("q.yml", VerifyConfigYaml(dir.File("o.db"), "http://127.0.0.1:9"));
  std::string out;
  EXPECT_EQ(
      testing::RunCommand(kVerifyBinary, {"--config", dir.File("q.yml"), "migrate"}, {}, &out), 0)
      << out;
  return dir.File("q.yml");
}

void ExecSqlite(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
}

TEST(VerifySqliteE2ETest, KeyOrderLeaseAndDeadReasonCaught) {
  TempDir dir;
  const std::string config = MigratedSqlite(dir);
  VerifyRun clean = RunVerify(config, {});
  ASSERT_EQ(clean.code, 0) << clean.output;
  EXPECT_EQ(clean.json["dialect"], "sqlite");
  EXPECT_EQ(clean.Check("stalled")["outcome"], "skipped");
  std::string sql =
      "INSERT INTO outbox (topic, key, payload) VALUES ('t', 'k', '{}'), ('t', 'k', '{}'), "
      "('t', 'p', '{}'), ('t', 'd', '{}');"
      "UPDATE outbox SET attempt = 1, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', "
      "'+1 seconds') WHERE sequence = 1;"
      "UPDATE outbox SET state = 'sent', claimed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', "
      "'+2 seconds') WHERE sequence = 2;"
      "UPDATE outbox SET state = 'processing', lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', "
      "'now', '-1 minutes') WHERE sequence = 3;"
      "UPDATE outbox SET state = 'dead' WHERE sequence = 4;";
  ExecSqlite(dir.File("o.db"), sql);
  VerifyRun run = RunVerify(config, {});
  ASSERT_EQ(run.code, 1) << run.output;
  EXPECT_EQ(run.Check("key-order")["outcome"], "broken");
  EXPECT_EQ(run.Check("key-order")["rows"][0]["sequence"], "2");
  EXPECT_EQ(run.Check("lease")["rows"][0]["sequence"], "3");
  EXPECT_EQ(run.Check("dead-reason")["rows"][0]["key"], "d");
  EXPECT_EQ(RunVerify(config, {"--key", "zzz"}).code, 0);
}

// SQLite's attempt-history statement (the columns of its MAX() row): the latest attempt of a
// sent row says retry, an earlier one said sent; another row's latest says sent.
TEST(VerifySqliteE2ETest, AttemptHistoryCaughtWhenTheLatestAttemptDisagrees) {
  TempDir dir;
  const std::string config = MigratedSqlite(dir);
  const std::string sql =
      "INSERT INTO outbox (id, topic, key, payload, state) VALUES "
      "('00000000-0000-7000-8000-000000000001', 't', 'a', '{}', 'sent'), "
      "('00000000-0000-7000-8000-000000000002', 't', 'b', '{}', 'sent');"
      "INSERT INTO outbox_attempts (message_id, attempt, outcome, recorded_at) VALUES "
      "('00000000-0000-7000-8000-000000000001', 0, 'sent', '2026-01-01T00:00:00.000Z'), "
      "('00000000-0000-7000-8000-000000000001', 1, 'retry', '2026-01-01T00:01:00.000Z'), "
      "('00000000-0000-7000-8000-000000000002', 0, 'retry', '2026-01-01T00:00:00.000Z'), "
      "('00000000-0000-7000-8000-000000000002', 1, 'sent', '2026-01-01T00:01:00.000Z');";
  ExecSqlite(dir.File("o.db"), sql);
  VerifyRun run = RunVerify(config, {});
  ASSERT_EQ(run.code, 1) << run.output;
  auto check = run.Check("attempt-history");
  EXPECT_EQ(check["outcome"], "broken");
  ASSERT_EQ(check["count"], 1) << check.dump();
  EXPECT_EQ(check["rows"][0]["id"], "00000000-0000-7000-8000-000000000001");
  EXPECT_EQ(check["rows"][0]["latest_attempt_outcome"], "retry");
  EXPECT_EQ(check["rows"][0]["latest_attempt"], "1");
}

}  // namespace
}  // namespace queuebox
