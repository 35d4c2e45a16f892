// End to end: the queuebox binary with QueueBox's capture configuration (examples/cdc's keys)
// on PostgreSQL with wal_level=logical. The poll and reconciliation intervals are an hour, so a
// delivery inside this test can only have come from a capture wake, not from a timer: the
// assertions are outcomes (delivered, refused, resumed), never durations. It follows QueueBox's
// smoke test: capture wakes delivery, the recorded position survives a restart, a second process
// with the same identity is refused and still delivers by SQL, and `queuebox status` shows the
// slot of a stopped relay with the WAL it retains.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"

namespace queuebox {
namespace {

using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::HttpReceiver;
using testing::TempDir;
using testing::TempPgDatabase;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);
constexpr int64_t kHour = 3600000;

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout = 60s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

class CaptureE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    pg_ = std::make_unique<TempPgDatabase>(url);
    ASSERT_TRUE(receiver_.Start().ok());
    // As examples/cdc does before QueueBox starts: the publication, which QueueBox never creates.
    pg_->Exec("CREATE PUBLICATION queuebox_outbox FOR ALL TABLES");
    // jdbc:postgresql://127.0.0.1:<port>/<db> from the libpq URI of the test database.
    const std::string& u = pg_->url();
    jdbc_ = "jdbc:postgresql://" + u.substr(u.find('@') + 1);
  }

  // QueueBox's examples/cdc/queuebox.yml with this test's database, receiver, state directory and
  // intervals (and a slot per test database: slot names are cluster-wide).
  std::string Config(const std::string& state_dir, int64_t reconciliation_ms) {
    return "database:\n  type: postgresql\n  url: " + jdbc_ +
           "\n  username: postgres\n  password: queuebox\n  startupTimeoutMs: 20000\n"
           "server:\n  httpPort: " +
           std::to_string(testing::UnusedLoopbackPort()) +
           "\noutbox:\n  pollIntervalMs: " + std::to_string(kHour) +
           "\n  capture:\n    mode: postgres-logical\n    enabled: true\n    identity: queuebox\n"
           "    stateDirectory: " +
           state_dir + "\n    publication: queuebox_outbox\n    slot: " + pg_->name() +
           "\n    reconciliationIntervalMs: " + std::to_string(reconciliation_ms) +
           "\ndestinations:\n  receiver:\n    type: http\n    baseUrl: " + receiver_.BaseUrl() +
           "\n    path: /events\nroutes:\n  - topicPattern: \"order.*\"\n    destination: "
           "receiver\nlogging:\n  format: json\n  level: info\n";
  }

  static int PortOf(const std::string& config_text) {
    auto at = config_text.find("httpPort: ") + 10;
    return std::stoi(config_text.substr(at, config_text.find('\n', at) - at));
  }

  // GET /health/ready: (HTTP status, outbox-capture's status).
  static std::pair<int, std::string> Ready(int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(2);
    c.set_read_timeout(5);
    auto r = c.Get("/health/ready");
    if (!r) return {0, ""};
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    std::string capture;
    if (j.is_object() && j["components"].contains("outbox-capture")) {
      capture = j["components"]["outbox-capture"]["status"].get<std::string>();
    }
    return {r->status, capture};
  }

  void Insert(const std::string& id) {
    // As a producer does: one row, its own transaction.
    pg_->Exec("INSERT INTO outbox (topic, payload) VALUES ('order.created', '{\"id\":\"" + id +
              "\"}')");
  }

  bool Delivered(const std::string& id) {
    for (const auto& r : receiver_.Requests()) {
      if (r.body.find(id) != std::string::npos) return true;
    }
    return false;
  }

  std::unique_ptr<TempPgDatabase> pg_;
  HttpReceiver receiver_;
  std::string jdbc_;
};

