// The rabbitmq destination against a real rabbitmq-server (QB_TEST_AMQP_URL, started by
// scripts/services.sh): publisher confirms, properties, header order, routing keys, delivery
// modes, unroutable messages, empty exchanges, connection loss. What every destination does is in
// tests/contract/destination_contract_test.cc.
//
// Connection loss: the test asks the broker to close every connection
// (`scripts/services.sh rabbitmqctl close_all_connections`), waits until the broker lists none,
// then publishes: the destination must notice the dead connection and deliver on a new one.
// This is much cheaper than restarting the broker and exercises the same recovery path (the
// socket is closed under the destination).
#ifdef QB_WITH_RABBITMQ
#include "destinations/rabbitmq/rabbitmq_destination.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config_test_util.h"
#include "testing/amqp_queue.h"
#include "testing/broker_testing.h"
#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/source_dir.h"
#include "testing/tcp_forwarder.h"

namespace queuebox {
namespace {

using ::queuebox::testing::BrokerRow;
using ::queuebox::testing::KindName;
using ::queuebox::testing::PublishAll;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Received = ::queuebox::testing::AmqpReceived;
using Consumer = ::queuebox::testing::AmqpTestQueue;

class RabbitMqDestinationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", url_);
    static std::atomic<int> n{0};
    exchange_ = "qb.test." + std::to_string(::getpid()) + "." + std::to_string(++n);
  }

  RabbitMqDestinationSettings Settings() {
    RabbitMqDestinationSettings s;
    s.name = "rabbit";
    s.url = url_;
    s.exchange = exchange_;
    return s;
  }

  std::unique_ptr<RabbitMqDestination> Started(RabbitMqDestinationSettings s) {
    return testing::StartedDestination<RabbitMqDestination>(std::move(s));
  }

  std::string url_, exchange_;
};

TEST_F(RabbitMqDestinationTest, ConfirmedMessagesCarryPropertiesAndRoutingKey) {
  RabbitMqDestinationSettings s = Settings();
  s.static_headers = {{"x-static", "s"}, {"x-over", "static"}};
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  Consumer consumer(url_, exchange_, "#");
  std::string payload = "{\"name\":\"caf\xC3\xA9\",\"n\":1.50}";
  std::vector<OutboxRow> rows = {
      BrokerRow("11111111-1111-1111-1111-111111111111", "orders.created", "k1", payload,
                R"({"x-over":"row","x-row":"r"})"),
      BrokerRow("22222222-2222-2222-2222-222222222222", "orders.updated", std::nullopt, "{}")};
  rows[0].attempt = 3;
  std::vector<OutboundMessage> batch = testing::BatchOf(rows);
  batch[1].routing_key = "route.key";  // the route's routingKeyTemplate wins
  testing::CollectingSink sink;
  d->PublishBatch(batch, sink);
  ASSERT_EQ(sink.at(0).kind, Outcome::Kind::kDelivered) << sink.at(0).error;
  ASSERT_EQ(sink.at(1).kind, Outcome::Kind::kDelivered) << sink.at(1).error;

  std::vector<Received> got = consumer.Take(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].routing_key, "orders.created");  // default {{ topic }}
  EXPECT_EQ(got[0].exchange, exchange_);
  EXPECT_EQ(got[0].message_id, "11111111-1111-1111-1111-111111111111");
  EXPECT_EQ(got[0].content_type, "application/json");
  EXPECT_EQ(got[0].delivery_mode, 2);
  EXPECT_EQ(got[0].string_headers["x-topic"], "orders.created");
  EXPECT_EQ(got[0].int_headers["x-attempt"], 3);
  EXPECT_EQ(got[0].header_order.front(), "x-topic");
  EXPECT_EQ(got[0].header_order[1], "x-attempt");
  EXPECT_EQ(got[1].routing_key, "route.key");
}

TEST_F(RabbitMqDestinationTest, TransientDeliveryModeAndRoutingKeyTemplate) {
  RabbitMqDestinationSettings s = Settings();
  s.persistent = false;
  s.routing_key_template = "{{ payload.region }}.{{ topic }}";
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  Consumer consumer(url_, exchange_, "#");
  std::vector<Outcome> out = PublishAll(*d, {BrokerRow("a", "t1", "k", R"({"region":"eu"})")});
  ASSERT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  std::vector<Received> got = consumer.Take(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].delivery_mode, 1);
  EXPECT_EQ(got[0].routing_key, "eu.t1");
}

