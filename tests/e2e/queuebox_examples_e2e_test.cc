// QueueBox's documented outbox configurations, run unchanged by the queuebox binary (issue 13:
// a QueueBox user switches without editing anything). The files are vendored under
// tests/e2e/queuebox_examples/ (origin in its README.md). A deployment's mappings are given as
// QueueBox users give them, with QUEUEBOX_* variables: the database host (the test server), the
// receivers' hosts (loopback receivers), the published port, a mounted secret's path. The
// database role is QueueBox's `queuebox`/`queuebox` from its examples.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "testing/amqp_queue.h"
#include "testing/broker_servers.h"
#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"
#include "testing/source_dir.h"

namespace queuebox {
namespace {

using ::testing::AllOf;
using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::HttpReceiver;
using ::testing::Not;
using testing::ReceivedRequest;
using testing::ReceiverResponse;
using testing::RunCommand;
using testing::TempDir;
using Env = std::map<std::string, std::string>;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);

std::string Vendored(const std::string& name) {
  return std::string(QUEUEBOX_SOURCE_DIR) + "/tests/e2e/queuebox_examples/" + name;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// KEY=VALUE lines of an env file (comments and blank lines skipped).
Env ReadEnvFile(const std::string& path) {
  Env env;
  std::istringstream in(ReadFile(path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

bool WaitFor(const std::function<bool()>& cond, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return cond();
}

int Get(int port, const std::string& path, std::string* body = nullptr) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(10);
  auto r = c.Get(path);
  if (r && body != nullptr) *body = r->body;
  return r ? r->status : -1;
}

#if defined(QB_WITH_KAFKA)
struct KafkaRecord {
  std::string key, value;
  std::map<std::string, std::string> headers;
};

// A silent librdkafka client of the mock cluster at `bootstraps`.
rd_kafka_t* KafkaClient(rd_kafka_type_t type, const std::string& bootstraps,
                        std::map<std::string, std::string> props = {}) {
  props["bootstrap.servers"] = bootstraps;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [k, v] : props) rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err);
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int, const char*, const char*) {});
  return rd_kafka_new(type, conf, err, sizeof err);
}

// Up to `count` records of partition 0 of `topic` from the beginning, within 60 s.
std::vector<KafkaRecord> ConsumeKafka(const std::string& bootstraps, const std::string& topic,
                                      size_t count) {
  std::vector<KafkaRecord> out;
  rd_kafka_t* consumer =
      KafkaClient(RD_KAFKA_CONSUMER, bootstraps, {{"group.id", "examples-test"}});
  if (consumer == nullptr) return out;
  rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(parts, topic.c_str(), 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(consumer, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 200);
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      KafkaRecord r;
      if (m->key != nullptr) r.key.assign(static_cast<const char*>(m->key), m->key_len);
      r.value.assign(static_cast<const char*>(m->payload), m->len);
      rd_kafka_headers_t* h = nullptr;
      if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name;
        const void* v;
        size_t size;
        for (size_t i = 0; rd_kafka_header_get_all(h, i, &name, &v, &size) == 0; ++i) {
          r.headers[name] = std::string(static_cast<const char*>(v), size);
        }
      }
      out.push_back(std::move(r));
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
  return out;
}
#endif  // QB_WITH_KAFKA

// POSTs `event` to `path` twice: stored (202 with a 36-character messageId, in *id), then 200
// duplicate. A request without an answer is a fatal failure (ASSERT_NO_FATAL_FAILURE).
void PostTwiceStoredThenDuplicate(int port, const std::string& path, const std::string& event,
                                  std::string* id) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(10);
  auto first = c.Post(path, event, "application/json");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 202) << first->body;
  *id = nlohmann::json::parse(first->body).value("messageId", "");
  EXPECT_EQ(id->size(), 36u) << first->body;
  auto second = c.Post(path, event, "application/json");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(second->body, R"({"status":"duplicate"})");
}

class QueueBoxExamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string admin_url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", admin_url);
    pg_ = std::make_unique<testing::TempPgDatabase>(admin_url);
    // QueueBox's examples connect as queuebox/queuebox; the role is made once per server.
    pg_->Exec(
        "DO $$BEGIN CREATE ROLE queuebox LOGIN PASSWORD 'queuebox'; "
        "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END$$");
    pg_->Exec("ALTER DATABASE \"" + pg_->name() + "\" OWNER TO queuebox");
    http_port_ = testing::UnusedLoopbackPort();
  }

  // The example's database host mapped to the test server: jdbc:postgresql://127.0.0.1:<p>/<db>.
  std::string JdbcUrl() const {
    const std::string& url = pg_->url();
    return "jdbc:postgresql://" + url.substr(url.find('@') + 1);
  }

  // What QueueBox's docker-compose.yml gives the container besides the mounted file: the three
  // database variables and QUEUEBOX_CONFIG_FILE; plus the published port (kept on loopback).
  // The default file is moved to this test's folder, so this host's /etc/queuebox never counts.
  Env Deployment(const std::string& file) const {
    Env env = {{"QUEUEBOX_DATABASE_URL", JdbcUrl()},
               {"QUEUEBOX_DATABASE_USERNAME", "queuebox"},
               {"QUEUEBOX_DATABASE_PASSWORD", "queuebox"},
               {"QUEUEBOX_SERVER_HTTPPORT", std::to_string(http_port_)},
               {"QUEUEBOX_SERVER_ADDRESS", "127.0.0.1"},
               {"QUEUEBOX_CPP_DEFAULT_CONFIG_FILE", dir_.File("etc/queuebox/queuebox.yml")}};
    if (!file.empty()) env["QUEUEBOX_CONFIG_FILE"] = Vendored(file);
    return env;
  }

  void Insert(const std::string& topic, const std::string& payload = R"({"n":1})") {
    pg_->Exec("INSERT INTO outbox (topic, key, payload) VALUES ('" + topic + "', 'k', '" + payload +
              "')");
  }

  // check-config, then `run --until-idle` (which migrates, delivers and stops); both exit 0.
  void CheckAndDeliver(const Env& env, const std::function<void()>& insert) {
    std::string out;
    ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
    ASSERT_EQ(RunCommand(kBinary, {"migrate"}, env, &out), 0) << out;
    insert();
    ASSERT_EQ(RunCommand(kBinary, {"run", "--until-idle", "--idle-timeout-ms", "60000"}, env, &out),
              0)
        << out;
    EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM outbox WHERE state <> 'sent'"), "0") << out;
  }

  std::unique_ptr<testing::TempPgDatabase> pg_;
  int http_port_ = 0;
  TempDir dir_;
};

