// Scenarios S4 and S7 (../shared/spec/scenarios.md) for each broker, with the real relay and a
// PostgreSQL store in process (rows and outages scaled down; the behaviour does not depend on
// the size):
//   S4: one row the broker can never take (Kafka: a topic that does not exist; RabbitMQ: an
//       unroutable message; NATS: a subject no stream covers) backs off and goes dead at its
//       ceiling with the broker's reason; every other row is sent; a later row of the same key
//       waits behind it and is then sent.
//   S7: the broker goes away while rows are written (Kafka: every mock broker down; RabbitMQ and
//       NATS: the server is stopped through scripts/services.sh) and comes back. Every row is
//       then sent, none lost. Each destination reports the outage as its own fault, not the
//       message's, so the circuit breaker (default) opens, the rows wait released and no
//       attempt is spent (docs/guarantees.md §8; DestinationOutageTest has the bounds).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "queuebox/relay.h"
#include "queuebox/store.h"
#include "store/open_store.h"
#include "testing/broker_servers.h"
#include "testing/broker_testing.h"
#include "testing/env.h"
#include "testing/pg.h"

#if defined(QB_WITH_KAFKA)
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "destinations/kafka/kafka_destination.h"
#endif
#if defined(QB_WITH_RABBITMQ)
#include <amqp.h>
#include <amqp_tcp_socket.h>

#include "destinations/rabbitmq/rabbitmq_destination.h"
#endif
#if defined(QB_WITH_NATS)
#include <nats/nats.h>

#include "destinations/nats/nats_destination.h"
#include "testing/source_dir.h"
#endif

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

class BrokerRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pg;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg);
    db_ = std::make_unique<testing::TempPgDatabase>(pg);
    DatabaseConfig dc;
    dc.type = "postgresql";
    dc.url = db_->url();
    Result<std::unique_ptr<OutboxStore>> s = OpenStore(dc);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
    ASSERT_TRUE(store_->Migrate(std::nullopt).ok());
  }
  void TearDown() override {
    if (relay_) relay_->Stop();
    relay_.reset();
    store_.reset();
    db_.reset();
  }

  void StartRelay(std::unique_ptr<Destination> d) {
    ASSERT_TRUE(d->Start().ok());
    RelayOptions o;
    o.outbox.poll_interval_ms = 20;
    o.outbox.batch_size = 50;
    o.outbox.concurrency = 50;
    o.outbox.retry_base_delay_ms = 50;
    o.outbox.claim_timeout_ms = 60000;
    o.outbox.shutdown_timeout_ms = 5000;
    o.routes.push_back(RouteConfig{"**", d->name(), std::nullopt, ""});
    std::map<std::string, std::unique_ptr<Destination>> dests;
    dests[d->name()] = std::move(d);
    Result<std::unique_ptr<Relay>> r = Relay::Create(o, store_.get(), std::move(dests));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    relay_ = std::move(r).value();
    ASSERT_TRUE(relay_->Start().ok());
  }

  void Insert(const std::string& topic, const std::string& key, int n, int max_attempts,
              std::optional<std::string> aggregate_type = std::nullopt) {
    for (int i = 0; i < n; ++i) {
      NewOutboxRow row;
      row.topic = topic;
      row.key = key;
      row.payload = R"({"i":)" + std::to_string(i) + "}";
      row.max_attempts = max_attempts;
      row.aggregate_type = aggregate_type;
      ASSERT_TRUE(store_->Insert(row).ok());
    }
  }

  int64_t Count(const std::string& where) {
    return std::stoll(db_->Scalar("SELECT count(*) FROM outbox WHERE " + where));
  }

  // Waits until no row is pending or processing.
  bool Settled(std::chrono::seconds timeout = 60s) {
    return testing::WaitUntil([&] { return Count("state IN ('pending','processing')") == 0; },
                              timeout);
  }

  // S4 checks: `good` rows sent, the poison row dead at its ceiling with `reason`, the row
  // behind it on the same key sent after it.
  void ExpectS4(int64_t good, const std::string& reason) {
    ASSERT_TRUE(Settled());
    EXPECT_EQ(Count("state = 'sent'"), good + 1);  // + the row behind the poison row
    EXPECT_EQ(Count("state = 'dead'"), 1);
    EXPECT_THAT(db_->Scalar("SELECT last_error FROM outbox WHERE state = 'dead'"),
                HasSubstr(reason));
    // Ceiling 3: deliveries at attempt 0..3, dead with attempt 3 (reference §5.2).
    EXPECT_EQ(db_->Scalar("SELECT attempt FROM outbox WHERE state = 'dead'"), "3");
    EXPECT_EQ(db_->Scalar("SELECT state FROM outbox WHERE key = 'poison' AND topic = 'ok.after'"),
              "sent");
  }

  std::string Script() { return std::string(QUEUEBOX_SOURCE_DIR) + "/scripts/services.sh"; }

  std::unique_ptr<testing::TempPgDatabase> db_;
  std::unique_ptr<OutboxStore> store_;
  std::unique_ptr<Relay> relay_;
};

