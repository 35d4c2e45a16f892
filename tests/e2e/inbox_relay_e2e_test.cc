// End to end for the inbox relay: the queuebox binary receives webhooks (an http source), the
// inbox relay forwards each into the outbox, and the outbox relay delivers it to a real HTTP
// receiver on loopback. Failure scenarios of ../shared/spec/scenarios.md carry their number in
// the test name (S8/S9 here are the outbox's kill scenarios applied to the inbox relay). Each test
// runs on PostgreSQL (a throw-away database on the test server) and on SQLite (a file).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "queuebox/inbox/database.h"
#include "testing/broker_testing.h"
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
using testing::WaitUntil;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);

int GetStatus(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  auto r = c.Get(path);
  return r ? r->status : -1;
}

// The test's database: a throw-away PostgreSQL database on the test server, or an SQLite file;
// `url` is what the binary's configuration takes. Plain SQL for the checks, in either dialect.
struct TestDatabase {
  std::string type, url;
  std::unique_ptr<TempPgDatabase> pg;
  std::unique_ptr<inbox::ConnectionFactory> factory;
  std::unique_ptr<inbox::Connection> conn;

  void Exec(const std::string& sql) {
    auto r = conn->Execute(sql);
    ASSERT_TRUE(r.ok()) << r.status().message() << " in " << sql;
  }
  std::vector<std::vector<std::string>> Query(const std::string& sql) {
    std::vector<std::vector<std::string>> out;
    auto r = conn->Query(sql);
    EXPECT_TRUE(r.ok()) << r.status().message() << " in " << sql;
    if (!r.ok()) return out;
    for (const auto& row : r->rows) {
      std::vector<std::string> values;
      for (const auto& v : row) values.push_back(v.value_or("<null>"));
      out.push_back(std::move(values));
    }
    return out;
  }
  std::string Scalar(const std::string& sql) {
    auto rows = Query(sql);
    return rows.empty() || rows[0].empty() ? "" : rows[0][0];
  }
  int64_t Count(const std::string& sql) {
    const std::string n = Scalar(sql);
    return n.empty() ? -1 : std::stoll(n);
  }
};

// Opens `db` of `type` ("postgresql" or "sqlite", a file in `dir`); skips (or fails in CI) when
// PostgreSQL is asked for and no server is configured.
void OpenTestDatabase(const std::string& type, const TempDir& dir, TestDatabase* db) {
  db->type = type;
  if (type == "postgresql") {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    db->pg = std::make_unique<TempPgDatabase>(url);
    db->url = db->pg->url();
    db->factory = inbox::PostgresConnections(db->url);
  } else {
    db->url = dir.File("queuebox.db");
    db->factory = inbox::SqliteConnections(db->url);
  }
  auto conn = db->factory->Open();
  ASSERT_TRUE(conn.ok()) << conn.status().message();
  db->conn = std::move(*conn);
}

// One webhook a poster got a definite answer for: 202 (stored now) or 200 duplicate (stored by
// an earlier attempt whose answer the kill cut off).
struct Posted {
  std::string key;         // idempotency key
  std::string aggregate;   // aggregate id
  int seq = 0;             // position in its aggregate's stream
  int status = 0;          // 202 or 200
  std::string message_id;  // from the 202's body
};