// docs how-to "Fan out over HTTP", "Declare an HTTP destination".
TEST_F(QueueBoxExamplesTest, FanOutDeclareAnHttpDestination) {
  HttpReceiver analytics;
  ASSERT_TRUE(analytics.Start().ok());
  Env env = Deployment("docs/fan-out-over-http/declare.yml");
  env["QUEUEBOX_DESTINATIONS_ANALYTICS_BASEURL"] = analytics.BaseUrl();  // analytics.internal
  CheckAndDeliver(env, [&] { Insert("analytics.page.viewed"); });
  ASSERT_EQ(analytics.RequestCount(), 1u);
  ReceivedRequest r = analytics.Requests()[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/events");
  EXPECT_EQ(r.Header("X-Source"), "queuebox");
  EXPECT_EQ(r.Header("X-Topic"), "analytics.page.viewed");
  EXPECT_EQ(r.Header("X-Attempt"), "0");
  EXPECT_EQ(r.Header("X-Message-Key"), "k");
  EXPECT_EQ(r.Header("Content-Type"), "application/json");
}

// "Match topics with patterns": the specific route first, a catch-all last.
TEST_F(QueueBoxExamplesTest, FanOutMatchTopicsWithPatterns) {
  HttpReceiver billing, archive;
  ASSERT_TRUE(billing.Start().ok());
  ASSERT_TRUE(archive.Start().ok());
  Env env = Deployment("docs/fan-out-over-http/patterns.yml");
  env["QUEUEBOX_DESTINATIONS_BILLING_BASEURL"] = billing.BaseUrl();
  env["QUEUEBOX_DESTINATIONS_ARCHIVE_BASEURL"] = archive.BaseUrl();
  CheckAndDeliver(env, [&] {
    Insert("invoice.paid");
    Insert("invoice.item.added");  // `*` is one segment: the catch-all takes it
    Insert("order.created");
  });
  ASSERT_EQ(billing.RequestCount(), 1u);
  EXPECT_EQ(billing.Requests()[0].Header("X-Topic"), "invoice.paid");
  ASSERT_EQ(archive.RequestCount(), 2u);
  EXPECT_EQ(archive.Requests()[0].Header("X-Topic"), "invoice.item.added");
  EXPECT_EQ(archive.Requests()[1].Header("X-Topic"), "order.created");
}

// "Send one event to several endpoints" (the outbox half of examples/http-fanout), with the
// page's own SQL.
TEST_F(QueueBoxExamplesTest, FanOutSeveralEndpoints) {
  HttpReceiver analytics, audit;
  ASSERT_TRUE(analytics.Start().ok());
  ASSERT_TRUE(audit.Start().ok());
  Env env = Deployment("docs/fan-out-over-http/several-endpoints.yml");
  env["QUEUEBOX_DESTINATIONS_ANALYTICS_BASEURL"] = analytics.BaseUrl();  // analytics:8080
  env["QUEUEBOX_DESTINATIONS_AUDIT_BASEURL"] = audit.BaseUrl();          // audit:8080
  CheckAndDeliver(
      env, [&] { pg_->Exec(ReadFile(Vendored("docs/fan-out-over-http/several-endpoints.sql"))); });
  ASSERT_EQ(analytics.RequestCount(), 1u);
  ASSERT_EQ(audit.RequestCount(), 1u);
  EXPECT_EQ(analytics.Requests()[0].Header("X-Topic"), "analytics.payment.succeeded");
  EXPECT_EQ(audit.Requests()[0].Header("X-Topic"), "audit.payment.succeeded");
  EXPECT_EQ(nlohmann::json::parse(audit.Requests()[0].body),
            nlohmann::json::parse(R"({"paymentId":"pay_1","amount":4200})"));
}

// "Block private addresses": a destination host on loopback is refused at start; the page's
// advice for internal networks (turn it off) delivers.
TEST_F(QueueBoxExamplesTest, FanOutBlockPrivateAddresses) {
  HttpReceiver partner;
  ASSERT_TRUE(partner.Start().ok());
  Env env = Deployment("docs/fan-out-over-http/block-private-addresses.yml");
  env["QUEUEBOX_DESTINATIONS_PARTNERAPI_BASEURL"] = partner.BaseUrl();  // api.partner.example
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  ASSERT_EQ(RunCommand(kBinary, {"migrate"}, env, &out), 0) << out;
  Insert("partner.order.shipped");
  EXPECT_EQ(RunCommand(kBinary, {"run", "--until-idle"}, env, &out), 1);
  EXPECT_THAT(out, AllOf(HasSubstr("QueueBox did not start"),
                         HasSubstr("destinations.partner-api.baseUrl: host '127.0.0.1' resolves "
                                   "to 127.0.0.1, a loopback address, and "
                                   "http.blockPrivateAddresses is true")));
  EXPECT_EQ(partner.RequestCount(), 0u);
  env["QUEUEBOX_HTTP_BLOCKPRIVATEADDRESSES"] = "false";
  ASSERT_EQ(RunCommand(kBinary, {"run", "--until-idle"}, env, &out), 0) << out;
  ASSERT_EQ(partner.RequestCount(), 1u);
  EXPECT_EQ(partner.Requests()[0].target, "/webhooks");
}

// "Authenticate to a destination", OAuth2 tab: a real token endpoint on loopback.
TEST_F(QueueBoxExamplesTest, AuthenticateOauth2) {
  HttpReceiver api, auth;
  ASSERT_TRUE(api.Start().ok());
  ASSERT_TRUE(auth.Start().ok());
  auth.SetDefaultResponse({200, R"({"access_token":"at-1","token_type":"Bearer","expires_in":300})",
                           "application/json"});
  Env env = Deployment("docs/authenticate-requests/oauth2.yml");
  env["CLIENT_SECRET"] = "client-secret-xyz";
  env["QUEUEBOX_DESTINATIONS_PROTECTEDAPI_BASEURL"] = api.BaseUrl();  // api.example.com
  env["QUEUEBOX_DESTINATIONS_PROTECTEDAPI_AUTH_TOKENURL"] =
      auth.BaseUrl() + "/oauth/token";  // auth.example.com
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  EXPECT_THAT(out, Not(HasSubstr("client-secret-xyz")));
  CheckAndDeliver(env, [&] {
    Insert("order.created");
    Insert("order.paid");
  });
  ASSERT_EQ(api.RequestCount(), 2u);
  EXPECT_EQ(api.Requests()[0].Header("Authorization"), "Bearer at-1");
  EXPECT_EQ(api.Requests()[1].Header("Authorization"), "Bearer at-1");
  ASSERT_EQ(auth.RequestCount(), 1u);
  const std::string form = auth.Requests()[0].body;
  EXPECT_THAT(form,
              AllOf(HasSubstr("grant_type=client_credentials"), HasSubstr("client_id=queuebox"),
                    HasSubstr("client_secret=client-secret-xyz"), HasSubstr("scope=api%3Awrite"),
                    HasSubstr("audience=https%3A%2F%2Fapi.example.com")));
}

// Basic tab.
TEST_F(QueueBoxExamplesTest, AuthenticateBasic) {
  HttpReceiver legacy;
  ASSERT_TRUE(legacy.Start().ok());
  Env env = Deployment("docs/authenticate-requests/basic.yml");
  env["LEGACY_API_PASSWORD"] = "legacy-pw-1";
  env["QUEUEBOX_DESTINATIONS_LEGACYAPI_BASEURL"] = legacy.BaseUrl();  // legacy.example.com
  CheckAndDeliver(env, [&] { Insert("order.created"); });
  ASSERT_EQ(legacy.RequestCount(), 1u);
  EXPECT_EQ(legacy.Requests()[0].Header("Authorization"), "Basic cXVldWVib3g6bGVnYWN5LXB3LTE=");
  EXPECT_EQ(legacy.Requests()[0].target, "/");
}

// Header tab; a 401 is a retry whose last_error never shows the credential.
TEST_F(QueueBoxExamplesTest, AuthenticateHeader) {
  HttpReceiver api;
  ASSERT_TRUE(api.Start().ok());
  api.EnqueueResponse({401, "rejected Authorization: Bearer st-token-42"});
  Env env = Deployment("docs/authenticate-requests/header.yml");
  env["STATIC_TOKEN"] = "st-token-42";
  env["QUEUEBOX_DESTINATIONS_STATICAPI_BASEURL"] = api.BaseUrl();  // static.example.com
  env["QUEUEBOX_OUTBOX_RETRYBASEDELAYMS"] = "50";                  // the retry comes quickly
  // `run --until-idle` stops when nothing is claimable; the 50 ms retry may come within the first
  // run or need another once it is due on the database clock (a loaded machine decides), so run
  // until the row is sent.
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  ASSERT_EQ(RunCommand(kBinary, {"migrate"}, env, &out), 0) << out;
  Insert("order.created");
  for (int run = 0; run < 10 && pg_->Scalar("SELECT state FROM outbox") != "sent"; ++run) {
    WaitFor(
        [&] {
          return pg_->Scalar(
                     "SELECT count(*) FROM outbox WHERE state = 'pending' AND "
                     "scheduled_at <= now()") == "1";
        },
        30s);
    ASSERT_EQ(RunCommand(kBinary, {"run", "--until-idle"}, env, &out), 0) << out;
  }
  EXPECT_EQ(pg_->Scalar("SELECT state FROM outbox"), "sent") << out;
  ASSERT_EQ(api.RequestCount(), 2u);  // the 401, then the retry
  EXPECT_EQ(api.Requests()[0].Header("Authorization"), "Bearer st-token-42");
  EXPECT_EQ(api.Requests()[1].Header("Authorization"), "Bearer st-token-42");
  EXPECT_EQ(pg_->Scalar("SELECT attempt FROM outbox"), "1");
  std::string last_error = pg_->Scalar("SELECT coalesce(last_error, '') FROM outbox");
  EXPECT_THAT(last_error, Not(HasSubstr("st-token-42")));
}

// QueueBox's .env.example as an env-only deployment (no file at the path QUEUEBOX_CONFIG_FILE
// names), and the deploy page's three-variable minimum.
TEST_F(QueueBoxExamplesTest, EnvOnlyDeployments) {
  for (const std::string name : {"env.example", "docs/deploy/minimum.env"}) {
    SCOPED_TRACE(name);
    Env env = ReadEnvFile(Vendored(name));
    Env mapped = Deployment("");
    env["QUEUEBOX_DATABASE_URL"] = mapped["QUEUEBOX_DATABASE_URL"];        // the postgres host
    env["QUEUEBOX_SERVER_HTTPPORT"] = mapped["QUEUEBOX_SERVER_HTTPPORT"];  // published port
    env["QUEUEBOX_SERVER_ADDRESS"] = "127.0.0.1";
    env["QUEUEBOX_CPP_DEFAULT_CONFIG_FILE"] = mapped["QUEUEBOX_CPP_DEFAULT_CONFIG_FILE"];
    if (env.count("QUEUEBOX_CONFIG_FILE")) {
      // The container path of the mounted file, which an env-only deployment does not mount.
      env["QUEUEBOX_CONFIG_FILE"] = dir_.File("etc/queuebox/queuebox.yml");
    }
    std::string out;
    ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
    EXPECT_THAT(out, HasSubstr("type: \"postgresql\""));
    ChildProcess relay(kBinary, {}, env, dir_.File("relay.log"));  // `queuebox` alone runs
    EXPECT_TRUE(WaitFor([&] { return Get(http_port_, "/health") == 200; }, 30s)) << relay.Log();
    EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM outbox"), "0");
    relay.Kill(SIGTERM);
    EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  }
}

// The Kubernetes Deployment of the deploy page: its env (a file from a ConfigMap, the password
// from a mounted secret, a management port) and its probes.
TEST_F(QueueBoxExamplesTest, KubernetesDeployment) {
  HttpReceiver analytics;
  ASSERT_TRUE(analytics.Start().ok());
  Env env = ReadEnvFile(Vendored("docs/deploy/kubernetes.env"));
  const int management = testing::UnusedLoopbackPort();
  dir_.Write("db-password", "queuebox\n");
  env["QUEUEBOX_CONFIG_FILE"] = Vendored("docs/fan-out-over-http/declare.yml");  // the ConfigMap
  env["QUEUEBOX_DATABASE_URL"] = JdbcUrl();                                      // postgres.db.svc
  env["QUEUEBOX_DATABASE_PASSWORD"] = "file:" + dir_.File("db-password");        // /run/secrets
  env["QUEUEBOX_SERVER_MANAGEMENTPORT"] = std::to_string(management);            // 9090
  env["QUEUEBOX_SERVER_HTTPPORT"] = std::to_string(http_port_);                  // 8080
  env["QUEUEBOX_SERVER_ADDRESS"] = "127.0.0.1";
  env["QUEUEBOX_CPP_DEFAULT_CONFIG_FILE"] = dir_.File("etc/queuebox/queuebox.yml");
  env["QUEUEBOX_DESTINATIONS_ANALYTICS_BASEURL"] = analytics.BaseUrl();
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  ChildProcess relay(kBinary, {}, env, dir_.File("relay.log"));
  ASSERT_TRUE(WaitFor([&] { return Get(management, "/health/ready") == 200; }, 30s)) << relay.Log();
  EXPECT_EQ(Get(management, "/health/live"), 200);
  EXPECT_EQ(Get(http_port_, "/health/ready"), 404);  // moved to the management port
  std::string metrics;
  EXPECT_EQ(Get(management, "/metrics", &metrics), 200);
  EXPECT_TRUE(std::regex_search(metrics, std::regex("(^|\n)queuebox\\{version=\"")));
  EXPECT_THAT(metrics, HasSubstr("hikaricp_connections_max{pool=\"queuebox\"} 10"));
  // QueueBox's dashboards and alerts read these before the first event (issue 13 item 7).
  for (const char* line : {"queuebox_claims_lost_total{component=\"outbox\"} 0",
                           "queuebox_claims_lost_total{component=\"inbox\"} 0",
                           "queuebox_outbox_messages_total{status=\"dead\"} 0",
                           "hikaricp_connections_pending{pool=\"queuebox\"} 0",
                           "hikaricp_connections_timeout_total{pool=\"queuebox\"} 0"}) {
    EXPECT_THAT(metrics, HasSubstr(std::string("\n") + line + "\n")) << line;
  }
  for (const char* family : {"hikaricp_connections{", "hikaricp_connections_active{",
                             "hikaricp_connections_idle{", "hikaricp_connections_min{"}) {
    EXPECT_THAT(metrics, HasSubstr(std::string("\n") + family + "pool=\"queuebox\"} ")) << family;
  }
  Insert("analytics.page.viewed");
  EXPECT_TRUE(analytics.WaitForRequests(1, 30s)) << relay.Log();
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
}

// "Bridge a broker", "Publish outbox rows to a broker": the tabs deliver to real brokers (the
// shared RabbitMQ; a private nats-server, whose stream the page says to create first;
// librdkafka's mock cluster for the page's two Kafka brokers).
TEST_F(QueueBoxExamplesTest, BridgeABrokerPublishOutboxRows) {
#if defined(QB_WITH_KAFKA)
  {
    SCOPED_TRACE("kafka");
    testing::MockKafkaCluster mock(3);  // broker-1:9092,broker-2:9092
    ASSERT_EQ(rd_kafka_mock_topic_create(mock.get(), "orders-processed", 1, 3),
              RD_KAFKA_RESP_ERR_NO_ERROR);
    Env env = Deployment("docs/bridge-a-broker/kafka.yml");
    env["QUEUEBOX_DESTINATIONS_ORDERSPROCESSED_BOOTSTRAPSERVERS"] = mock.bootstraps();
    CheckAndDeliver(env, [&] {
      Insert("order.created", R"({"n":1})");
      Insert("order.paid", R"({"n":2})");
    });
    std::vector<KafkaRecord> got = ConsumeKafka(mock.bootstraps(), "orders-processed", 2);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].key, "k");  // keyTemplate {{ key }}
    EXPECT_EQ(nlohmann::json::parse(got[0].value), nlohmann::json::parse(R"({"n":1})"));
    EXPECT_EQ(got[1].headers["x-topic"], "order.paid");
    pg_->Exec("TRUNCATE outbox");
  }
