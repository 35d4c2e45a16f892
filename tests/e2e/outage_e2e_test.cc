// Outages: the database (S6) and the destination (S7) go away while the queuebox binary runs.
// Outages are scaled down from the scenarios' 60 s to a few seconds; the behaviour under test
// (backoff, bounded logs, readiness, no loss) does not depend on the length.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <cmath>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/pg_server.h"
#include "testing/process.h"

namespace queuebox {
namespace {

using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::HttpReceiver;
using testing::TempDir;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);

// queuebox_behaviour: the destination's circuitBreaker.enabled false (every failure spends an
// attempt).
std::string Config(const std::string& db_url, const std::string& receiver_url, int http_port,
                   int64_t retry_base_ms, bool queuebox_behaviour = false) {
  return "database:\n  type: postgresql\n  url: " + db_url +
         "\n  startupTimeoutMs: 20000\nserver:\n  address: 127.0.0.1\n  httpPort: " +
         std::to_string(http_port) +
         "\noutbox:\n  pollIntervalMs: 50\n  batchSize: 20\n  concurrency: 20\n"
         "  claimTimeoutMs: 10000\n  retryBaseDelayMs: " +
         std::to_string(retry_base_ms) +
         "\nroutes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
         "destinations:\n  receiver:\n    type: http\n    baseUrl: " +
         receiver_url + "\n    timeoutMs: 2000\n" +
         (queuebox_behaviour ? "    circuitBreaker:\n      enabled: false\n" : "") +
         "logging:\n  format: json\n  level: info\n";
}

int CountLines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

int ReadyStatus(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(5);
  auto r = c.Get("/health/ready");
  return r ? r->status : -1;
}

int64_t Scalar(const std::string& url, const std::string& sql) {
  PGconn* c = PQconnectdb(url.c_str());
  int64_t v = -1;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexec(c, sql.c_str());
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
      v = std::stoll(PQgetvalue(r, 0, 0));
    PQclear(r);
  }
  PQfinish(c);
  return v;
}

// The value of the unlabelled counter or gauge `name` on the relay's /metrics; -1 when absent.
int64_t MetricValue(int port, const std::string& name) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(5);
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return -1;
  std::istringstream lines(r->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::llround(std::stod(line.substr(name.size())));
  }
  return -1;
}

bool WaitFor(const std::function<bool()>& cond, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return cond();
}