// The parameter: the database type, "postgresql" or "sqlite".
class InboxRelayE2ETest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    OpenTestDatabase(GetParam(), dir_, &db_);
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(receiver_.Start().ok());
  }

  // Replica `replica`'s configuration: its own data port, the `orders` webhook source, short
  // leases, and every topic routed to the receiver. Call in replica order from 0.
  std::string WriteConfig(int replica) {
    ports_.push_back(testing::UnusedLoopbackPort());
    const std::string yaml =
        "database:\n  type: " + db_.type + "\n  url: " + db_.url +
        "\n  startupTimeoutMs: 20000\n"
        "server:\n  address: 127.0.0.1\n  httpPort: " +
        std::to_string(ports_[replica]) +
        "\noutbox:\n  pollIntervalMs: 50\n  batchSize: 50\n  concurrency: 8\n"
        "  claimTimeoutMs: 2000\n  retryBaseDelayMs: 100\n  shutdownTimeoutMs: 5000\n"
        "inbox:\n  basePath: /inbox\n  relay:\n    pollIntervalMs: 50\n    batchSize: 20\n"
        "    claimTimeoutMs: 2000\n"
        "sources:\n  orders:\n    path: /orders\n    idempotencyKeyPath: $.id\n"
        "    aggregateIdPath: $.aggregate\n    eventTypePath: $.type\n"
        "routes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
        "destinations:\n  receiver:\n    type: http\n    baseUrl: " +
        receiver_.BaseUrl() +
        "\n    path: /events\n    timeoutMs: 10000\n"
        "logging:\n  format: json\n  level: info\n";
    const std::string name = "r" + std::to_string(replica) + ".yml";
    dir_.Write(name, yaml);
    return dir_.File(name);
  }

  std::unique_ptr<ChildProcess> Start(const std::string& config, const std::string& name) {
    return std::make_unique<ChildProcess>(
        kBinary, std::vector<std::string>{"--config", config, "run"},
        std::map<std::string, std::string>{}, dir_.File(name + ".log"));
  }

  int64_t Count(const std::string& sql) { return db_.Count(sql); }

  // Posts `aggregates` streams of events, one after the other per stream, until `stop`, to the
  // replicas in turn (as a load balancer would). Each event is posted again (same id, to the next
  // replica) until it gets a definite answer, so every event is stored exactly once and event n+1
  // of a stream is stored only after event n.
  void Post(int poster, int aggregates, const std::atomic<bool>& stop) {
    std::vector<std::unique_ptr<httplib::Client>> clients;
    for (int port : ports_) {
      clients.push_back(std::make_unique<httplib::Client>("127.0.0.1", port));
      clients.back()->set_connection_timeout(1);
      clients.back()->set_read_timeout(10);
    }
    size_t target = static_cast<size_t>(poster);
    for (int n = 0; !stop.load(); ++n) {
      Posted p;
      p.aggregate = "agg-" + std::to_string(poster) + "-" + std::to_string(n % aggregates);
      p.seq = n / aggregates;
      p.key = "evt-" + std::to_string(poster) + "-" + std::to_string(n);
      const std::string body = nlohmann::json{
          {"id", p.key},
          {"aggregate", p.aggregate},
          {"type", "order.updated"},
          {"seq", p.seq}}.dump();
      for (;; ++target) {
        auto r = clients[target % clients.size()]->Post("/inbox/orders", body, "application/json");
        if (r && (r->status == 202 || r->status == 200)) {
          p.status = r->status;
          if (r->status == 202)
            p.message_id = nlohmann::json::parse(r->body).value("messageId", "");
          break;
        }
        if (r && r->status != 500 && r->status != 503) {
          ADD_FAILURE() << "unexpected answer " << r->status << " " << r->body;
          return;
        }
        // No answer: the replica is down (killed) or restarting. Try the same event again.
        std::this_thread::sleep_for(10ms);
      }
      ++target;
      std::lock_guard<std::mutex> lock(mu_);
      posted_.push_back(std::move(p));
    }
  }

  struct Outcome {
    int duplicate_after_kill = 0;  // 200 duplicate for a post whose first answer was cut off
    int redeliveries = 0;          // deliveries of an outbox row after its first
  };

  // Once everything is forwarded and sent: every answered webhook is one inbox row, processed,
  // and exactly one outbox row; each aggregate's events are in the outbox in posting order (the
  // key order) and reach the receiver in that order.
  // `min_posted`: the webhooks the test's own waits guarantee were answered.
  Outcome CheckEveryWebhookIsOneOutboxRowInAggregateOrder(int min_posted) {
    // Every answered webhook is one inbox row, processed; nothing else is in the inbox.
    std::map<std::string, Posted> by_key;
    int duplicate_after_kill = 0;
    for (const Posted& p : posted_) {
      EXPECT_TRUE(by_key.emplace(p.key, p).second) << p.key;
      if (p.status == 200) ++duplicate_after_kill;
    }
    EXPECT_GE(static_cast<int>(posted_.size()), min_posted);
    std::map<std::string, std::string> inbox_id_of;  // idempotency key -> inbox id
    for (const auto& r : db_.Query("SELECT idempotency_key, id, state FROM inbox")) {
      EXPECT_EQ(r[2], "processed") << r[0];
      EXPECT_TRUE(by_key.count(r[0])) << "an inbox row nobody posted: " << r[0];
      inbox_id_of[r[0]] = r[1];
    }
    EXPECT_EQ(inbox_id_of.size(), posted_.size());
    for (const auto& [key, p] : by_key) {
      if (p.status == 202) {
        EXPECT_EQ(inbox_id_of[key], p.message_id) << key;
      }
    }

    // Exactly one outbox row per inbox row; per aggregate, in posting order by the key's sequence.
    std::map<std::string, int> outbox_rows_of;  // inbox id -> outbox rows
    std::map<std::string, int> last_seq;        // aggregate -> seq of its last outbox row
    std::map<std::string, std::string> aggregate_of_outbox;  // outbox id -> aggregate
    for (const auto& r :
         db_.Query("SELECT headers, key, payload, id FROM outbox ORDER BY sequence")) {
      const nlohmann::json headers = nlohmann::json::parse(r[0]);
      ++outbox_rows_of[headers.value("x-inbox-id", "")];
      const Posted& p = by_key[headers.value("x-idempotency-key", "")];
      EXPECT_EQ(r[1], p.aggregate) << "the outbox key is the aggregate id";
      const int seq = nlohmann::json::parse(r[2]).value("seq", -1);
      EXPECT_EQ(seq, p.seq);
      auto [it, first] = last_seq.emplace(r[1], seq);
      if (!first) {
        EXPECT_EQ(seq, it->second + 1) << "aggregate " << r[1] << " out of posting order";
        it->second = seq;
      } else {
        EXPECT_EQ(seq, 0) << "aggregate " << r[1] << " starts at its first event";
      }
      aggregate_of_outbox[r[3]] = r[1];
    }
    EXPECT_EQ(outbox_rows_of.size(), inbox_id_of.size());
    for (const auto& [key, inbox_id] : inbox_id_of) {
      EXPECT_EQ(outbox_rows_of[inbox_id], 1) << "inbox row " << inbox_id << " (" << key << ")";
    }

    // The receiver got every outbox row at least once, per aggregate in order (a redelivery after a
    // kill repeats a row already delivered, never one ahead of it).
    std::map<std::string, int> delivered_seq;  // aggregate -> last seq delivered first-time
    std::set<std::string> seen;
    int redeliveries = 0;
    for (const auto& req : receiver_.Requests()) {
      const std::string id = req.Header("X-Message-Id");
      EXPECT_TRUE(aggregate_of_outbox.count(id)) << "unknown outbox id " << id;
      if (!aggregate_of_outbox.count(id)) continue;
      const std::string& aggregate = aggregate_of_outbox[id];
      const int seq = nlohmann::json::parse(req.body)["seq"];
      if (!seen.insert(id).second) {
        ++redeliveries;
        EXPECT_LE(seq, delivered_seq[aggregate]) << aggregate;
        continue;
      }
      auto [it, first] = delivered_seq.emplace(aggregate, seq);
      if (!first) {
        EXPECT_EQ(seq, it->second + 1) << "aggregate " << aggregate << " delivered out of order";
        it->second = seq;
      } else {
        EXPECT_EQ(seq, 0) << "aggregate " << aggregate << " delivered out of order";
      }
    }
    EXPECT_EQ(seen.size(), aggregate_of_outbox.size()) << "every outbox row arrives";
    return {duplicate_after_kill, redeliveries};
  }

  size_t PostedCount() {
    std::lock_guard<std::mutex> lock(mu_);
    return posted_.size();
  }

  TempDir dir_;
  TestDatabase db_;
  HttpReceiver receiver_;
  std::vector<int> ports_;  // the replicas' data ports
  std::mutex mu_;
  std::vector<Posted> posted_;
};

