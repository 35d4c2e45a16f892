// Bad rows never stop a batch (issue 17 item 6): a row whose `headers` are not a JSON object of
// strings, whose payload is not JSON, whose topic the broker cannot take (Kafka: over 249
// characters or an illegal character; RabbitMQ: a routing key over 255 bytes; NATS: an empty or
// wildcard token, whitespace) or whose topic or key holds bytes a text header cannot carry (CR,
// LF, NUL: HTTP and NATS headers) goes `dead` at once, attempt 0, with a last_error naming the
// field, and the good rows claimed in the same batch are delivered. The real relay and store on
// SQLite and PostgreSQL, each with a real destination: an HTTP server on loopback, the librdkafka
// mock cluster, the shared RabbitMQ and NATS JetStream servers.
//
// The payload case needs a payload column without a JSON check: on PostgreSQL the column is
// altered to TEXT (a schema of one's own, as SQL Server's NVARCHAR(MAX)); on SQLite the row is
// written with ignore_check_constraints (a table made without the bundled CHECK), as is a row
// whose headers are not JSON at all (SQLite only: PostgreSQL's headers column is JSONB).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "contract/store_test_support.h"
#include "destinations/http/http_destination.h"
#include "queuebox/relay.h"
#include "testing/broker_servers.h"
#include "testing/broker_testing.h"
#include "testing/env.h"
#include "testing/http_receiver.h"

#if defined(QB_WITH_KAFKA)
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "destinations/kafka/kafka_destination.h"
#endif
#if defined(QB_WITH_RABBITMQ)
#include <amqp.h>
#include <amqp_tcp_socket.h>

#include "destinations/rabbitmq/rabbitmq_destination.h"
#include "testing/amqp_queue.h"
#endif
#if defined(QB_WITH_NATS)
#include <nats/nats.h>

#include "destinations/nats/nats_destination.h"
#endif

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr int kGood = 20;

// One row that a destination can never carry, and the text its last_error must hold.
struct BadRow {
  std::string topic;
  std::optional<std::string> key = std::nullopt;
  std::string payload = R"({"n":1})";
  std::string headers = "{}";
  std::string reason;  // a substring of last_error: the field it names
};

std::string Quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

class BadRowsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string pg_url;
    if (GetParam() == "postgresql") QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
    db_ = std::make_unique<testing::StoreDb>(GetParam());
    db_->Create(pg_url);
    store_ = db_->Open();
    ASSERT_NE(store_, nullptr);
    auto report = store_->Migrate(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    if (db_->pg()) db_->Exec("ALTER TABLE outbox ALTER COLUMN payload TYPE TEXT");
  }
  void TearDown() override {
    if (relay_) relay_->Stop();
    relay_.reset();
    store_.reset();
    db_.reset();
  }

  // Inserts the good rows (topic `good_topic`, key per row) and the bad ones, all due now.
  void Insert(const std::string& good_topic, const std::vector<BadRow>& bad) {
    for (int i = 0; i < kGood; ++i) {
      NewOutboxRow row;
      row.topic = good_topic;
      row.key = "key-" + std::to_string(i % 4);
      row.payload = R"({"i":)" + std::to_string(i) + "}";
      row.headers = R"({"x-tenant":"acme"})";
      ASSERT_TRUE(store_->Insert(row).ok());
    }
    const std::string unchecked = db_->pg() ? "" : "PRAGMA ignore_check_constraints = ON; ";
    for (size_t i = 0; i < bad.size(); ++i) {
      db_->Exec(unchecked + "INSERT INTO outbox (id, topic, key, payload, headers) VALUES (" +
                Quoted(BadId(i)) + ", " + Quoted(bad[i].topic) + ", " +
                (bad[i].key ? Quoted(*bad[i].key) : "NULL") + ", " + Quoted(bad[i].payload) + ", " +
                Quoted(bad[i].headers) + ")");
    }
  }
  static std::string BadId(size_t i) {
    return "00000000-0000-4000-8000-" + std::string(11 - std::to_string(i).size(), '0') + "1" +
           std::to_string(i);
  }

  // Starts the relay with one route "**" to `d`; a whole backlog is one claim (batch 100).
  void StartRelay(std::unique_ptr<Destination> d) {
    ASSERT_TRUE(d->Start().ok());
    RelayOptions o;
    o.outbox.poll_interval_ms = 20;
    o.outbox.batch_size = 100;
    o.outbox.concurrency = 100;
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

  int64_t Count(const std::string& where) {
    return std::stoll(db_->Scalar("SELECT count(*) FROM outbox WHERE " + where));
  }

  // Every good row sent; every bad row dead at attempt 0 (no retry was spent on it) with its
  // reason in last_error.
  void ExpectOutcome(const std::vector<BadRow>& bad) {
    ASSERT_TRUE(
        testing::WaitUntil([&] { return Count("state IN ('pending', 'processing')") == 0; }, 60s))
        << "rows still pending: " << Count("state = 'pending'");
    EXPECT_EQ(Count("state = 'sent'"), kGood);
    EXPECT_EQ(Count("state = 'dead'"), static_cast<int64_t>(bad.size()));
    for (size_t i = 0; i < bad.size(); ++i) {
      const std::string id = BadId(i);
      EXPECT_EQ(db_->Field(id, "state"), "dead") << bad[i].reason;
      EXPECT_EQ(db_->Field(id, "attempt"), "0") << bad[i].reason;
      EXPECT_THAT(db_->Field(id, "last_error"), HasSubstr(bad[i].reason));
    }
  }

  // The bad rows every destination refuses.
  static std::vector<BadRow> CommonBadRows(const std::string& topic) {
    return {
        {.topic = topic, .headers = R"({"x-count":1})", .reason = "headers: the value of"},
        {.topic = topic, .headers = R"(["a","b"])", .reason = "headers: an array"},
        {.topic = topic, .payload = R"({"n":)", .reason = "payload: not valid JSON"},
    };
  }

  // SQLite only (a text column; the row written past the bundled CHECK): headers that are not
  // JSON at all.
  void AddUnparsableHeaders(std::vector<BadRow>& bad, const std::string& topic,
                            const std::string& reason) {
    if (!db_->pg()) bad.push_back({.topic = topic, .headers = "{oops", .reason = reason});
  }

  std::unique_ptr<testing::StoreDb> db_;
  std::unique_ptr<OutboxStore> store_;
  std::unique_ptr<Relay> relay_;
};

TEST_P(BadRowsTest, Http_BadRowsAreDeadAtOnceAndTheBatchIsDelivered) {
  testing::HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  std::vector<BadRow> bad = CommonBadRows("orders.created");
  // HTTP names the row's headers "invalid row headers".
  bad[0].reason = "invalid row headers: the value of \"x-count\" is not a string";
  bad[1].reason = "invalid row headers";
  bad.push_back({.topic = "orders.created",
                 .key = "cus_1\r\nX-Injected: yes",
                 .reason = "key: contains a line break"});
  bad.push_back({.topic = "orders\ncreated", .reason = "topic: contains a line break"});
  AddUnparsableHeaders(bad, "orders.created",
                       "invalid row headers: expected a JSON object of string values");
  Insert("orders.created", bad);
  HttpDestinationSettings s;
  s.name = "http";
  s.base_url = receiver.BaseUrl();
  s.path = "/hooks";
  s.timeout_ms = 5000;
  auto d = HttpDestination::Create(s);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  StartRelay(std::move(d).value());
  ExpectOutcome(bad);
  ASSERT_EQ(receiver.Requests().size(), static_cast<size_t>(kGood));
  for (const auto& r : receiver.Requests()) {
    EXPECT_FALSE(r.HasHeader("X-Injected"));
    EXPECT_EQ(r.Header("x-tenant"), "acme");
  }
}