// S6: PostgreSQL is stopped while the relay runs, then started again. The relay backs off with
// a bounded number of log lines, readiness reports the database down, and afterwards every row
// is delivered with no duplicates beyond the rows that were in flight.
TEST(OutageE2ETest, S6_TheDatabaseGoesAwayAndComesBack) {
  std::string shared;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", shared);  // the private server needs the same setup
  testing::PrivatePostgres pg;
  ASSERT_TRUE(pg.Init().ok());
  HttpReceiver receiver;
  receiver.SetDefaultResponse({204, "", "text/plain", {}, 5ms});
  ASSERT_TRUE(receiver.Start().ok());
  TempDir dir;
  int http_port = testing::UnusedLoopbackPort();
  dir.Write("q.yml", Config(pg.url(), receiver.BaseUrl(), http_port, 100));
  std::string out;
  ASSERT_EQ(testing::RunCommand(kBinary, {"--config", dir.File("q.yml"), "migrate"}, {}, &out), 0)
      << out;
  auto insert = [&](int from, int to) {
    PGconn* c = PQconnectdb(pg.url().c_str());
    std::string sql =
        "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || (i % 10), "
        "jsonb_build_object('i', i) FROM generate_series(" +
        std::to_string(from) + ", " + std::to_string(to) + ") i";
    PQclear(PQexec(c, sql.c_str()));
    PQfinish(c);
  };
  insert(1, 200);
  ChildProcess relay(kBinary, {"--config", dir.File("q.yml"), "run"}, {}, dir.File("relay.log"));
  ASSERT_TRUE(receiver.WaitForRequests(200, 60s)) << relay.Log();
  ASSERT_TRUE(WaitFor([&] { return ReadyStatus(http_port) == 200; }, 20s)) << relay.Log();

  insert(201, 400);  // rows committed just before the outage
  const char* kErrors = "queuebox_outbox_process_errors_total";
  const int64_t errors_before = MetricValue(http_port, kErrors);
  ASSERT_GE(errors_before, 0);
  ASSERT_TRUE(pg.Stop().ok());
  size_t log_before = relay.Log().size();
  ASSERT_TRUE(WaitFor([&] { return ReadyStatus(http_port) == 503; }, 20s))
      << "readiness must report the database down";
  // Eight failed poll cycles, their waits doubling from 25-50 ms (3-6 s in all): the logging of
  // a backoff that has gone on for a while is what must be bounded.
  ASSERT_TRUE(WaitFor([&] { return MetricValue(http_port, kErrors) >= errors_before + 8; }, 30s))
      << relay.Log();
  std::string outage_log = relay.Log().substr(log_before);
  EXPECT_TRUE(relay.running()) << "the relay must ride out the outage";
  EXPECT_LE(CountLines(outage_log), 40) << "bounded logging during the outage:\n" << outage_log;

  ASSERT_TRUE(pg.Start().ok());
  ASSERT_TRUE(WaitFor(
      [&] { return Scalar(pg.url(), "SELECT count(*) FROM outbox WHERE state <> 'sent'") == 0; },
      90s))
      << relay.Log();
  EXPECT_TRUE(WaitFor([&] { return ReadyStatus(http_port) == 200; }, 20s));
  std::map<std::string, int> deliveries;
  for (const auto& r : receiver.Requests()) deliveries[r.Header("X-Message-Id")]++;
  EXPECT_EQ(deliveries.size(), 400u) << "every row arrives";
  int duplicates = 0;
  for (const auto& [id, n] : deliveries) duplicates += n - 1;
  EXPECT_LE(duplicates, 20) << "duplicates only for rows in flight (one batch)";
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(20s), std::optional<int>(0));
}

// S7 with `circuitBreaker.enabled: false` (QueueBox's behaviour; the default releases outages
// without spending attempts, DestinationOutageTest): the HTTP receiver goes away. Every failed
// delivery of a key's head row counts as an attempt and schedules a retry with backoff; a row
// whose attempts run out during the outage goes dead (replay brings it back); the rows behind a
// head row are not attempted, so their attempt stays 0; nothing is lost.
TEST(OutageE2ETest, S7_TheDestinationGoesAwayAndComesBack) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
  testing::TempPgDatabase pg(url);
  // Nothing listens at this port during the outage; a receiver takes it over later.
  int dead_port = testing::UnusedLoopbackPort();
  TempDir dir;
  int http_port = testing::UnusedLoopbackPort();
  dir.Write("q.yml",
            Config(pg.url(), "http://127.0.0.1:" + std::to_string(dead_port), http_port, 100,
                   /*queuebox_behaviour=*/true));
  std::string out;
  ASSERT_EQ(testing::RunCommand(kBinary, {"--config", dir.File("q.yml"), "migrate"}, {}, &out), 0)
      << out;
  // Key "patient": 3 rows with a large ceiling. Key "fragile": max_attempts 1.
  pg.Exec(
      "INSERT INTO outbox (topic, key, payload, max_attempts) SELECT 't', 'patient', "
      "jsonb_build_object('i', i), 50 FROM generate_series(1, 3) i");
  pg.Exec(
      "INSERT INTO outbox (topic, key, payload, max_attempts) VALUES ('t', 'fragile', '{}', 1)");
  ChildProcess relay(kBinary, {"--config", dir.File("q.yml"), "run"}, {}, dir.File("relay.log"));
  ASSERT_TRUE(WaitFor(
      [&] {
        return std::stoll(pg.Scalar("SELECT count(*) FROM outbox WHERE state = 'dead'")) == 1;
      },
      30s))
      << relay.Log();
  // The head row of "patient" fails again with backoff while the outage lasts.
  EXPECT_TRUE(WaitFor(
      [&] {
        return std::stoi(pg.Scalar("SELECT attempt FROM outbox WHERE key = 'patient' ORDER BY "
                                   "sequence LIMIT 1")) >= 2;
      },
      30s))
      << relay.Log();
  EXPECT_EQ(pg.Scalar("SELECT key FROM outbox WHERE state = 'dead'"), "fragile");
  EXPECT_EQ(pg.Scalar("SELECT attempt FROM outbox WHERE state = 'dead'"), "1");
  EXPECT_GE(std::stoi(pg.Scalar(
                "SELECT attempt FROM outbox WHERE key = 'patient' ORDER BY sequence LIMIT 1")),
            2);
  EXPECT_EQ(pg.Scalar("SELECT max(attempt) FROM outbox WHERE key = 'patient' AND sequence > "
                      "(SELECT min(sequence) FROM outbox WHERE key = 'patient')"),
            "0")
      << "rows behind the head are not attempted";
  std::string outage_log = relay.Log();
  EXPECT_LE(CountLines(outage_log), 60) << "bounded logging:\n" << outage_log;

  // The destination returns on its address.
  httplib::Server back;
  std::vector<std::string> got;
  std::mutex mu;
  back.Post(".*", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    got.push_back(req.get_header_value("X-Message-Id"));
    res.status = 204;
  });
  ASSERT_TRUE(back.bind_to_port("127.0.0.1", dead_port));
  std::thread serve([&] { back.listen_after_bind(); });
  EXPECT_TRUE(WaitFor(
      [&] {
        return pg.Scalar("SELECT count(*) FROM outbox WHERE key = 'patient' AND state = 'sent'") ==
               "3";
      },
      60s))
      << relay.Log();
  back.stop();
  serve.join();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(got.size(), 3u);
  relay.Kill(SIGTERM);
  relay.Wait(20s);
}

