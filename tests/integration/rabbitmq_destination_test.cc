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

  // The broker's port in QB_TEST_AMQP_URL; 0 when it names none.
  int BrokerPort() const {
    const std::string authority = url_.substr(url_.rfind('@') + 1);  // host:port/vhost
    const size_t colon = authority.find(':');
    return colon == std::string::npos ? 0 : std::atoi(authority.c_str() + colon + 1);
  }
  // A started destination that reaches the broker through forwarder_ (a TcpForwarder on a new
  // loopback port, which can hold the broker's replies back); null after a failed assertion.
  std::unique_ptr<RabbitMqDestination> StartedThroughForwarder(int64_t confirm_timeout_ms,
                                                               int max_awaiting = 0) {
    EXPECT_NE(BrokerPort(), 0) << "QB_TEST_AMQP_URL names no port";
    const int port = testing::UnusedLoopbackPort();
    forwarder_ = std::make_unique<testing::TcpForwarder>(port, BrokerPort());
    if (!forwarder_->Start().ok()) {
      ADD_FAILURE() << "the forwarder cannot listen on " << port;
      return nullptr;
    }
    RabbitMqDestinationSettings s = Settings();
    s.url = UrlThrough(port);
    s.confirm_timeout_ms = confirm_timeout_ms;
    s.max_batches_awaiting_confirms = max_awaiting;
    return Started(std::move(s));
  }
  // QB_TEST_AMQP_URL with 127.0.0.1:`port` (a TcpForwarder) instead of the broker's address.
  std::string UrlThrough(int port) const {
    const size_t at = url_.rfind('@') + 1;
    const size_t vhost = url_.find('/', at);
    return url_.substr(0, at) + "127.0.0.1:" + std::to_string(port) +
           (vhost == std::string::npos ? std::string() : url_.substr(vhost));
  }

  std::string url_, exchange_;
  std::unique_ptr<testing::TcpForwarder> forwarder_;  // StartedThroughForwarder
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
  // The next batch waits while one awaits its confirm.
  auto d = StartedThroughForwarder(/*confirm_timeout_ms=*/60000, /*max_awaiting=*/1);
  ASSERT_NE(d, nullptr);
  Consumer consumer(url_, exchange_, "#");  // straight to the broker
  Outcome warm = PublishAll(*d, {BrokerRow("w", "t", std::nullopt, R"({"n":0})")})[0];
  ASSERT_EQ(warm.kind, Outcome::Kind::kDelivered) << warm.error;

  forwarder_->HoldReplies(true);  // "a" reaches the broker; its confirm does not come back yet
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
  bool returned = testing::WaitUntil([&] { return lost_done.load(); }, 20s);
  // Checked before the confirm is let through: the batch ahead still holds the channel.
  const bool ahead_was_done = ahead_done;
  forwarder_->HoldReplies(false);
  waiting.join();
  ahead.join();

  EXPECT_TRUE(returned) << "the cancelled batch did not return within 20 s of the cancel";
  EXPECT_FALSE(ahead_was_done) << "the batch ahead had its confirm: nothing waited";
  EXPECT_LT(lost_returned - cancelled_at, 10s);  // not after the held confirm's 60 s
  EXPECT_EQ(lost_sink.at(0).kind, Outcome::Kind::kCancelled)
      << KindName(lost_sink.at(0).kind) << " " << lost_sink.at(0).error;
  EXPECT_EQ(ahead_sink.at(0).kind, Outcome::Kind::kDelivered) << ahead_sink.at(0).error;
  // Every publish had its confirm: the queue holds what reached it, no need to wait for more.
  EXPECT_TRUE(consumer.Drain().empty()) << "the cancelled message was never published";
}

// A batch gives the channel up once it has published: the next one publishes while the first
// still awaits its confirm (held back by the forwarder), and one read of the socket settles both.
TEST_F(RabbitMqDestinationTest, ABatchPublishesWhileAnEarlierOneAwaitsItsConfirms) {
  using namespace std::chrono_literals;
  auto d = StartedThroughForwarder(/*confirm_timeout_ms=*/30000);
  ASSERT_NE(d, nullptr);
  Consumer consumer(url_, exchange_, "#");  // straight to the broker

  forwarder_->HoldReplies(true);
  std::vector<OutboxRow> first_rows = {BrokerRow("a1", "t", "k1", R"({"n":1})"),
                                       BrokerRow("a2", "t", "k2", R"({"n":2})")};
  std::vector<OutboxRow> second_rows = {BrokerRow("b1", "t", "k3", R"({"n":3})")};
  std::vector<OutboundMessage> first = testing::BatchOf(first_rows);
  std::vector<OutboundMessage> second = testing::BatchOf(second_rows);
  testing::CollectingSink first_sink, second_sink;
  std::atomic<bool> first_done{false}, second_done{false};
  std::thread a([&] {
    d->PublishBatch(first, first_sink);
    first_done = true;
  });
  std::vector<Received> got = consumer.Take(2);
  ASSERT_EQ(got.size(), 2u);
  std::thread b([&] {
    d->PublishBatch(second, second_sink);
    second_done = true;
  });
  // The second batch reached the broker although no confirm of the first came back.
  got = consumer.Take(1, 20s);
  const bool both_out = got.size() == 1 && !first_done && !second_done;
  forwarder_->HoldReplies(false);
  a.join();
  b.join();

  ASSERT_EQ(got.size(), 1u) << "the second batch was not published while the first awaited";
  EXPECT_EQ(got[0].message_id, "b1");
  EXPECT_TRUE(both_out) << "a confirm came back while replies were held";
  EXPECT_EQ(d->OverlappedPublishesForTest(), 1);
  EXPECT_EQ(d->ChannelWaitsForTest(), 0);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(first_sink.at(i).kind, Outcome::Kind::kDelivered) << first_sink.at(i).error;
  }
  EXPECT_EQ(second_sink.at(0).kind, Outcome::Kind::kDelivered) << second_sink.at(0).error;
}