// S8/S9 for the inbox relay: a steady stream of webhooks for several aggregates while the replica
// is killed with SIGKILL three times in the middle of forwarding and started again. Every webhook
// answered 202 (or 200 duplicate after an answer the kill cut off) is one inbox row, `processed`,
// and exactly one outbox row; each aggregate's events are in the outbox in posting order (the
// outbox key order) and reach the receiver in that order.
TEST_P(InboxRelayE2ETest, S9_KilledMidForwardEveryWebhookIsOneOutboxRowInAggregateOrder) {
  receiver_.SetDefaultResponse({204, "", "text/plain", {}, 5ms});
  const std::string config = WriteConfig(0);
  std::string out;
  ASSERT_EQ(testing::RunCommand(kBinary, {"--config", config, "migrate"}, {}, &out), 0) << out;
  auto relay = Start(config, "run-0");
  ASSERT_TRUE(WaitUntil([&] { return GetStatus(ports_[0], "/health/ready") == 200; }, 30s))
      << relay->Log();

  constexpr int kPosters = 4, kAggregatesPerPoster = 2, kKills = 3;
  std::atomic<bool> stop{false};
  std::vector<std::thread> posters;
  for (int i = 0; i < kPosters; ++i) {
    posters.emplace_back([&, i] { Post(i, kAggregatesPerPoster, stop); });
  }
  int64_t forwarded_at_start = 0, left_in_inbox = 0, left_processing = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    // Kill once this replica has forwarded a share of the stream, at a moment when stored
    // webhooks wait to be forwarded.
    ASSERT_TRUE(WaitUntil(
        [&] {
          return Count("SELECT count(*) FROM outbox") >= forwarded_at_start + 60 &&
                 Count("SELECT count(*) FROM inbox WHERE state <> 'processed'") > 0;
        },
        60s))
        << relay->Log();
    relay->Kill(SIGKILL);
    ASSERT_TRUE(relay->Wait(10s).has_value());
    // What the kill left behind: stored webhooks not yet forwarded, outbox rows mid-delivery.
    left_in_inbox += Count("SELECT count(*) FROM inbox WHERE state <> 'processed'");
    left_processing += Count("SELECT count(*) FROM outbox WHERE state = 'processing'");
    forwarded_at_start = Count("SELECT count(*) FROM outbox");
    relay = Start(config, "run-" + std::to_string(kill + 1));
  }
  EXPECT_GT(left_in_inbox, 0) << "the kills should hit while stored webhooks wait to be forwarded";
  // The last replica takes more of the stream, then the posters stop.
  const size_t posted_before = PostedCount();
  EXPECT_TRUE(WaitUntil([&] { return PostedCount() >= posted_before + 100; }, 60s)) << relay->Log();
  stop = true;
  for (auto& t : posters) t.join();
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Count("SELECT count(*) FROM inbox WHERE state <> 'processed'") == 0 &&
               Count("SELECT count(*) FROM outbox WHERE state <> 'sent'") == 0;
      },
      60s))
      << relay->Log();
  relay->Kill(SIGTERM);
  EXPECT_EQ(relay->Wait(20s), std::optional<int>(0)) << relay->Log();

  // Each kill waited for 60 more outbox rows (a poster may still await the answer of its last
  // one), then 100 more were answered.
  const Outcome outcome =
      CheckEveryWebhookIsOneOutboxRowInAggregateOrder(kKills * 60 - kPosters + 100);
  RecordProperty("webhooks", static_cast<int>(posted_.size()));
  RecordProperty("duplicate_after_kill", outcome.duplicate_after_kill);
  RecordProperty("redeliveries", outcome.redeliveries);
  RecordProperty("left_in_inbox", static_cast<int>(left_in_inbox));
  RecordProperty("left_processing", static_cast<int>(left_processing));
}