// The start-up wait (database.startupTimeoutMs): a relay started while PostgreSQL is not up waits
// for it, and proceeds (migrates, delivers, reports ready) once it answers.
TEST(OutageE2ETest, ARelayStartedBeforeTheDatabaseProceedsOnceItAnswers) {
  std::string shared;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", shared);  // the private server needs the same setup
  testing::PrivatePostgres pg;
  ASSERT_TRUE(pg.Init().ok());
  ASSERT_TRUE(pg.Stop().ok());
  HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  TempDir dir;
  int http_port = testing::UnusedLoopbackPort();
  dir.Write("q.yml", Config(pg.url(), receiver.BaseUrl(), http_port, 100));
  ChildProcess relay(kBinary, {"--config", dir.File("q.yml"), "run"}, {}, dir.File("relay.log"));
  ASSERT_TRUE(WaitFor(
      [&] { return relay.Log().find("Waiting for the database") != std::string::npos; }, 20s))
      << relay.Log();
  EXPECT_TRUE(relay.running());
  ASSERT_TRUE(pg.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return ReadyStatus(http_port) == 200; }, 30s)) << relay.Log();
  EXPECT_NE(relay.Log().find("The database answered; starting"), std::string::npos);
  PGconn* c = PQconnectdb(pg.url().c_str());
  PQclear(PQexec(c, "INSERT INTO outbox (topic, payload) VALUES ('t', '{\"n\":1}')"));
  PQfinish(c);
  ASSERT_TRUE(receiver.WaitForRequests(1, 30s)) << relay.Log();
  EXPECT_EQ(Scalar(pg.url(), "SELECT count(*) FROM outbox WHERE state = 'sent'"), 1);
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(20s), std::optional<int>(0)) << relay.Log();
}