#endif
#if defined(QB_WITH_RABBITMQ)
  {
    SCOPED_TRACE("rabbitmq");
    std::string amqp_url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", amqp_url);
    testing::AmqpQueues amqp(amqp_url);
    const std::string queue = "qb.bridge-a-broker." + std::to_string(::getpid());
    amqp.Bind("queuebox-events", queue);  // as the destination declares it: topic, durable
    Env env = Deployment("docs/bridge-a-broker/rabbitmq.yml");
    env["QUEUEBOX_DESTINATIONS_EVENTSEXCHANGE_URL"] = amqp_url;  // rabbitmq:5672
    CheckAndDeliver(env, [&] {
      Insert("order.created");
      Insert("order.item.added");
    });
    EXPECT_EQ(amqp.Messages(queue), 2u);
    amqp.Delete("queuebox-events", queue);
  }
#endif
#if defined(QB_WITH_NATS)
  {
    SCOPED_TRACE("nats");
    pg_->Exec("TRUNCATE outbox");
    testing::PrivateNatsServer nats(testing::UnusedLoopbackPort());
    ASSERT_TRUE(nats.Start()) << nats.Log();
    testing::JetStreamTestStream stream(nats.url(), "PROCESSED", "processed");
    Env env = Deployment("docs/bridge-a-broker/nats.yml");
    env["QUEUEBOX_DESTINATIONS_ORDERSPROCESSED_SERVERS"] = nats.url();  // nats:4222
    CheckAndDeliver(env, [&] {
      Insert("order.created", R"({"n":1})");
      Insert("order.paid", R"({"n":2})");
    });
    ASSERT_EQ(stream.Count(), 2u);
    EXPECT_EQ(stream.Get(1).subject, "processed.orders");
    EXPECT_EQ(stream.Get(2).headers["x-topic"], "order.paid");
  }