// S8 for the inbox relay: three replicas share the inbox and the outbox and take the webhooks in
// turn; one replica after another is killed with SIGKILL while the stream is forwarded and
// started again. The same outcome: every answered webhook is exactly one outbox row, each
// aggregate in posting order in the outbox and at the receiver.
TEST_P(InboxRelayE2ETest, S8_ReplicasKilledInTurnEveryWebhookIsOneOutboxRowInAggregateOrder) {
  receiver_.SetDefaultResponse({204, "", "text/plain", {}, 5ms});
  constexpr int kReplicas = 3, kPosters = 4, kAggregatesPerPoster = 2, kKills = 4;
  std::string config[kReplicas];
  for (int i = 0; i < kReplicas; ++i) config[i] = WriteConfig(i);
  std::string out;
  ASSERT_EQ(testing::RunCommand(kBinary, {"--config", config[0], "migrate"}, {}, &out), 0) << out;
  std::unique_ptr<ChildProcess> replicas[kReplicas];
  for (int i = 0; i < kReplicas; ++i) {
    replicas[i] = Start(config[i], "r" + std::to_string(i));
    ASSERT_TRUE(WaitUntil([&] { return GetStatus(ports_[i], "/health/ready") == 200; }, 30s))
        << replicas[i]->Log();
  }

  std::atomic<bool> stop{false};
  std::vector<std::thread> posters;
  for (int i = 0; i < kPosters; ++i) {
    posters.emplace_back([&, i] { Post(i, kAggregatesPerPoster, stop); });
  }
  int64_t forwarded = 0;
  for (int kill = 0; kill < kKills; ++kill) {
    ASSERT_TRUE(
        WaitUntil([&] { return Count("SELECT count(*) FROM outbox") >= forwarded + 60; }, 60s));
    const int victim = kill % kReplicas;
    replicas[victim]->Kill(SIGKILL);
    ASSERT_TRUE(replicas[victim]->Wait(10s).has_value());
    forwarded = Count("SELECT count(*) FROM outbox");
    replicas[victim] =
        Start(config[victim], "r" + std::to_string(victim) + "-" + std::to_string(kill));
  }
  const size_t posted_before = PostedCount();
  EXPECT_TRUE(WaitUntil([&] { return PostedCount() >= posted_before + 100; }, 60s));
  stop = true;
  for (auto& t : posters) t.join();
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Count("SELECT count(*) FROM inbox WHERE state <> 'processed'") == 0 &&
               Count("SELECT count(*) FROM outbox WHERE state <> 'sent'") == 0;
      },
      60s));
  for (auto& r : replicas) {
    r->Kill(SIGTERM);
    EXPECT_EQ(r->Wait(20s), std::optional<int>(0)) << r->Log();
  }
  const Outcome outcome =
      CheckEveryWebhookIsOneOutboxRowInAggregateOrder(kKills * 60 - kPosters + 100);
  RecordProperty("webhooks", static_cast<int>(posted_.size()));
  RecordProperty("duplicate_after_kill", outcome.duplicate_after_kill);
  RecordProperty("redeliveries", outcome.redeliveries);
}