// A connection lost while several batches await their confirms fails all of them as an
// outage (the broker may or may not have the messages: the relay retries them).
TEST_F(RabbitMqDestinationTest, AConnectionLostUnderBatchesAwaitingConfirmsFailsEveryOne) {
  using namespace std::chrono_literals;
  auto d = StartedThroughForwarder(/*confirm_timeout_ms=*/30000);
  ASSERT_NE(d, nullptr);
  Consumer consumer(url_, exchange_, "#");

  forwarder_->HoldReplies(true);
  constexpr int kBatches = 3;
  std::vector<std::vector<OutboxRow>> rows(kBatches);
  std::vector<std::vector<OutboundMessage>> batches(kBatches);
  std::vector<testing::CollectingSink> sinks(kBatches);
  std::vector<std::thread> threads;
  for (int i = 0; i < kBatches; ++i) {
    const std::string id = "m" + std::to_string(i);
    rows[i] = {BrokerRow(id, "t", "k" + std::to_string(i), "{}")};
    batches[i] = testing::BatchOf(rows[i]);
    threads.emplace_back([&, i] { d->PublishBatch(batches[i], sinks[i]); });
  }
  ASSERT_EQ(consumer.Take(kBatches).size(), static_cast<size_t>(kBatches));  // all published
  const auto cut_at = std::chrono::steady_clock::now();
  forwarder_->Stop();  // closes the connection under the destination
  for (std::thread& t : threads) t.join();

  EXPECT_LT(std::chrono::steady_clock::now() - cut_at, 20s) << "waited for the confirm timeout";
  for (int i = 0; i < kBatches; ++i) {
    EXPECT_EQ(sinks[i].at(0).kind, Outcome::Kind::kUnavailable)
        << i << ": " << KindName(sinks[i].at(0).kind) << " " << sinks[i].at(0).error;
    EXPECT_THAT(sinks[i].at(0).error, HasSubstr("RabbitMQ connection lost")) << i;
  }
  EXPECT_FALSE(d->Health().ok());
}

// Many batches from many threads at once: each is delivered whole, each thread's messages in
// the order it published them, and batches did publish while others awaited their confirms.
TEST_F(RabbitMqDestinationTest, ConcurrentBatchesAreEachDeliveredInOrderWithConfirmsPipelined) {
  auto d = Started(Settings());
  ASSERT_NE(d, nullptr);
  Consumer consumer(url_, exchange_, "#");
  constexpr int kThreads = 8, kBatches = 10, kPerBatch = 20;
  std::atomic<int> not_delivered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 0; b < kBatches; ++b) {
        std::vector<OutboxRow> rows;
        for (int m = 0; m < kPerBatch; ++m) {
          const int n = b * kPerBatch + m;
          rows.push_back(BrokerRow("t" + std::to_string(t) + "-" + std::to_string(n), "t",
                                   "k" + std::to_string(t), "{\"n\":" + std::to_string(n) + "}"));
        }
        for (const Outcome& o : PublishAll(*d, rows)) {
          if (o.kind != Outcome::Kind::kDelivered) ++not_delivered;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(not_delivered.load(), 0);
  std::vector<Received> got = consumer.Take(kThreads * kBatches * kPerBatch);
  ASSERT_EQ(got.size(), static_cast<size_t>(kThreads * kBatches * kPerBatch));
  std::map<std::string, int> next;  // thread -> the next n it must deliver
  for (const Received& r : got) {
    const std::string thread = r.message_id.substr(0, r.message_id.find('-'));
    const int n = std::atoi(r.message_id.c_str() + r.message_id.find('-') + 1);
    EXPECT_EQ(n, next[thread]) << r.message_id;
    next[thread] = n + 1;
  }
  EXPECT_GT(d->OverlappedPublishesForTest(), 0) << "no batch published beside another";
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