#endif
}

// QueueBox's examples/ files and its packaged default declare sources, http and broker kinds:
// every file passes check-config unchanged (the broker bridges run in their own tests).
TEST_F(QueueBoxExamplesTest, ExamplesWithSourcesPassCheckConfig) {
  for (const std::string name :
       {"examples/queuebox.yml", "examples/http-fanout/queuebox.yml",
        "examples/webhook-receiver/queuebox.yml", "examples/rabbitmq-bridge/queuebox.yml",
        "config/queuebox.yml", "examples/nats-bridge/queuebox.yml",
        "examples/kafka-bridge/queuebox.yml"}) {
    SCOPED_TRACE(name);
    std::string out;
    EXPECT_EQ(RunCommand(kBinary, {"check-config"}, Deployment(name), &out), 0) << out;
  }
}

// examples/rabbitmq-bridge runs unchanged: a webhook at POST /inbox/stripe goes through the inbox
// and the inbox relay to the `queuebox-events` topic exchange (amqp://guest:guest@rabbitmq:5672,
// mapped to the shared RabbitMQ), routed by its event type; a queue bound to the exchange gets it.
TEST_F(QueueBoxExamplesTest, RabbitmqBridgeRuns) {
#if defined(QB_WITH_RABBITMQ)
  std::string amqp_url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", amqp_url);
  testing::AmqpQueues amqp(amqp_url);
  const std::string queue = "qb.rabbitmq-bridge." + std::to_string(::getpid());
  amqp.Bind("queuebox-events", queue);  // as the destination declares it: topic, durable
  Env env = Deployment("examples/rabbitmq-bridge/queuebox.yml");
  env["QUEUEBOX_DESTINATIONS_EVENTSEXCHANGE_URL"] = amqp_url;  // rabbitmq:5672
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  ChildProcess relay(kBinary, {}, env, dir_.File("relay.log"));
  ASSERT_TRUE(WaitFor([&] { return Get(http_port_, "/health/ready") == 200; }, 30s)) << relay.Log();

  const std::string event = R"({"id":"evt_amqp_1","type":"invoice.paid","amount":4200})";
  httplib::Client c("127.0.0.1", http_port_);
  c.set_read_timeout(10);
  auto posted = c.Post("/inbox/stripe", event, "application/json");
  ASSERT_TRUE(posted);
  EXPECT_EQ(posted->status, 202) << posted->body;
  ASSERT_TRUE(WaitFor([&] { return amqp.Messages(queue) == 1; }, 30s)) << relay.Log();
  auto got = amqp.Get(queue);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->first, "invoice.paid");  // routingKeyTemplate "{{ topic }}", the event type
  EXPECT_EQ(nlohmann::json::parse(got->second), nlohmann::json::parse(event));
  EXPECT_TRUE(WaitFor([&] { return pg_->Scalar("SELECT state FROM outbox") == "sent"; }, 30s));
  EXPECT_EQ(pg_->Scalar("SELECT state FROM inbox"), "processed");
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  amqp.Delete("queuebox-events", queue);
#else
  GTEST_SKIP() << "QB_WITH_RABBITMQ is off";