// The migrated inbox renamed, table and every column (a user's own schema, which
// database.inboxTableName and database.columnMapping.inbox describe): {default column, setting
// key, the user's name}.
struct MappedColumn {
  const char* column;
  const char* setting;
  const char* renamed;
};
constexpr MappedColumn kMappedInbox[] = {
    {"id", "id", "msg_id"},
    {"source", "source", "src"},
    {"idempotency_key", "idempotencyKey", "dedup_key"},
    {"aggregate_id", "aggregateId", "agg"},
    {"event_type", "eventType", "kind"},
    {"payload", "payload", "body"},
    {"state", "state", "status"},
    {"created_at", "createdAt", "received_at"},
    {"processed_at", "processedAt", "done_at"},
    {"claimed_at", "claimedAt", "taken_at"},
    {"claim_token", "claimToken", "owner"},
    {"lease_expires_at", "leaseExpiresAt", "lease_until"},
    {"correlation_id", "correlationId", "corr_id"},
    {"consumption", "consumption", "mode"},
    {"scheduled_at", "scheduledAt", "due_at"},
    {"attempt", "attempt", "tries"},
    {"last_error", "lastError", "error_text"},
    {"headers", "headers", "meta"},
};

// The parameter: the database type, "postgresql" or "sqlite".
class InboxRelayMappedTableE2ETest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    OpenTestDatabase(GetParam(), dir_, &db_);
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(receiver_.Start().ok());
    port_ = testing::UnusedLoopbackPort();
  }

  // A replica with the `orders` webhook source; `mapped` names the renamed inbox (and turns the
  // bundled migrations off, as a renamed schema requires).
  std::string WriteConfig(bool mapped) {
    std::string yaml = "database:\n  type: " + db_.type + "\n  url: " + db_.url + "\n";
    if (mapped) {
      yaml += "  migrate: false\n  inboxTableName: app_inbox\n  columnMapping:\n    inbox:\n";
      for (const MappedColumn& c : kMappedInbox) {
        yaml += std::string("      ") + c.setting + ": " + c.renamed + "\n";
      }
    }
    yaml += "server:\n  address: 127.0.0.1\n  httpPort: " + std::to_string(port_) +
            "\noutbox:\n  pollIntervalMs: 50\n"
            "inbox:\n  relay:\n    pollIntervalMs: 50\n"
            "sources:\n  orders:\n    path: /orders\n    idempotencyKeyPath: $.id\n"
            "    aggregateIdPath: $.aggregate\n    eventTypePath: $.type\n"
            "routes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
            "destinations:\n  receiver:\n    type: http\n    baseUrl: " +
            receiver_.BaseUrl() + "\n    path: /events\n";
    const std::string name = mapped ? "mapped.yml" : "default.yml";
    dir_.Write(name, yaml);
    return dir_.File(name);
  }

  TempDir dir_;
  TestDatabase db_;
  HttpReceiver receiver_;
  int port_ = 0;
};