#if defined(QB_WITH_KAFKA)
TEST_P(BadRowsTest, Kafka_BadRowsAreDeadAtOnceAndTheBatchIsDelivered) {
  testing::MockKafkaCluster c;
  rd_kafka_mock_topic_create(c.get(), "ok.events", 3, 3);
  std::vector<BadRow> bad = CommonBadRows("ok.events");
  bad.push_back({.topic = std::string(250, 't'), .reason = "topic: the Kafka topic"});
  bad.push_back({.topic = "ok events", .reason = "has a character Kafka does not allow"});
  AddUnparsableHeaders(bad, "ok.events", "headers: not valid JSON");
  Insert("ok.events", bad);
  KafkaDestinationSettings s;
  s.name = "kafka";
  s.bootstrap_servers = c.bootstraps();
  s.topic = "{{ topic }}";
  s.timeout_ms = 5000;
  auto d = KafkaDestination::Create(s);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  StartRelay(std::move(d).value());
  ExpectOutcome(bad);
  EXPECT_THAT(db_->Field(BadId(3), "last_error"),
              HasSubstr("250 characters; Kafka allows at most 249"));
}
#endif  // QB_WITH_KAFKA

#if defined(QB_WITH_RABBITMQ)
TEST_P(BadRowsTest, RabbitMq_BadRowsAreDeadAtOnceAndTheBatchIsDelivered) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", url);
  const std::string exchange = "qb.badrows." + GetParam() + "." + std::to_string(::getpid());
  testing::AmqpQueues queues(url);
  queues.Bind(exchange, exchange + ".q");
  std::vector<BadRow> bad = CommonBadRows("ok.events");
  std::string long_key;  // 128 characters, 256 bytes: fits the topic column, not a routing key
  for (int i = 0; i < 128; ++i) long_key += "\xC3\xA9";
  bad.push_back({.topic = long_key, .reason = "routing key: "});
  AddUnparsableHeaders(bad, "ok.events", "headers: not valid JSON");
  Insert("ok.events", bad);
  RabbitMqDestinationSettings s;
  s.name = "rabbit";
  s.url = url;
  s.exchange = exchange;
  s.connect_timeout_ms = 2000;
  auto d = RabbitMqDestination::Create(s);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  StartRelay(std::move(d).value());
  ExpectOutcome(bad);
  EXPECT_THAT(db_->Field(BadId(3), "last_error"),
              HasSubstr("256 bytes; RabbitMQ allows at most 255"));
  EXPECT_TRUE(testing::WaitUntil([&] { return queues.Messages(exchange + ".q") == kGood; }, 10s));
  queues.Delete(exchange, exchange + ".q");
}
#endif  // QB_WITH_RABBITMQ

#if defined(QB_WITH_NATS)
TEST_P(BadRowsTest, Nats_BadRowsAreDeadAtOnceAndTheBatchIsDelivered) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_NATS_URL", url);
  const std::string tag = GetParam() + "_" + std::to_string(::getpid());
  const std::string prefix = "qbbad." + tag;
  testing::JetStreamTestStream stream(url, "QBBAD_" + tag, prefix);
  std::vector<BadRow> bad = CommonBadRows("ok.events");
  bad.push_back({.topic = "ok..events", .reason = "subject: the NATS subject"});
  bad.push_back({.topic = "ok.*", .reason = "has a wildcard token"});
  bad.push_back({.topic = "ok.two words", .reason = "has whitespace"});
  bad.push_back({.topic = "ok.events",
                 .key = "cus_1\r\nx-injected: yes",
                 .reason = "key: contains a line break"});
  AddUnparsableHeaders(bad, "ok.events", "headers: not valid JSON");
  Insert("ok.events", bad);
  NatsDestinationSettings s;
  s.name = "nats";
  s.servers = url;
  s.subject = prefix + ".{{ topic }}";
  s.timeout_ms = 2000;
  auto d = NatsDestination::Create(s);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  StartRelay(std::move(d).value());
  ExpectOutcome(bad);
  EXPECT_TRUE(testing::WaitUntil([&] { return stream.Count() == kGood; }, 10s));
}
#endif  // QB_WITH_NATS

INSTANTIATE_TEST_SUITE_P(Dialects, BadRowsTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace queuebox