#endif
}

// examples/webhook-receiver runs unchanged: its Stripe-style source answers POST /inbox/stripe
// (202 with the message id, then 200 duplicate), and the inbox relay forwards the row into the
// outbox under the event type as topic, which the `**` route delivers to the `echo` receiver
// (http://receiver:8080, mapped to a loopback receiver).
TEST_F(QueueBoxExamplesTest, WebhookReceiverRuns) {
  HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  Env env = Deployment("examples/webhook-receiver/queuebox.yml");
  env["QUEUEBOX_DESTINATIONS_ECHO_BASEURL"] = receiver.BaseUrl();  // http://receiver:8080
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  ChildProcess relay(kBinary, {}, env, dir_.File("relay.log"));
  ASSERT_TRUE(WaitFor([&] { return Get(http_port_, "/health/ready") == 200; }, 30s)) << relay.Log();

  const std::string event = R"({"id":"evt_1","type":"invoice.paid","amount":4200})";
  std::string id;
  ASSERT_NO_FATAL_FAILURE(PostTwiceStoredThenDuplicate(http_port_, "/inbox/stripe", event, &id));

  ASSERT_TRUE(WaitFor([&] { return receiver.RequestCount() >= 1; }, 30s)) << relay.Log();
  ReceivedRequest r = receiver.Requests()[0];
  EXPECT_EQ(r.target, "/webhook");
  EXPECT_EQ(r.Header("X-Topic"), "invoice.paid");
  EXPECT_EQ(r.Header("x-inbox-id"), id);
  EXPECT_EQ(r.Header("x-source"), "stripe");
  EXPECT_EQ(r.Header("x-idempotency-key"), "evt_1");
  EXPECT_EQ(nlohmann::json::parse(r.body), nlohmann::json::parse(event));
  EXPECT_TRUE(WaitFor([&] { return pg_->Scalar("SELECT state FROM inbox") == "processed"; }, 30s));
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM inbox"), "1");
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  EXPECT_EQ(receiver.RequestCount(), 1u);
}