TEST_F(RabbitMqDestinationTest, UnroutableMessageIsARetryAndOnlyThatOne) {
  auto d = Started(Settings());
  ASSERT_NE(d, nullptr);
  Consumer consumer(url_, exchange_, "routed.#");
  std::vector<Outcome> out = PublishAll(
      *d, {BrokerRow("r1", "routed.a", "k", "{}"), BrokerRow("u1", "nowhere.a", "k", "{}"),
           BrokerRow("r2", "routed.b", "k", "{}")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  EXPECT_EQ(out[1].kind, Outcome::Kind::kRetry);
  EXPECT_THAT(out[1].error, HasSubstr("unroutable"));
  EXPECT_THAT(out[1].error, HasSubstr("nowhere.a"));
  EXPECT_EQ(out[2].kind, Outcome::Kind::kDelivered) << out[2].error;
  EXPECT_EQ(consumer.Take(2).size(), 2u);
}

// A lost claim (docs/guarantees.md §3) while the batch waits for the channel: another batch
// holds it, awaiting confirms that the broker's side of a loopback forwarder holds back. The
// cancel flag is set from another thread, as the lease keeper does when a renewal finds the row
// taken: the waiting batch returns at once with its message cancelled, before the batch ahead
// has its confirm, and the message never reaches the queue.
TEST_F(RabbitMqDestinationTest, AMessageCancelledWhileWaitingForTheChannelIsNeverPublished) {
  using namespace std::chrono_literals;
  using Clock = std::chrono::steady_clock;
  const std::string authority = url_.substr(url_.rfind('@') + 1);  // host:port/vhost
  const size_t colon = authority.find(':');
  ASSERT_NE(colon, std::string::npos) << "QB_TEST_AMQP_URL names no port";
  const int broker_port = std::atoi(authority.c_str() + colon + 1);
  const int port = testing::UnusedLoopbackPort();
  testing::TcpForwarder forwarder(port, broker_port);
  ASSERT_TRUE(forwarder.Start().ok());
  RabbitMqDestinationSettings s = Settings();
  s.url = url_.substr(0, url_.rfind('@') + 1) + "127.0.0.1:" + std::to_string(port) +
          authority.substr(authority.find('/') == std::string::npos ? authority.size()
                                                                    : authority.find('/'));
  s.confirm_timeout_ms = 10000;
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  Consumer consumer(url_, exchange_, "#");  // straight to the broker
  Outcome warm = PublishAll(*d, {BrokerRow("w", "t", std::nullopt, R"({"n":0})")})[0];
  ASSERT_EQ(warm.kind, Outcome::Kind::kDelivered) << warm.error;

  forwarder.HoldReplies(true);  // "a" reaches the broker; its confirm does not come back yet
  std::vector<OutboxRow> ahead_rows = {BrokerRow("a", "t", std::nullopt, R"({"n":1})")};
  std::vector<OutboundMessage> ahead_batch = testing::BatchOf(ahead_rows);
  testing::CollectingSink ahead_sink;
  std::atomic<bool> ahead_done{false};
  std::thread ahead([&] {
    d->PublishBatch(ahead_batch, ahead_sink);
    ahead_done = true;
  });
  // "a" reached the broker (the consumer reads it straight from there): the batch ahead holds the
  // channel while it waits for the confirm.
  std::vector<Received> got = consumer.Take(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].message_id, "w");
  EXPECT_EQ(got[1].message_id, "a");

  std::vector<OutboxRow> lost_rows = {BrokerRow("b", "t", std::nullopt, R"({"n":2})")};
  std::vector<OutboundMessage> lost_batch = testing::BatchOf(lost_rows);
  std::atomic<bool> lost{false};
  lost_batch[0].cancel = &lost;
  testing::CollectingSink lost_sink;
  std::atomic<bool> lost_done{false};
  Clock::time_point lost_returned{};
  std::thread waiting([&] {
    d->PublishBatch(lost_batch, lost_sink);
    lost_returned = Clock::now();
    lost_done = true;
  });
  // "b" found the channel taken (no batch before "a" waited for it) and waits for it.
  EXPECT_TRUE(testing::WaitUntil([&] { return d->ChannelWaitsForTest() > 0; }, 5s))
      << "the batch did not wait for the channel";
  EXPECT_FALSE(lost_done) << "the batch did not wait for the channel";
  const Clock::time_point cancelled_at = Clock::now();
  lost = true;
  bool returned = testing::WaitUntil([&] { return lost_done.load(); }, 2s);
  // Checked before the confirm is let through: the batch ahead still holds the channel.
  const bool ahead_was_done = ahead_done;
  forwarder.HoldReplies(false);
  waiting.join();
  ahead.join();

  EXPECT_TRUE(returned) << "the cancelled batch did not return within 2 s of the cancel";
  EXPECT_FALSE(ahead_was_done) << "the batch ahead had its confirm: nothing waited";
  EXPECT_LT(lost_returned - cancelled_at, 1s);
  EXPECT_EQ(lost_sink.at(0).kind, Outcome::Kind::kCancelled)
      << KindName(lost_sink.at(0).kind) << " " << lost_sink.at(0).error;
  EXPECT_EQ(ahead_sink.at(0).kind, Outcome::Kind::kDelivered) << ahead_sink.at(0).error;
  // Every publish had its confirm: the queue holds what reached it, no need to wait for more.
  EXPECT_TRUE(consumer.Drain().empty()) << "the cancelled message was never published";
}

TEST_F(RabbitMqDestinationTest, ExchangeFromColumnAndEmptyExchange) {
  RabbitMqDestinationSettings s = Settings();
  s.exchange = "ignored";
  s.exchange_from = "aggregate_type";
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  Consumer consumer(url_, exchange_, "#");
  OutboxRow with_type = BrokerRow("a", "t", "k", "{}");
  with_type.aggregate_type = exchange_;
  OutboxRow without = BrokerRow("b", "t", "k", "{}");
  std::vector<Outcome> out = PublishAll(*d, {with_type, without});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  EXPECT_EQ(out[1].kind, Outcome::Kind::kRetry);
  EXPECT_THAT(out[1].error, HasSubstr("rendered an empty exchange"));
  EXPECT_EQ(consumer.Take(1).size(), 1u);
}

TEST_F(RabbitMqDestinationTest, ConnectionClosedByTheBrokerIsRebuiltOnTheNextBatch) {
  auto d = Started(Settings());
  ASSERT_NE(d, nullptr);
  {
    Consumer before(url_, exchange_, "#");
    Outcome o = PublishAll(*d, {BrokerRow("a", "t", "k", "{}")})[0];
    ASSERT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
    ASSERT_EQ(before.Take(1).size(), 1u);
  }

  std::string script = std::string(QUEUEBOX_SOURCE_DIR) + "/scripts/services.sh";
  ASSERT_EQ(std::system(
                ("bash " + script + " rabbitmqctl close_all_connections 'queuebox test' >/dev/null")
                    .c_str()),
            0);
  // Wait until the broker has really closed them (a condition, not a sleep).
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        FILE* f = ::popen(("bash " + script + " rabbitmqctl list_connections pid").c_str(), "r");
        if (f == nullptr) return false;
        char buf[256];
        size_t n = std::fread(buf, 1, sizeof buf, f);
        ::pclose(f);
        return n == 0;
      },
      std::chrono::seconds(60)));

  Consumer consumer(url_, exchange_, "#");
  std::vector<Outcome> out = PublishAll(*d, {BrokerRow("b", "t", "k", R"({"after":1})")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  std::vector<Received> got = consumer.Take(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].body, R"({"after":1})");
  EXPECT_TRUE(d->Health().ok());
}

