// End to end: the queuebox binary against a real PostgreSQL and a real HTTP receiver on loopback.
// Failure scenarios of ../shared/spec/scenarios.md carry their number in the test name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
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
using testing::ReceiverResponse;
using testing::TempDir;
using testing::TempPgDatabase;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);

struct RelaySettings {
  int batch_size = 50;
  int concurrency = 8;
  int64_t claim_timeout_ms = 30000;
  int64_t retry_base_delay_ms = 100;
  int64_t http_timeout_ms = 10000;
  std::string path = "/events";  // the destination's path (tells replicas apart)
  bool strict = false;           // outbox.ordering: strict
  int64_t pending_gauge_interval_ms = 5000;
};

class RelayE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    pg_ = std::make_unique<TempPgDatabase>(url);
    ASSERT_TRUE(receiver_.Start().ok());
  }

  // Writes a configuration for one replica and returns its path.
  std::string WriteConfig(const RelaySettings& s, const std::string& name) {
    std::string yaml =
        "database:\n  type: postgresql\n  url: " + pg_->url() +
        "\n  startupTimeoutMs: 20000\n"
        "server:\n  address: 127.0.0.1\n  httpPort: " +
        std::to_string(testing::UnusedLoopbackPort()) +
        "\noutbox:\n  pollIntervalMs: 50\n  batchSize: " + std::to_string(s.batch_size) +
        "\n  concurrency: " + std::to_string(s.concurrency) +
        "\n  claimTimeoutMs: " + std::to_string(s.claim_timeout_ms) +
        "\n  retryBaseDelayMs: " + std::to_string(s.retry_base_delay_ms) +
        "\n  shutdownTimeoutMs: 5000\n" + (s.strict ? "  ordering: strict\n" : "") +
        (s.pending_gauge_interval_ms != 5000
             ? "  pendingGaugeIntervalMs: " + std::to_string(s.pending_gauge_interval_ms) + "\n"
             : "") +
        "routes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
        "destinations:\n  receiver:\n    type: http\n    baseUrl: " +
        receiver_.BaseUrl() + "\n    path: " + s.path +
        "\n    timeoutMs: " + std::to_string(s.http_timeout_ms) +
        "\n    headers:\n      X-Static: yes\n"
        "logging:\n  format: json\n  level: info\n";
    dir_.Write(name + ".yml", yaml);
    return dir_.File(name + ".yml");
  }

  void Migrate(const std::string& config) {
    std::string out;
    ASSERT_EQ(testing::RunCommand(kBinary, {"--config", config, "migrate"}, {}, &out), 0) << out;
  }

  std::unique_ptr<ChildProcess> StartReplica(const std::string& config, const std::string& name) {
    return std::make_unique<ChildProcess>(
        kBinary, std::vector<std::string>{"--config", config, "run"},
        std::map<std::string, std::string>{}, dir_.File(name + ".log"));
  }

  // Inserts `per_key` rows for each of `keys` keys, interleaved, one transaction per statement.
  void InsertRows(int keys, int per_key, const std::string& topic = "order.created") {
    std::string sql = "INSERT INTO outbox (topic, key, payload) SELECT '" + topic +
                      "', 'key-' || (i % " + std::to_string(keys) +
                      "), jsonb_build_object('i', i) FROM generate_series(0, " +
                      std::to_string(keys * per_key - 1) + ") AS i";
    pg_->Exec(sql);
  }

  int64_t Count(const std::string& where) {
    return std::stoll(pg_->Scalar("SELECT count(*) FROM outbox WHERE " + where));
  }

  // Waits until every row is sent (true) or the timeout passes.
  bool WaitAllSent(std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (Count("state <> 'sent'") == 0) return true;
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  // Checks at-least-once and per-key order over what the receiver got: every row's id arrived,
  // and per key the deliveries, with a redelivery of the row just delivered collapsed, follow
  // insert order. Returns the number of duplicate deliveries.
  int64_t CheckDeliveredInKeyOrder() {
    std::map<std::string, std::pair<std::string, int64_t>> rows;  // id -> (key, sequence)
    for (const auto& r : pg_->Query("SELECT id, key, sequence FROM outbox")) {
      rows[r[0]] = {r[1], std::stoll(r[2])};
    }
    std::map<std::string, int64_t> last;  // key -> last sequence delivered
    std::set<std::string> seen;
    int64_t duplicates = 0;
    for (const auto& req : receiver_.Requests()) {
      std::string id = req.Header("X-Message-Id");
      auto it = rows.find(id);
      EXPECT_NE(it, rows.end()) << "unknown id " << id;
      if (it == rows.end()) continue;
      const auto& [key, seq] = it->second;
      if (!seen.insert(id).second) {
        ++duplicates;
        // A redelivery after a crash repeats a row at or before the key's last delivery.
        EXPECT_LE(seq, last[key]) << "key " << key;
        continue;
      }
      EXPECT_GT(seq, last[key]) << "key " << key << " delivered out of insert order";
      last[key] = seq;
    }
    EXPECT_EQ(seen.size(), rows.size()) << "every row arrives at least once";
    return duplicates;
  }

  std::unique_ptr<TempPgDatabase> pg_;
  HttpReceiver receiver_;
  TempDir dir_;
};