// QueueBox's README quick start, unchanged: `docker compose -f docker-compose.yml --env-file
// .env.example up` runs QueueBox with examples/queuebox.yml mounted (the compose's environment:
// the three database variables and QUEUEBOX_CONFIG_FILE), PostgreSQL and the `receiver` service;
// the `rabbitmq` service only with its profile. Then `curl /health` and the README's POST to
// /inbox/stripe twice: 202, then 200 {"status":"duplicate"}; the file's comment says the first run
// ends with the message delivered to the receiver (route payment.* -> webhook-api). Mapped: the
// postgres host, the published port, http://receiver:8080 (a loopback receiver), and the absent
// broker's host (a loopback port where nothing listens, not a name lookup). With the broker absent
// /health answers 503 naming the destination (QueueBox C++ checks every configured destination);
// started again with the broker present (the profile; the shared RabbitMQ), it answers 200.
TEST_F(QueueBoxExamplesTest, ReadmeQuickStartPostsTwiceAndDelivers) {
  HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  Env env = Deployment("examples/queuebox.yml");
  env["QUEUEBOX_DESTINATIONS_WEBHOOKAPI_BASEURL"] = receiver.BaseUrl();  // http://receiver:8080
  env["QUEUEBOX_DESTINATIONS_EVENTSEXCHANGE_URL"] =                      // rabbitmq:5672, absent
      "amqp://guest:guest@127.0.0.1:" + std::to_string(testing::UnusedLoopbackPort());
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  {
    ChildProcess relay(kBinary, {}, env, dir_.File("relay.log"));
    ASSERT_TRUE(WaitFor([&] { return Get(http_port_, "/health/live") == 200; }, 30s))
        << relay.Log();
    // Live comes before the inbox relay's first pass reports it up: wait for that event.
    std::string health;
    int status = 0;
    EXPECT_TRUE(WaitFor(
        [&] {
          status = Get(http_port_, "/health", &health);
          return health.find(R"("inbox-relay":{"status":"up"})") != std::string::npos;
        },
        30s))
        << health;
    EXPECT_EQ(status, 503) << health;
    EXPECT_THAT(health, HasSubstr(R"("rabbitmq.events-exchange":{"status":"down"})"));

    // The README's curl lines: -X POST, -H 'Content-Type: application/json', -d '<event>'.
    const std::string event = R"({"id":"evt_1","type":"payment.succeeded"})";
    std::string id;
    ASSERT_NO_FATAL_FAILURE(PostTwiceStoredThenDuplicate(http_port_, "/inbox/stripe", event, &id));

    ASSERT_TRUE(receiver.WaitForRequests(1, 30s)) << relay.Log();
    ReceivedRequest r = receiver.Requests()[0];
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.target, "/webhook");
    EXPECT_EQ(r.Header("X-Topic"), "payment.succeeded");
    EXPECT_EQ(r.Header("x-inbox-id"), id);
    EXPECT_EQ(r.Header("x-source"), "stripe");
    EXPECT_EQ(r.Header("x-idempotency-key"), "evt_1");
    EXPECT_EQ(nlohmann::json::parse(r.body), nlohmann::json::parse(event));
    EXPECT_TRUE(WaitFor([&] { return pg_->Scalar("SELECT state FROM outbox") == "sent"; }, 30s));
    EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM inbox"), "1");
    EXPECT_EQ(pg_->Scalar("SELECT state FROM inbox"), "processed");
    relay.Kill(SIGTERM);
    EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
    EXPECT_EQ(receiver.RequestCount(), 1u);
  }
#if defined(QB_WITH_RABBITMQ)
  std::string amqp_url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", amqp_url);
  env["QUEUEBOX_DESTINATIONS_EVENTSEXCHANGE_URL"] = amqp_url;  // `--profile rabbitmq`
  ChildProcess relay(kBinary, {}, env, dir_.File("relay-rabbitmq.log"));
  std::string health;
  EXPECT_TRUE(WaitFor([&] { return Get(http_port_, "/health", &health) == 200; }, 30s))
      << health << relay.Log();
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
#endif
}