#if defined(QB_WITH_KAFKA)
using KafkaCluster = ::queuebox::testing::MockKafkaCluster;

std::unique_ptr<Destination> Kafka(KafkaCluster& c, int64_t timeout_ms) {
  KafkaDestinationSettings s;
  s.name = "kafka";
  s.bootstrap_servers = c.bootstraps();
  s.topic = "{{ topic }}";
  s.timeout_ms = timeout_ms;
  return std::move(KafkaDestination::Create(s)).value();
}

TEST_F(BrokerRelayTest, S4_Kafka_TopicThatDoesNotExist) {
  KafkaCluster c;
  rd_kafka_mock_topic_create(c.get(), "ok.events", 3, 3);
  rd_kafka_mock_topic_create(c.get(), "ok.after", 1, 3);
  rd_kafka_mock_topic_set_error(c.get(), "missing.topic", RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
  Insert("missing.topic", "poison", 1, 3);
  Insert("ok.after", "poison", 1, 3);
  for (int k = 0; k < 10; ++k) Insert("ok.events", "key-" + std::to_string(k), 20, 3);
  StartRelay(Kafka(c, 2000));
  ExpectS4(200, "missing.topic");
}

TEST_F(BrokerRelayTest, S7_Kafka_BrokersDownThenBack) {
  KafkaCluster c;
  rd_kafka_mock_topic_create(c.get(), "ok.events", 3, 3);
  StartRelay(Kafka(c, 2000));
  Insert("ok.events", "warm", 1, 50);
  ASSERT_TRUE(Settled());
  rd_kafka_mock_broker_set_down(c.get(), -1);
  for (int k = 0; k < 5; ++k) Insert("ok.events", "key-" + std::to_string(k), 20, 50);
  bool opened = testing::WaitUntil([&] { return relay_->CircuitState("kafka") == "open"; }, 30s);
  rd_kafka_mock_broker_set_up(c.get(), -1);
  EXPECT_TRUE(opened);
  ASSERT_TRUE(Settled(120s));
  EXPECT_EQ(Count("state = 'sent'"), 101);
  EXPECT_EQ(Count("state = 'dead'"), 0);
  EXPECT_EQ(Count("attempt > 0"), 0);
}
#endif  // QB_WITH_KAFKA

#if defined(QB_WITH_RABBITMQ)
// Declares `exchange` (topic, durable) and a queue bound to "ok.#" so ok.* rows are routable and
// anything else is returned as unroutable.
void BindQueue(const std::string& url, const std::string& exchange) {
  std::vector<char> buf(url.begin(), url.end());
  buf.push_back('\0');
  amqp_connection_info info;
  amqp_parse_url(buf.data(), &info);
  std::string vhost = *info.vhost ? info.vhost : "/";
  amqp_connection_state_t c = amqp_new_connection();
  amqp_socket_t* sock = amqp_tcp_socket_new(c);
  ASSERT_EQ(amqp_socket_open(sock, info.host, info.port), AMQP_STATUS_OK);
  ASSERT_EQ(
      amqp_login(c, vhost.c_str(), 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user, info.password)
          .reply_type,
      AMQP_RESPONSE_NORMAL);
  amqp_channel_open(c, 1);
  amqp_exchange_declare(c, 1, amqp_cstring_bytes(exchange.c_str()), amqp_cstring_bytes("topic"), 0,
                        1, 0, 0, amqp_empty_table);
  std::string queue = exchange + ".q";
  amqp_queue_declare(c, 1, amqp_cstring_bytes(queue.c_str()), 0, 1, 0, 0, amqp_empty_table);
  amqp_queue_bind(c, 1, amqp_cstring_bytes(queue.c_str()), amqp_cstring_bytes(exchange.c_str()),
                  amqp_cstring_bytes("ok.#"), amqp_empty_table);
  EXPECT_EQ(amqp_get_rpc_reply(c).reply_type, AMQP_RESPONSE_NORMAL);
  amqp_channel_close(c, 1, AMQP_REPLY_SUCCESS);
  amqp_connection_close(c, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(c);
}

std::unique_ptr<Destination> Rabbit(const std::string& url, const std::string& exchange) {
  RabbitMqDestinationSettings s;
  s.name = "rabbit";
  s.url = url;
  s.exchange = exchange;
  s.connect_timeout_ms = 2000;
  return std::move(RabbitMqDestination::Create(s)).value();
}

TEST_F(BrokerRelayTest, S4_RabbitMq_UnroutableMessage) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", url);
  std::string exchange = "qb.relay.s4." + std::to_string(::getpid());
  BindQueue(url, exchange);
  Insert("missing.topic", "poison", 1, 3);
  Insert("ok.after", "poison", 1, 3);
  for (int k = 0; k < 10; ++k) Insert("ok.events", "key-" + std::to_string(k), 20, 3);
  StartRelay(Rabbit(url, exchange));
  ExpectS4(200, "unroutable");
}

TEST_F(BrokerRelayTest, S7_RabbitMq_ServerStoppedThenStarted) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", url);
  std::string exchange = "qb.relay.s7." + std::to_string(::getpid());
  BindQueue(url, exchange);
  StartRelay(Rabbit(url, exchange));
  Insert("ok.events", "warm", 1, 50);
  ASSERT_TRUE(Settled());
  ASSERT_EQ(std::system(("bash " + Script() + " stop rabbitmq >/dev/null").c_str()), 0);
  for (int k = 0; k < 5; ++k) Insert("ok.events", "key-" + std::to_string(k), 20, 50);
  // The outage is the broker's fault: the circuit breaker (default) opens and the rows wait
  // without spending attempts (DestinationOutageTest has the bounds).
  bool opened = testing::WaitUntil([&] { return relay_->CircuitState("rabbit") == "open"; }, 30s);
  ASSERT_EQ(std::system(("bash " + Script() + " start rabbitmq >/dev/null").c_str()), 0);
  EXPECT_TRUE(opened);
  ASSERT_TRUE(Settled(120s));
  EXPECT_EQ(Count("state = 'sent'"), 101);
  EXPECT_EQ(Count("state = 'dead'"), 0);
  EXPECT_EQ(Count("attempt > 0"), 0);
}
#endif  // QB_WITH_RABBITMQ