// ---- configuration errors through LoadConfig (no server needed) ----

class RabbitMqConfigTest : public testing::ConfigFileTest {};

TEST_F(RabbitMqConfigTest, EveryKeyIsChecked) {
  Result<Config> c = Load(
      "database:\n  url: /tmp/qb-rmq.db\ndestinations:\n  r:\n    type: rabbitmq\n"
      "    url: \"nota url\"\n    exchange: \"{{ x }}\"\n    exchangeFrom: id\n"
      "    exchangeType: headers\n    deliveryMode: durable\n"
      "routes:\n  - {topicPattern: \"**\", destination: r}\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), AllOf(HasSubstr("destinations.r.exchangeFrom"),
                                          HasSubstr("destinations.r.exchangeType"),
                                          HasSubstr("destinations.r.deliveryMode")));
  c = Load(
      "database:\n  url: /tmp/qb-rmq.db\ndestinations:\n  r:\n    type: rabbitmq\n"
      "    url: \"nota url\"\n    exchange: \"{{ x }}\"\n"
      "routes:\n  - {topicPattern: \"**\", destination: r}\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr("destinations.r.url: not a valid AMQP URI"),
                    HasSubstr("destinations.r.exchange: unknown placeholder '{{ x }}'")));
  c = Load(
      "database:\n  url: /tmp/qb-rmq.db\ndestinations:\n  r:\n    type: rabbitmq\n"
      "routes:\n  - {topicPattern: \"**\", destination: r}\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr("destinations.r.url"), HasSubstr("destinations.r.exchange")));
}

TEST_F(RabbitMqConfigTest, ValidBlockLoadsAndBuilds) {
  Result<Config> c = Load(
      "database:\n  url: /tmp/qb-rmq.db\ndestinations:\n  r:\n    type: rabbitmq\n"
      "    url: amqp://guest:guest@127.0.0.1:5672/\n    exchange: events\n"
      "routes:\n  - {topicPattern: \"**\", destination: r}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const DestinationConfig& dc = c->destinations.at("r");
  EXPECT_EQ(dc.options.value("exchangeType", ""), "topic");
  EXPECT_EQ(dc.options.value("deliveryMode", ""), "persistent");
  EXPECT_EQ(dc.options.value("routingKeyTemplate", ""), "{{ topic }}");
  Result<std::unique_ptr<Destination>> d =
      FindDestinationType("rabbitmq")->create(dc, DestinationContext{});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->type(), "rabbitmq");
}

}  // namespace
}  // namespace queuebox
#else
#include <gtest/gtest.h>

#include "testing/source_dir.h"
TEST(BrokerDestination, NotBuilt) { GTEST_SKIP() << "QB_WITH_RABBITMQ is off"; }
#endif  // QB_WITH_RABBITMQ