TEST_F(RelayE2ETest, DeliversRowsOverHttpWithQueueBoxHeaders) {
  std::string config = WriteConfig({}, "a");
  Migrate(config);
  pg_->Exec(
      "INSERT INTO outbox (topic, key, payload, headers, aggregate_type) VALUES ('order.created', "
      "'cust-42', '{\"orderId\":\"1111\",\"amount\":99.99}'::jsonb, "
      "'{\"X-Tenant\":\"acme\"}'::jsonb, "
      "'order')");
  pg_->Exec("INSERT INTO outbox (topic, payload) VALUES ('invoice.issued', '{\"n\":1}')");
  auto relay = StartReplica(config, "a");
  ASSERT_TRUE(receiver_.WaitForRequests(2, 30s)) << relay->Log();
  ASSERT_TRUE(WaitAllSent(30s)) << relay->Log();
  auto reqs = receiver_.Requests();
  std::map<std::string, testing::ReceivedRequest> by_topic;
  for (const auto& r : reqs) by_topic[r.Header("X-Topic")] = r;
  const auto& order = by_topic.at("order.created");
  EXPECT_EQ(order.method, "POST");
  EXPECT_EQ(order.target, "/events");
  EXPECT_EQ(order.Header("Content-Type"), "application/json");
  EXPECT_EQ(order.Header("X-Attempt"), "0");
  EXPECT_EQ(order.Header("X-Message-Key"), "cust-42");
  EXPECT_EQ(order.Header("X-Tenant"), "acme");
  EXPECT_EQ(order.Header("X-Static"), "yes");
  EXPECT_EQ(order.Header("X-Message-Id"),
            pg_->Scalar("SELECT id FROM outbox WHERE topic = 'order.created'"));
  EXPECT_EQ(nlohmann::json::parse(order.body),
            nlohmann::json::parse(R"({"orderId":"1111","amount":99.99})"));
  EXPECT_FALSE(by_topic.at("invoice.issued").HasHeader("X-Message-Key"));
  relay->Kill(SIGTERM);
  EXPECT_EQ(relay->Wait(20s), std::optional<int>(0)) << relay->Log();
}