// PostgreSQL restarting under a replica that starts (the chaos test saw it): the connection is
// lost while the relay migrates. The relay waits for the database and prepares again, within
// database.startupTimeoutMs, instead of exiting. Deterministic: the test holds the migration's
// advisory lock, terminates the relay's backend waiting on it, then lets go.
TEST(OutageE2ETest, AConnectionLostWhileMigratingStartsThePreparationAgain) {
  std::string admin;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", admin);
  testing::TempPgDatabase db(admin);
  PGconn* holder = PQconnectdb(db.url().c_str());
  ASSERT_EQ(PQstatus(holder), CONNECTION_OK);
  PQclear(PQexec(holder, "SELECT pg_advisory_lock(hashtext('queuebox_schema_history'))"));
  HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  TempDir dir;
  int http_port = testing::UnusedLoopbackPort();
  dir.Write("q.yml", Config(db.url(), receiver.BaseUrl(), http_port, 100));
  ChildProcess relay(kBinary, {"--config", dir.File("q.yml"), "run"}, {}, dir.File("relay.log"));
  const std::string waiting =
      "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
      "wait_event_type = 'Lock' AND query LIKE '%queuebox_schema_history%'";
  ASSERT_TRUE(WaitFor([&] { return Scalar(db.url(), waiting) == 1; }, 20s)) << relay.Log();
  EXPECT_EQ(Scalar(db.url(),
                   "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname "
                   "= current_database() AND wait_event_type = 'Lock' AND query LIKE "
                   "'%queuebox_schema_history%'"),
            1);
  ASSERT_TRUE(WaitFor(
      [&] {
        return relay.Log().find("lost during start-up") != std::string::npos &&
               Scalar(db.url(), waiting) == 1;
      },
      20s))
      << relay.Log();
  EXPECT_TRUE(relay.running());
  PQclear(PQexec(holder, "SELECT pg_advisory_unlock(hashtext('queuebox_schema_history'))"));
  PQfinish(holder);
  ASSERT_TRUE(WaitFor([&] { return ReadyStatus(http_port) == 200; }, 30s)) << relay.Log();
  db.Exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{\"n\":1}')");
  ASSERT_TRUE(receiver.WaitForRequests(1, 30s)) << relay.Log();
  EXPECT_EQ(relay.Log().find("did not start"), std::string::npos) << relay.Log();
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(20s), std::optional<int>(0)) << relay.Log();
}

// Shutdown (docs/guarantees.md §12): SIGTERM while the destination holds every message of a
// batch. Readiness turns 503 at once, the relay keeps running until the held messages are
// answered, writes their outcomes, then exits 0.
TEST(OutageE2ETest, SigtermWithMessagesInFlightTurnsReadiness503FinishesThemAndExits0) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
  testing::TempPgDatabase pg(url);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::mutex mu;
  std::condition_variable arrival;
  int arrived = 0;  // requests the receiver holds
  HttpReceiver receiver;
  receiver.SetResponder([&, released](const testing::ReceivedRequest&) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++arrived;
    }
    arrival.notify_all();
    released.wait_for(60s);  // bounded: a failed test must not hang the receiver
    return testing::ReceiverResponse{204, "", "text/plain", {}, 0ms};
  });
  ASSERT_TRUE(receiver.Start().ok());
  TempDir dir;
  int http_port = testing::UnusedLoopbackPort();
  std::string config = Config(pg.url(), receiver.BaseUrl(), http_port, 100);
  config.replace(config.find("timeoutMs: 2000"), 15, "timeoutMs: 60000");
  dir.Write("q.yml", config);
  std::string out;
  ASSERT_EQ(testing::RunCommand(kBinary, {"--config", dir.File("q.yml"), "migrate"}, {}, &out), 0)
      << out;
  pg.Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || i, '{}' "
      "FROM generate_series(1, 5) i");
  ChildProcess relay(kBinary, {"--config", dir.File("q.yml"), "run"}, {}, dir.File("relay.log"));
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(arrival.wait_for(lock, 30s, [&] { return arrived == 5; })) << relay.Log();
  }
  ASSERT_TRUE(WaitFor([&] { return ReadyStatus(http_port) == 200; }, 20s)) << relay.Log();
  relay.Kill(SIGTERM);
  EXPECT_TRUE(WaitFor([&] { return ReadyStatus(http_port) == 503; }, 20s))
      << "readiness turns 503 while in-flight messages finish\n"
      << relay.Log();
  EXPECT_TRUE(relay.running()) << "the relay waits for its in-flight messages";
  EXPECT_EQ(pg.Scalar("SELECT count(*) FROM outbox WHERE state = 'processing'"), "5");
  release.set_value();
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  EXPECT_EQ(pg.Scalar("SELECT count(*) FROM outbox WHERE state = 'sent'"), "5");
  EXPECT_EQ(receiver.RequestCount(), 5u);
}

}  // namespace
}  // namespace queuebox