#if defined(QB_WITH_NATS)
// A file-storage stream over "<prefix>.ok.>" (the poison row's subject has none).
using NatsStream = ::queuebox::testing::JetStreamTestStream;

std::unique_ptr<Destination> Nats(const std::string& url, const std::string& prefix) {
  NatsDestinationSettings s;
  s.name = "nats";
  s.servers = url;
  s.subject = prefix + ".{{ topic }}";
  s.timeout_ms = 5000;  // a loaded machine may answer a PubAck late
  return std::move(NatsDestination::Create(s)).value();
}

TEST_F(BrokerRelayTest, S4_Nats_SubjectWithoutAStream) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_NATS_URL", url);
  std::string prefix = "qbrelay.s4_" + std::to_string(::getpid());
  NatsStream stream(url, "QBRELAY_S4_" + std::to_string(::getpid()), prefix + ".ok");
  Insert("missing.topic", "poison", 1, 3);
  Insert("ok.after", "poison", 1, 3);
  for (int k = 0; k < 10; ++k) Insert("ok.events", "key-" + std::to_string(k), 20, 3);
  StartRelay(Nats(url, prefix));
  ExpectS4(200, prefix + ".missing.topic");
}

TEST_F(BrokerRelayTest, S7_Nats_ServerStoppedThenStarted) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_NATS_URL", url);
  std::string prefix = "qbrelay.s7_" + std::to_string(::getpid());
  NatsStream stream(url, "QBRELAY_S7_" + std::to_string(::getpid()), prefix + ".ok");
  StartRelay(Nats(url, prefix));
  Insert("ok.events", "warm", 1, 50);
  ASSERT_TRUE(Settled());
  ASSERT_EQ(std::system(("bash " + Script() + " stop nats >/dev/null").c_str()), 0);
  for (int k = 0; k < 5; ++k) Insert("ok.events", "key-" + std::to_string(k), 20, 50);
  bool opened = testing::WaitUntil([&] { return relay_->CircuitState("nats") == "open"; }, 30s);
  ASSERT_EQ(std::system(("bash " + Script() + " start nats >/dev/null").c_str()), 0);
  EXPECT_TRUE(opened);
  ASSERT_TRUE(Settled(120s));
  EXPECT_EQ(Count("state = 'sent'"), 101);
  EXPECT_EQ(Count("state = 'dead'"), 0);
  EXPECT_EQ(Count("attempt > 0"), 0);
}
#endif  // QB_WITH_NATS

}  // namespace
}  // namespace queuebox