TEST_F(RelayE2ETest, RetriesThenDeadLettersAtTheRowCeiling) {
  receiver_.SetDefaultResponse({500, "boom password=hunter2", "text/plain", {}, 0ms});
  RelaySettings s;
  s.retry_base_delay_ms = 20;
  std::string config = WriteConfig(s, "a");
  Migrate(config);
  pg_->Exec("INSERT INTO outbox (topic, payload, max_attempts) VALUES ('t', '{}', 2)");
  auto relay = StartReplica(config, "a");
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (Count("state = 'dead'") == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(Count("state = 'dead'"), 1) << relay->Log();
  EXPECT_EQ(pg_->Scalar("SELECT attempt FROM outbox"), "2");
  std::string last_error = pg_->Scalar("SELECT last_error FROM outbox");
  EXPECT_THAT(last_error, HasSubstr("HTTP 500"));
  EXPECT_THAT(last_error, ::testing::Not(HasSubstr("hunter2")));
  EXPECT_EQ(receiver_.RequestCount(), 3u);  // max_attempts + 1 deliveries
  EXPECT_THAT(relay->Log(), ::testing::Not(HasSubstr("hunter2")));
}

// S9: the relay claims rows, delivers some and is killed; after the lease the rest arrive.
TEST_F(RelayE2ETest, S9_RestartInTheMiddleOfABatchLosesNothing) {
  receiver_.SetDefaultResponse({204, "", "text/plain", {}, 20ms});
  RelaySettings s;
  s.batch_size = 100;
  s.concurrency = 100;
  s.claim_timeout_ms = 2000;
  std::string config = WriteConfig(s, "a");
  Migrate(config);
  InsertRows(10, 60);
  auto relay = StartReplica(config, "a");
  ASSERT_TRUE(receiver_.WaitForRequests(150, 60s)) << relay->Log();
  relay->Kill(SIGKILL);
  relay->Wait(10s);
  EXPECT_GT(Count("state = 'processing'"), 0) << "the kill should leave claimed rows behind";
  auto again = StartReplica(config, "b");
  ASSERT_TRUE(WaitAllSent(120s)) << again->Log();
  CheckDeliveredInKeyOrder();
  EXPECT_EQ(Count("state = 'processing'"), 0);
}

// S8: four replicas share the outbox; one is killed with SIGKILL and restarted every 2 s.
TEST_F(RelayE2ETest, S8_ReplicasKilledWhileTheyWorkDeliverEveryRowInKeyOrder) {
  receiver_.SetDefaultResponse({204, "", "text/plain", {}, 10ms});
  RelaySettings s;
  s.claim_timeout_ms = 2000;
  s.concurrency = 16;
  std::string config[4];
  for (int i = 0; i < 4; ++i) config[i] = WriteConfig(s, "r" + std::to_string(i));
  Migrate(config[0]);
  InsertRows(100, 100);
  std::unique_ptr<ChildProcess> replicas[4];
  for (int i = 0; i < 4; ++i) replicas[i] = StartReplica(config[i], "r" + std::to_string(i));
  int kills = 0;
  auto deadline = std::chrono::steady_clock::now() + 240s;
  while (Count("state <> 'sent'") > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(2s);
    int victim = kills % 4;
    replicas[victim]->Kill(SIGKILL);
    replicas[victim]->Wait(10s);
    replicas[victim] =
        StartReplica(config[victim], "r" + std::to_string(victim) + "-" + std::to_string(kills));
    ++kills;
  }
  ASSERT_TRUE(WaitAllSent(120s));
  EXPECT_GE(kills, 1);
  int64_t duplicates = CheckDeliveredInKeyOrder();
  EXPECT_EQ(Count("state = 'processing'"), 0);
  RecordProperty("kills", kills);
  RecordProperty("duplicates", static_cast<int>(duplicates));
}

// Key affinity (docs/operations.md "Replicas"): two replicas register in queuebox_relay_replicas,
// split the keys (every key's rows arrive from one replica only), keep per-key order, and leave
// the table at a graceful stop.
TEST_F(RelayE2ETest, TwoReplicasSplitTheKeysAndLeaveAtAGracefulStop) {
  receiver_.SetDefaultResponse({204, "", "text/plain", {}, 0ms});
  RelaySettings a, b;
  a.path = "/from-a";
  b.path = "/from-b";
  const std::string config_a = WriteConfig(a, "a"), config_b = WriteConfig(b, "b");
  Migrate(config_a);
  auto replica_a = StartReplica(config_a, "a");
  auto replica_b = StartReplica(config_b, "b");
  // Both registered and each has seen the other (a share of 2 logged by both).
  auto deadline = std::chrono::steady_clock::now() + 30s;
  auto sees_two = [](const std::string& log) {
    return log.find("\"replicas\":\"2\"") != std::string::npos;
  };
  while (!(sees_two(replica_a->Log()) && sees_two(replica_b->Log())) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(sees_two(replica_a->Log())) << replica_a->Log();
  ASSERT_TRUE(sees_two(replica_b->Log())) << replica_b->Log();
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM queuebox_relay_replicas"), "2");

  InsertRows(40, 25);
  ASSERT_TRUE(WaitAllSent(120s));
  EXPECT_EQ(CheckDeliveredInKeyOrder(), 0);
  std::map<std::string, std::set<std::string>> paths_per_key;
  for (const auto& req : receiver_.Requests()) {
    paths_per_key[req.Header("X-Message-Key")].insert(req.target);
  }
  EXPECT_EQ(paths_per_key.size(), 40u);
  std::set<std::string> paths;
  for (const auto& [key, p] : paths_per_key) {
    EXPECT_EQ(p.size(), 1u) << "key " << key << " was delivered by both replicas";
    paths.insert(p.begin(), p.end());
  }
  EXPECT_EQ(paths, (std::set<std::string>{"/from-a", "/from-b"}));

  replica_a->Kill(SIGTERM);
  replica_b->Kill(SIGTERM);
  EXPECT_EQ(replica_a->Wait(30s), 0);
  EXPECT_EQ(replica_b->Wait(30s), 0);
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM queuebox_relay_replicas"), "0");
}

// `run --until-idle` stops when nothing is left to claim in the whole outbox: it takes no share
// under key affinity, so another live replica's keys do not make it stop early.
TEST_F(RelayE2ETest, UntilIdleDrainsEveryKeyWhileAnotherReplicaIsLive) {
  receiver_.SetDefaultResponse({204, "", "text/plain", {}, 0ms});
  const std::string config = WriteConfig(RelaySettings{}, "idle");
  Migrate(config);
  // Another replica of this outbox, live for an hour (it never claims).
  pg_->Exec(
      "INSERT INTO queuebox_relay_replicas (replica_id, outbox_table, name, started_at, "
      "heartbeat_at, expires_at) VALUES (gen_random_uuid(), 'outbox', 'other:1', "
      "clock_timestamp(), clock_timestamp(), clock_timestamp() + interval '1 hour')");
  InsertRows(30, 10);
  std::string out;
  ASSERT_EQ(
      testing::RunCommand(kBinary, {"--config", config, "run", "--until-idle"}, {}, &out, 120s), 0)
      << out;
  EXPECT_EQ(Count("state <> 'sent'"), 0) << out;
  EXPECT_EQ(CheckDeliveredInKeyOrder(), 0);
}

// S5: one producer writes e1..e1000 for one key, one transaction each, while other keys carry
// traffic; concurrency 8; two replicas. The key's rows arrive in order.
TEST_F(RelayE2ETest, S5_OrderForOneKeyUnderParallelWorkers) {
  RelaySettings s;
  s.concurrency = 8;
  std::string a = WriteConfig(s, "a"), b = WriteConfig(s, "b");
  Migrate(a);
  auto r1 = StartReplica(a, "a");
  auto r2 = StartReplica(b, "b");
  PGconn* conn = PQconnectdb(pg_->url().c_str());
  ASSERT_EQ(PQstatus(conn), CONNECTION_OK);
  for (int i = 1; i <= 1000; ++i) {
    std::string sql =
        "INSERT INTO outbox (topic, key, payload) VALUES ('e', 'k', '{\"e\":" + std::to_string(i) +
        "}'); INSERT INTO outbox (topic, key, payload) VALUES "
        "('other', 'o" +
        std::to_string(i % 17) + "', '{}')";
    PGresult* r = PQexec(conn, sql.c_str());
    ASSERT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(conn);
    PQclear(r);
  }
  PQfinish(conn);
  ASSERT_TRUE(WaitAllSent(120s)) << r1->Log() << r2->Log();
  std::vector<int> order;
  for (const auto& req : receiver_.Requests()) {
    if (req.Header("X-Topic") == "e") order.push_back(nlohmann::json::parse(req.body)["e"]);
  }
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(order[i], i + 1) << "position " << i;
}

// S3: a lease of 2 s, a destination that takes 500 ms per message, batch 10, two replicas:
// the owner renews, so no second replica takes a live row and nothing is delivered twice.
TEST_F(RelayE2ETest, S3_LeaseRenewedDuringASlowPublish) {
  receiver_.SetDefaultResponse({204, "", "text/plain", {}, 2500ms});
  RelaySettings s;
  s.batch_size = 10;
  s.concurrency = 10;
  s.claim_timeout_ms = 2000;
  std::string a = WriteConfig(s, "a"), b = WriteConfig(s, "b");
  Migrate(a);
  InsertRows(20, 1);
  auto r1 = StartReplica(a, "a");
  auto r2 = StartReplica(b, "b");
  ASSERT_TRUE(WaitAllSent(60s)) << r1->Log() << r2->Log();
  std::set<std::string> ids;
  for (const auto& req : receiver_.Requests()) {
    EXPECT_TRUE(ids.insert(req.Header("X-Message-Id")).second)
        << "delivered twice: " << req.Header("X-Message-Id");
  }
  EXPECT_EQ(ids.size(), 20u);
  EXPECT_THAT(r1->Log() + r2->Log(),
              ::testing::Not(HasSubstr("claim on the message was already lost")));
}

// S10: replica A claims rows and publishes slowly; replica B starts (its reclaim runs) and
// takes only rows whose lease expired on the database clock, never one A still holds.
TEST_F(RelayE2ETest, S10_AStartingReplicaNeverTakesALiveClaim) {
  receiver_.SetDefaultResponse({204, "", "text/plain", {}, 1500ms});
  RelaySettings s;
  s.batch_size = 100;
  s.concurrency = 100;
  s.claim_timeout_ms = 5000;
  std::string a = WriteConfig(s, "a"), b = WriteConfig(s, "b");
  Migrate(a);
  InsertRows(50, 1);
  auto ra = StartReplica(a, "a");
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (Count("state = 'processing'") < 50 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(Count("state = 'processing'"), 50);
  auto rb = StartReplica(b, "b");
  ASSERT_TRUE(WaitAllSent(60s)) << ra->Log() << rb->Log();
  EXPECT_EQ(receiver_.RequestCount(), 50u) << "B must not take A's live claims";
}

// S1: transaction T1 inserts A (key k) and stays open 2 s; T2 inserts B (key k) and commits;
// then T1 commits. Both are delivered: B first (it was the only committed head), then A, which
// becomes claimable when it commits (its lower sequence does not stop it: B is already sent).
// Then 20 writers with random sleeps insert into 10 keys for 10 s: delivered set = committed set.
TEST_F(RelayE2ETest, S1_OverlappingCommitsForOneKeySkipNothing) {
  std::string config = WriteConfig({}, "a");
  Migrate(config);
  auto relay = StartReplica(config, "a");
  PGconn* t1 = PQconnectdb(pg_->url().c_str());
  PGconn* t2 = PQconnectdb(pg_->url().c_str());
  ASSERT_EQ(PQstatus(t1), CONNECTION_OK);
  PQclear(PQexec(t1,
                 "BEGIN; INSERT INTO outbox (topic, key, payload) VALUES ('s1', 'k', "
                 "'{\"row\":\"A\"}')"));
  PQclear(PQexec(t2,
                 "INSERT INTO outbox (topic, key, payload) VALUES ('s1', 'k', "
                 "'{\"row\":\"B\"}')"));
  ASSERT_TRUE(receiver_.WaitForRequests(1, 30s)) << relay->Log();
  std::this_thread::sleep_for(2s);
  PQclear(PQexec(t1, "COMMIT"));
  PQfinish(t1);
  PQfinish(t2);
  ASSERT_TRUE(receiver_.WaitForRequests(2, 30s)) << relay->Log();
  auto reqs = receiver_.Requests();
  EXPECT_EQ(nlohmann::json::parse(reqs[0].body)["row"], "B");
  EXPECT_EQ(nlohmann::json::parse(reqs[1].body)["row"], "A");

  std::atomic<int64_t> committed{0};
  std::vector<std::thread> writers;
  auto until = std::chrono::steady_clock::now() + 10s;
  for (int w = 0; w < 20; ++w) {
    writers.emplace_back([&, w] {
      PGconn* c = PQconnectdb(pg_->url().c_str());
      unsigned seed = static_cast<unsigned>(w) * 7919u;
      while (std::chrono::steady_clock::now() < until) {
        seed = seed * 1103515245u + 12345u;
        std::string sql = "BEGIN; INSERT INTO outbox (topic, key, payload) VALUES ('s1m', 'k" +
                          std::to_string(seed % 10) + "', '{}'); SELECT pg_sleep(" +
                          std::to_string((seed >> 8) % 50 / 1000.0) + "); COMMIT";
        PGresult* r = PQexec(c, sql.c_str());
        if (PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK) {
          ++committed;
        }
        PQclear(r);
      }
      PQfinish(c);
    });
  }
  for (auto& t : writers) t.join();
  ASSERT_TRUE(WaitAllSent(60s)) << relay->Log();
  std::set<std::string> delivered;
  for (const auto& req : receiver_.Requests()) {
    if (req.Header("X-Topic") == "s1m") delivered.insert(req.Header("X-Message-Id"));
  }
  EXPECT_EQ(static_cast<int64_t>(delivered.size()), committed.load());
  EXPECT_EQ(Count("topic = 's1m'"), committed.load());
}

// S1 under outbox.ordering: strict (docs/claim.md, "Strict order"): T1 inserts A (key k) and
// stays open; B (key k) and then C (no key) commit. C is delivered and B is not: the claim that
// took C saw B and held it back. While T1 is open, `queuebox status` and the metric name it.
// T1 commits: A, then B.
TEST_F(RelayE2ETest, StrictOrder_AnOpenLowerSequenceHoldsItsKeyUntilItCommits) {
  RelaySettings settings;
  settings.strict = true;
  settings.pending_gauge_interval_ms = 50;
  std::string config = WriteConfig(settings, "a");
  Migrate(config);
  auto relay = StartReplica(config, "a");
  PGconn* t1 = PQconnectdb(pg_->url().c_str());
  ASSERT_EQ(PQstatus(t1), CONNECTION_OK);
  PQclear(PQexec(t1,
                 "BEGIN; INSERT INTO outbox (topic, key, payload) VALUES ('s1', 'k', "
                 "'{\"row\":\"A\"}')"));
  pg_->Exec("INSERT INTO outbox (topic, key, payload) VALUES ('s1', 'k', '{\"row\":\"B\"}')");
  pg_->Exec("INSERT INTO outbox (topic, payload) VALUES ('s1', '{\"row\":\"C\"}')");
  ASSERT_TRUE(receiver_.WaitForRequests(1, 30s)) << relay->Log();
  EXPECT_EQ(nlohmann::json::parse(receiver_.Requests()[0].body)["row"], "C");
  EXPECT_EQ(Count("payload->>'row' = 'B' AND state = 'pending'"), 1);

  std::string out;
  ASSERT_EQ(testing::RunCommand(kBinary, {"--config", config, "status", "--json"}, {}, &out), 0)
      << out;
  auto status = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(status["strictOrder"]["oldestBlockingTransaction"]["pid"], PQbackendPID(t1)) << out;
  std::ifstream config_file(config);
  const std::string yaml((std::istreambuf_iterator<char>(config_file)),
                         std::istreambuf_iterator<char>());
  const size_t at = yaml.find("httpPort: ") + 10;
  httplib::Client admin("127.0.0.1", std::stoi(yaml.substr(at, yaml.find('\n', at) - at)));
  auto metrics = admin.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("queuebox_outbox_strict_blocking_transaction_pid " +
                                       std::to_string(PQbackendPID(t1))));

  PQclear(PQexec(t1, "COMMIT"));
  PQfinish(t1);
  ASSERT_TRUE(receiver_.WaitForRequests(3, 30s)) << relay->Log();
  auto reqs = receiver_.Requests();
  EXPECT_EQ(nlohmann::json::parse(reqs[1].body)["row"], "A");
  EXPECT_EQ(nlohmann::json::parse(reqs[2].body)["row"], "B");
}

// Strict order against overlapping writers on two replicas: 6 writers, each transaction one row
// of 3 keys and a random wait of up to 150 ms before its commit, for 3 s (few enough rows that
// the relays keep up and meet rows committed out of sequence order). Every row is delivered once
// and each key's deliveries follow its sequence (with `sequence` ordering, S1 shows they need not).
TEST_F(RelayE2ETest, StrictOrder_OverlappingWritersOnTwoReplicasDeliverEachKeyInSequence) {
  RelaySettings settings;
  settings.strict = true;
  std::string a = WriteConfig(settings, "a");
  std::string b = WriteConfig(settings, "b");
  Migrate(a);
  auto ra = StartReplica(a, "a");
  auto rb = StartReplica(b, "b");
  std::vector<std::thread> writers;
  auto until = std::chrono::steady_clock::now() + 3s;
  for (int w = 0; w < 6; ++w) {
    writers.emplace_back([&, w] {
      PGconn* c = PQconnectdb(pg_->url().c_str());
      unsigned seed = static_cast<unsigned>(w) * 7919u + 17u;
      while (std::chrono::steady_clock::now() < until) {
        seed = seed * 1103515245u + 12345u;
        std::string sql = "BEGIN; INSERT INTO outbox (topic, key, payload) VALUES ('strict', 'k" +
                          std::to_string(seed % 3) + "', '{}'); SELECT pg_sleep(" +
                          std::to_string((seed >> 8) % 150 / 1000.0) + "); COMMIT";
        PQclear(PQexec(c, sql.c_str()));
      }
      PQfinish(c);
    });
  }
  for (auto& t : writers) t.join();
  ASSERT_TRUE(WaitAllSent(60s)) << ra->Log() << rb->Log();
  EXPECT_GT(Count("true"), 50);
  EXPECT_EQ(CheckDeliveredInKeyOrder(), 0);
}

TEST_F(RelayE2ETest, StartFailsNamingStartupTimeoutWhenTheDatabaseNeverAnswers) {
  int port = testing::UnusedLoopbackPort();
  dir_.Write("bad.yml", "database:\n  type: postgresql\n  url: postgresql://postgres@127.0.0.1:" +
                            std::to_string(port) + "/x\n  startupTimeoutMs: 1000\n");
  std::string out;
  int code = testing::RunCommand(kBinary, {"--config", dir_.File("bad.yml"), "run"}, {}, &out);
  EXPECT_NE(code, 0);
  EXPECT_THAT(out, HasSubstr("database.startupTimeoutMs"));
}

TEST_F(RelayE2ETest, AnInvalidConfigurationListsEveryProblem) {
  dir_.Write("bad.yml",
             "database:\n  type: sqlite\n  url: x.db\noutbox:\n  batchSzie: 3\n  concurrency: -1\n"
             "routes:\n  - topicPattern: \"a.*\"\n    destination: nowhere\n");
  std::string out;
  int code =
      testing::RunCommand(kBinary, {"--config", dir_.File("bad.yml"), "check-config"}, {}, &out);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(out, HasSubstr("The configuration has 3 errors"));
  EXPECT_THAT(out, HasSubstr("outbox.batchSzie"));
  EXPECT_THAT(out, HasSubstr("batchSize"));
  EXPECT_THAT(out, HasSubstr("outbox.concurrency"));
  EXPECT_THAT(out, HasSubstr("routes[0].destination"));
}

}  // namespace
}  // namespace queuebox