#if defined(QB_WITH_NATS)
// examples/nats-bridge runs unchanged (its smoke test): an order published to JetStream reaches
// processed.orders through the inbox, the relay and the outbox. Mapped as its docker-compose.yml
// does: the nats host (a private nats-server of this test, so the example's stream names do not
// meet other tests on the shared server) and the postgres host; the streams are made before
// QueueBox starts, as the compose's init step does: ORDERS over orders.>, PROCESSED over
// processed.> (which holds processed.orders).
TEST_F(QueueBoxExamplesTest, NatsBridgeRuns) {
  testing::PrivateNatsServer nats(testing::UnusedLoopbackPort());
  ASSERT_TRUE(nats.Start()) << nats.Log();
  testing::JetStreamTestStream orders(nats.url(), "ORDERS", "orders");
  testing::JetStreamTestStream processed(nats.url(), "PROCESSED", "processed");
  Env env = Deployment("examples/nats-bridge/queuebox.yml");
  env["QUEUEBOX_SOURCES_ORDERS_SERVERS"] = nats.url();          // nats://nats:4222
  env["QUEUEBOX_DESTINATIONS_PROCESSED_SERVERS"] = nats.url();  // nats://nats:4222
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  ChildProcess relay(kBinary, {}, env, dir_.File("relay.log"));
  ASSERT_TRUE(WaitFor([&] { return Get(http_port_, "/health/ready") == 200; }, 30s)) << relay.Log();
  std::string ready;
  Get(http_port_, "/health/ready", &ready);
  EXPECT_THAT(ready, HasSubstr(R"("nats.orders":{"status":"up"})"));

  const std::string order = R"({"id":"ord-1","type":"order.created","total":42})";
  jsCtx* js = nullptr;
  ASSERT_EQ(natsConnection_JetStream(&js, orders.nc(), nullptr), NATS_OK);
  jsErrCode jerr;
  ASSERT_EQ(js_Publish(nullptr, js, "orders.created", order.data(), static_cast<int>(order.size()),
                       nullptr, &jerr),
            NATS_OK);
  jsCtx_Destroy(js);
  ASSERT_TRUE(WaitFor([&] { return processed.Count() == 1; }, 60s)) << relay.Log();
  testing::StoredNatsMessage m = processed.Get(1);
  EXPECT_EQ(m.subject, "processed.orders");
  EXPECT_EQ(nlohmann::json::parse(m.body), nlohmann::json::parse(order));
  EXPECT_EQ(m.headers["x-source"], "orders");
  EXPECT_EQ(m.headers["x-idempotency-key"], "ord-1");
  EXPECT_EQ(m.headers["x-topic"], "orders");
  EXPECT_TRUE(WaitFor([&] { return pg_->Scalar("SELECT state FROM inbox") == "processed"; }, 30s));
  EXPECT_EQ(pg_->Scalar("SELECT event_type FROM inbox"), "order.created");
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  EXPECT_EQ(processed.Count(), 1u);
}
#endif

// examples/cdc (its smoke-test.sh): capture wakes delivery well inside the 30 s reconciliation
// timer, and the recorded position survives a restart. Mapped as its docker-compose.yml does:
// the database host, the receiver's host, the state volume; the role is a replication role
// there (the image's superuser), the publication is made before QueueBox starts.
TEST_F(QueueBoxExamplesTest, CdcCaptureWakesDeliveryAndSurvivesARestart) {
  HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  pg_->Exec("ALTER ROLE queuebox REPLICATION");
  pg_->Exec("CREATE PUBLICATION queuebox_outbox FOR ALL TABLES");
  // The file's slot name is cluster-wide: one left by an aborted run of this test goes first.
  pg_->Exec(
      "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = "
      "'queuebox_outbox' AND NOT active");
  Env env = Deployment("examples/cdc/queuebox.yml");
  env["QUEUEBOX_DESTINATIONS_RECEIVER_BASEURL"] = receiver.BaseUrl();    // receiver:8080
  env["QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY"] = dir_.File("capture");  // the named volume
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;

  auto delivered = [&](const std::string& id) {
    for (const auto& r : receiver.Requests()) {
      if (r.body.find(id) != std::string::npos) return true;
    }
    return false;
  };
  auto insert = [&](const std::string& id) {  // as the smoke test's producer does
    pg_->Exec("INSERT INTO outbox (topic, payload) VALUES ('order.created', '{\"id\":\"" + id +
              "\"}'::jsonb)");
  };
  auto streaming = [](ChildProcess& p) {
    return p.Log().find("Capture is streaming") != std::string::npos;
  };
  for (const std::string id : {"cdc_smoke_001", "cdc_smoke_002"}) {
    SCOPED_TRACE(id);
    ChildProcess relay(kBinary, {"run"}, env, dir_.File(id + ".log"));
    ASSERT_TRUE(WaitFor([&] { return Get(http_port_, "/health") == 200 && streaming(relay); }, 60s))
        << relay.Log();
    insert(id);
    // The reconciliation timer is 30 s away; the smoke test allows 15 s.
    EXPECT_TRUE(WaitFor([&] { return delivered(id); }, 15s)) << relay.Log();
    relay.Kill(SIGTERM);
    ASSERT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  }
  EXPECT_EQ(receiver.RequestCount(), 2u);
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM outbox WHERE state = 'sent'"), "2");
}