TEST_F(CaptureE2ETest, CaptureWakesDeliveryResumesAfterARestartAndRefusesASecondOwner) {
  TempDir dir;
  const std::string config = Config(dir.File("capture"), kHour);
  dir.Write("qb.yml", config);
  const int port = PortOf(config);
  auto relay = std::make_unique<ChildProcess>(
      kBinary, std::vector<std::string>{"--config", dir.File("qb.yml"), "run"},
      std::map<std::string, std::string>{}, dir.File("qb.log"));
  ASSERT_TRUE(WaitUntil([&] { return Ready(port) == std::make_pair(200, std::string("up")); }))
      << relay->Log();

  // Both timers are an hour away: only a capture wake delivers this row.
  Insert("cdc_smoke_001");
  ASSERT_TRUE(WaitUntil([&] { return Delivered("cdc_smoke_001"); })) << relay->Log();
  EXPECT_TRUE(WaitUntil([&] { return pg_->Scalar("SELECT state FROM outbox") == "sent"; }));

  // Restart: capture resumes from the position recorded in offsets.dat.
  relay->Kill(SIGTERM);
  ASSERT_EQ(relay->Wait(30s), std::optional<int>(0)) << relay->Log();
  std::ifstream offsets(dir.File("capture/offsets.dat"));
  std::string text((std::istreambuf_iterator<char>(offsets)), std::istreambuf_iterator<char>());
  const std::string recorded = text.substr(
      text.find("lsn=") + 4, text.find('\n', text.find("lsn=")) - text.find("lsn=") - 4);
  ASSERT_FALSE(recorded.empty()) << text;
  Insert("cdc_smoke_002");  // committed while no relay runs
  relay = std::make_unique<ChildProcess>(
      kBinary, std::vector<std::string>{"--config", dir.File("qb.yml"), "run"},
      std::map<std::string, std::string>{}, dir.File("qb2.log"));
  ASSERT_TRUE(WaitUntil([&] { return Delivered("cdc_smoke_002"); })) << relay->Log();
  ASSERT_TRUE(WaitUntil([&] {
    return relay->Log().find("Capture is streaming") != std::string::npos;
  })) << relay->Log();
  EXPECT_THAT(relay->Log(), HasSubstr("\"position\":\"" + recorded + "\""))
      << "the stream starts at the recorded position";
  Insert("cdc_smoke_003");
  ASSERT_TRUE(WaitUntil([&] { return Delivered("cdc_smoke_003"); })) << relay->Log();

  // A second process with the same identity and its own (empty) state directory: refused, ready
  // anyway (the component is advisory), and it delivers by SQL on its reconciliation timer.
  const std::string second_config = Config(dir.File("capture-second"), 300);
  dir.Write("second.yml", second_config);
  const int second_port = PortOf(second_config);
  ChildProcess second(kBinary, {"--config", dir.File("second.yml"), "run"}, {},
                      dir.File("second.log"));
  ASSERT_TRUE(WaitUntil([&] {
    return second.Log().find("already has an active owner") != std::string::npos;
  })) << second.Log();
  EXPECT_EQ(Ready(second_port), std::make_pair(200, std::string("down")));
  relay->Kill(SIGTERM);  // the owner stops: only the refused process is left to deliver
  ASSERT_EQ(relay->Wait(30s), std::optional<int>(0)) << relay->Log();
  Insert("cdc_smoke_004");
  ASSERT_TRUE(WaitUntil([&] { return Delivered("cdc_smoke_004"); })) << second.Log();
  second.Kill(SIGTERM);
  ASSERT_EQ(second.Wait(30s), std::optional<int>(0)) << second.Log();
  EXPECT_EQ(receiver_.Requests().size(), 4u) << "each row once";

  // Nobody reads the slot now: status shows it inactive, with the WAL it retains.
  pg_->Exec(
      "CREATE TABLE filler (s text); INSERT INTO filler SELECT repeat('x', 100) FROM "
      "generate_series(1, 2000)");
  std::string out;
  ASSERT_EQ(
      testing::RunCommand(kBinary, {"--config", dir.File("qb.yml"), "status", "--json"}, {}, &out),
      0)
      << out;
  auto j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(j["capture"]["recorded"], true);
  EXPECT_EQ(j["capture"]["slot"]["exists"], true);
  EXPECT_EQ(j["capture"]["slot"]["active"], false);
  EXPECT_GT(j["capture"]["slot"]["retainedBytes"].get<int64_t>(), 100000);
}

// Strict order in capture mode (outbox.ordering: strict; docs/claim.md "Strict order"): both
// timers are an hour away, so only capture wakes deliver. T1 inserts A (key k) and stays open;
// B (key k) and then C (no key) commit: C is delivered, B waits; T1's commit wakes delivery: A,
// then B.
TEST_F(CaptureE2ETest, StrictOrderHoldsAKeyBehindAnOpenLowerSequenceUntilItCommits) {
  TempDir dir;
  std::string config = Config(dir.File("capture"), kHour);
  config.replace(config.find("\noutbox:\n"), 9, "\noutbox:\n  ordering: strict\n");
  dir.Write("qb.yml", config);
  const int port = PortOf(config);
  ChildProcess relay(kBinary, {"--config", dir.File("qb.yml"), "run"}, {}, dir.File("qb.log"));
  ASSERT_TRUE(WaitUntil([&] { return Ready(port) == std::make_pair(200, std::string("up")); }))
      << relay.Log();
  PGconn* t1 = PQconnectdb(pg_->url().c_str());
  ASSERT_EQ(PQstatus(t1), CONNECTION_OK);
  PQclear(PQexec(t1,
                 "BEGIN; INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'k', "
                 "'{\"id\":\"strict_A\"}')"));
  pg_->Exec(
      "INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'k', "
      "'{\"id\":\"strict_B\"}')");
  Insert("strict_C");
  ASSERT_TRUE(WaitUntil([&] { return Delivered("strict_C"); })) << relay.Log();
  EXPECT_FALSE(Delivered("strict_B"));
  EXPECT_EQ(pg_->Scalar("SELECT state FROM outbox WHERE payload->>'id' = 'strict_B'"), "pending");
  PQclear(PQexec(t1, "COMMIT"));
  PQfinish(t1);
  ASSERT_TRUE(WaitUntil([&] { return Delivered("strict_B"); })) << relay.Log();
  auto reqs = receiver_.Requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_THAT(reqs[1].body, HasSubstr("strict_A"));
  EXPECT_THAT(reqs[2].body, HasSubstr("strict_B"));
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
}

TEST_F(CaptureE2ETest, SqlServerCdcIsRefusedByThisBuild) {
  TempDir dir;
  dir.Write("qb.yml", "database:\n  type: postgresql\n  url: " + pg_->url() +
                          "\noutbox:\n  capture:\n    mode: sqlserver-cdc\n");
  std::string out;
  EXPECT_EQ(
      testing::RunCommand(kBinary, {"--config", dir.File("qb.yml"), "check-config"}, {}, &out), 1)
      << out;
  EXPECT_THAT(out, HasSubstr("outbox.capture.mode: sqlserver-cdc is not supported by this build"));
}

}  // namespace
}  // namespace queuebox