// The webhook source stores into the renamed inbox (every column through its mapping) and the
// inbox relay claims, forwards and marks its rows there: the duplicate is refused by the renamed
// key, the aggregate's three events reach the receiver in order with the relay's headers, and the
// renamed rows end `processed`.
TEST_P(InboxRelayMappedTableE2ETest, AWebhookIsStoredAndForwardedThroughARenamedInbox) {
  std::string out;
  ASSERT_EQ(testing::RunCommand(kBinary, {"--config", WriteConfig(false), "migrate"}, {}, &out), 0)
      << out;
  db_.Exec("ALTER TABLE inbox RENAME TO app_inbox");
  for (const MappedColumn& c : kMappedInbox) {
    db_.Exec(std::string("ALTER TABLE app_inbox RENAME COLUMN ") + c.column + " TO " + c.renamed);
  }
  const std::string config = WriteConfig(true);
  ASSERT_EQ(testing::RunCommand(kBinary, {"--config", config, "check-config"}, {}, &out), 0) << out;
  ChildProcess relay(kBinary, {"--config", config, "run"}, {}, dir_.File("run.log"));
  ASSERT_TRUE(WaitUntil([&] { return GetStatus(port_, "/health/ready") == 200; }, 30s))
      << relay.Log();

  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(10);
  std::vector<std::string> ids;
  for (int seq = 0; seq < 3; ++seq) {
    const std::string body = nlohmann::json{
        {"id", "evt_" + std::to_string(seq)},
        {"aggregate", "cus_1"},
        {"type", "order.updated"},
        {"seq", seq}}.dump();
    auto r = c.Post("/inbox/orders", {{"X-Tenant", "acme"}, {"X-Correlation-Id", "corr-1"}}, body,
                    "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 202) << r->body;
    ids.push_back(nlohmann::json::parse(r->body).value("messageId", ""));
  }
  auto again = c.Post("/inbox/orders", R"({"id":"evt_0","aggregate":"cus_1","type":"x"})",
                      "application/json");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(again->body, R"({"status":"duplicate"})");

  ASSERT_TRUE(receiver_.WaitForRequests(3, 30s)) << relay.Log();
  ASSERT_TRUE(WaitUntil(
      [&] { return db_.Scalar("SELECT count(*) FROM outbox WHERE state = 'sent'") == "3"; }, 30s))
      << relay.Log();
  auto requests = receiver_.Requests();
  ASSERT_EQ(requests.size(), 3u);
  for (int seq = 0; seq < 3; ++seq) {
    SCOPED_TRACE(seq);
    const testing::ReceivedRequest& r = requests[seq];
    EXPECT_EQ(nlohmann::json::parse(r.body)["seq"], seq) << "the aggregate's order";
    EXPECT_EQ(r.Header("X-Topic"), "order.updated");
    EXPECT_EQ(r.Header("X-Message-Key"), "cus_1");
    EXPECT_EQ(r.Header("x-inbox-id"), ids[seq]);
    EXPECT_EQ(r.Header("x-source"), "orders");
    EXPECT_EQ(r.Header("x-idempotency-key"), "evt_" + std::to_string(seq));
    EXPECT_EQ(r.Header("X-Correlation-Id"), "corr-1");
    EXPECT_EQ(r.Header("X-Tenant"), "acme");
  }

  // Every field went to its renamed column; the relay marked the rows there.
  auto rows = db_.Query(
      "SELECT msg_id, src, dedup_key, agg, kind, status, corr_id, mode, tries, meta, "
      "done_at IS NOT NULL FROM app_inbox ORDER BY dedup_key");
  ASSERT_EQ(rows.size(), 3u);
  for (int seq = 0; seq < 3; ++seq) {
    SCOPED_TRACE(seq);
    const auto& row = rows[seq];
    EXPECT_EQ(row[0], ids[seq]);
    EXPECT_EQ(row[1], "orders");
    EXPECT_EQ(row[2], "evt_" + std::to_string(seq));
    EXPECT_EQ(row[3], "cus_1");
    EXPECT_EQ(row[4], "order.updated");
    EXPECT_EQ(row[5], "processed");
    EXPECT_EQ(row[6], "corr-1");
    EXPECT_EQ(row[7], "push");
    EXPECT_EQ(row[8], "0");
    EXPECT_THAT(row[9], HasSubstr("acme"));
    EXPECT_THAT(row[10], ::testing::AnyOf("t", "1"));
  }
  EXPECT_EQ(db_.Scalar("SELECT count(*) FROM outbox WHERE key = 'cus_1'"), "3");
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
}

INSTANTIATE_TEST_SUITE_P(Databases, InboxRelayE2ETest, ::testing::Values("postgresql", "sqlite"),
                         [](const auto& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(Databases, InboxRelayMappedTableE2ETest,
                         ::testing::Values("postgresql", "sqlite"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace queuebox