// The "Capture changes" how-to, PostgreSQL tab: the page's SQL and YAML verbatim (the password
// from ${DB_PASSWORD}, the state volume mapped). Capture streams; a lost state volume stops
// capture with the recovery reason while delivery goes on through SQL; the page's recovery steps
// (reset the identity, drop the slot, empty the directory) bring capture back.
TEST_F(QueueBoxExamplesTest, CaptureChangesHowToWithItsRecoverySteps) {
  const std::string page = "docs/capture-changes/";
  Env env = Deployment(page + "postgresql.yml");
  env.erase("QUEUEBOX_DATABASE_PASSWORD");
  env["DB_PASSWORD"] = "queuebox";
  const std::string state_dir = dir_.File("capture");
  env["QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY"] = state_dir;  // the durable volume
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  ASSERT_EQ(RunCommand(kBinary, {"migrate"}, env, &out), 0) << out;
  // "Prepare the database": REPLICATION for the account, the page's publication.
  pg_->Exec("ALTER ROLE queuebox REPLICATION");
  pg_->Exec(ReadFile(Vendored(page + "prepare.sql")));
  pg_->Exec(
      "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = "
      "'queuebox_outbox' AND NOT active");

  // The page has no route: a row leaves `pending` (dead, unroutable) once delivery sees it.
  int n = 0;
  auto handled = [&] {
    pg_->Exec("INSERT INTO outbox (topic, payload) VALUES ('order.created', '{\"n\":" +
              std::to_string(++n) + "}')");
    return WaitFor(
        [&] {
          return pg_->Scalar(
                     "SELECT count(*) FROM outbox WHERE state = "
                     "'pending'") == "0";
        },
        30s);
  };
  auto run = [&](const std::string& log, const std::string& until) {
    auto relay = std::make_unique<ChildProcess>(kBinary, std::vector<std::string>{"run"}, env,
                                                dir_.File(log));
    EXPECT_TRUE(WaitFor([&] { return relay->Log().find(until) != std::string::npos; }, 60s))
        << relay->Log();
    return relay;
  };
  auto stop = [](std::unique_ptr<ChildProcess>& relay) {
    relay->Kill(SIGTERM);
    ASSERT_EQ(relay->Wait(30s), std::optional<int>(0)) << relay->Log();
  };

  auto relay = run("first.log", "Capture is streaming");
  EXPECT_TRUE(handled()) << relay->Log();
  stop(relay);

  // The volume is lost; the database says capture ran before: capture stops with the reason,
  // delivery goes on.
  std::filesystem::remove_all(state_dir);
  relay = run("lost.log", "Capture requires explicit state recovery");
  std::string health;
  EXPECT_TRUE(WaitFor([&] { return Get(http_port_, "/health/ready", &health) == 200; }, 30s));
  EXPECT_THAT(health, HasSubstr("outbox-capture"));
  EXPECT_TRUE(handled()) << relay->Log();
  stop(relay);

  // "Recover capture", steps 4-7, as the page gives them.
  pg_->Exec(ReadFile(Vendored(page + "reset-identity.sql")));
  pg_->Exec(ReadFile(Vendored(page + "drop-slot.sql")));
  std::filesystem::remove_all(state_dir);
  relay = run("recovered.log", "Capture is streaming");
  EXPECT_THAT(relay->Log(), Not(HasSubstr("explicit state recovery")));
  EXPECT_TRUE(handled()) << relay->Log();
  stop(relay);
}

#if defined(QB_WITH_KAFKA)
// examples/kafka-bridge runs unchanged against librdkafka's mock cluster (started by this test;
// its bootstrap servers replace the file's kafka:9092 for the source and the destination): one
// order produced to `orders` is stored in the inbox, forwarded into the outbox under the source's
// topic, and delivered to `orders-processed` with the relay's headers.
TEST_F(QueueBoxExamplesTest, KafkaBridgeRuns) {
  testing::MockKafkaCluster mock(3);
  for (const char* topic : {"orders", "orders-processed"}) {
    ASSERT_EQ(rd_kafka_mock_topic_create(mock.get(), topic, 1, 3), RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  Env env = Deployment("examples/kafka-bridge/queuebox.yml");
  env["QUEUEBOX_SOURCES_ORDERS_BOOTSTRAPSERVERS"] = mock.bootstraps();          // kafka:9092
  env["QUEUEBOX_DESTINATIONS_PROCESSED_BOOTSTRAPSERVERS"] = mock.bootstraps();  // kafka:9092
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  ASSERT_EQ(RunCommand(kBinary, {"migrate"}, env, &out), 0) << out;
  ChildProcess relay(kBinary, {"run"}, env, dir_.File("relay.log"));
  ASSERT_TRUE(WaitFor([&] { return Get(http_port_, "/health/ready") == 200; }, 60s)) << relay.Log();

  const std::string order = R"({"id":"ord-1","type":"order.created","total":42})";
  rd_kafka_t* producer = KafkaClient(RD_KAFKA_PRODUCER, mock.bootstraps());
  ASSERT_NE(producer, nullptr);
  std::vector<rd_kafka_vu_t> vus(3);
  vus[0].vtype = RD_KAFKA_VTYPE_TOPIC;
  vus[0].u.cstr = "orders";
  vus[1].vtype = RD_KAFKA_VTYPE_VALUE;
  vus[1].u.mem.ptr = const_cast<char*>(order.data());
  vus[1].u.mem.size = order.size();
  vus[2].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
  vus[2].u.i = RD_KAFKA_MSG_F_COPY;
  rd_kafka_error_t* produced = rd_kafka_produceva(producer, vus.data(), vus.size());
  ASSERT_EQ(produced, nullptr) << rd_kafka_error_string(produced);
  ASSERT_EQ(rd_kafka_flush(producer, 20000), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(producer);

  std::vector<KafkaRecord> got = ConsumeKafka(mock.bootstraps(), "orders-processed", 1);
  ASSERT_EQ(got.size(), 1u) << relay.Log();
  const std::string& value = got[0].value;
  std::map<std::string, std::string>& headers = got[0].headers;
  EXPECT_EQ(nlohmann::json::parse(value), nlohmann::json::parse(order));
  EXPECT_EQ(headers["x-topic"], "orders");  // the source's topic: "{{ source }}"
  EXPECT_EQ(headers["x-source"], "orders");
  EXPECT_EQ(headers["x-idempotency-key"], "ord-1");
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM inbox WHERE event_type = 'order.created'"), "1");
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
}
#endif  // QB_WITH_KAFKA

}  // namespace
}  // namespace queuebox
