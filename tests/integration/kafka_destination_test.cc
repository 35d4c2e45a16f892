// The kafka destination against librdkafka's in-process mock cluster (3 brokers on 127.0.0.1):
// header order, record keys, templates, injected retriable errors, brokers down, a slow leader,
// empty topics. Test consumers use assign(), not subscribe(). What every destination does is in
// tests/contract/destination_contract_test.cc.
#ifdef QB_WITH_KAFKA
#include "destinations/kafka/kafka_destination.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "config/config_test_util.h"
#include "testing/broker_servers.h"
#include "testing/broker_testing.h"
#include "testing/kafka_reader.h"

namespace queuebox {
namespace {

using ::queuebox::testing::BrokerRow;
using ::queuebox::testing::KindName;
using ::queuebox::testing::PublishAll;
using ::testing::AllOf;
using ::testing::HasSubstr;

using Record = ::queuebox::testing::KafkaRecord;

class KafkaDestinationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    mock_ = new testing::MockKafkaCluster(3);
    cluster_ = mock_->get();
    bootstraps_ = mock_->bootstraps();
  }
  static void TearDownTestSuite() {
    delete mock_;
    mock_ = nullptr;
  }

  // A fresh topic for each test.
  std::string NewTopic(int partitions = 1) {
    static std::atomic<int> n{0};
    std::string t = "qb.test." + std::to_string(++n);
    EXPECT_EQ(rd_kafka_mock_topic_create(cluster_, t.c_str(), partitions, 3),
              RD_KAFKA_RESP_ERR_NO_ERROR);
    return t;
  }

  KafkaDestinationSettings Settings(std::string topic) {
    KafkaDestinationSettings s;
    s.name = "events";
    s.bootstrap_servers = bootstraps_;
    s.topic = std::move(topic);
    s.timeout_ms = 10000;
    return s;
  }

  std::unique_ptr<KafkaDestination> Started(KafkaDestinationSettings s) {
    return testing::StartedDestination<KafkaDestination>(std::move(s));
  }

  std::vector<Record> Consume(const std::string& topic, size_t count) {
    return testing::ConsumeKafka(bootstraps_, topic, count);
  }
  int64_t Stored(const std::string& topic) {
    return testing::StoredKafkaRecords(bootstraps_, topic);
  }

  static testing::MockKafkaCluster* mock_;
  static rd_kafka_mock_cluster_t* cluster_;
  static std::string bootstraps_;
};

testing::MockKafkaCluster* KafkaDestinationTest::mock_ = nullptr;
rd_kafka_mock_cluster_t* KafkaDestinationTest::cluster_ = nullptr;
std::string KafkaDestinationTest::bootstraps_;

// A record's headers: the static ones with a row header in place of one of the same name, the
// other row headers, then the standard ones.
TEST_F(KafkaDestinationTest, HeadersArriveInThisOrder) {
  std::string topic = NewTopic();
  KafkaDestinationSettings s = Settings(topic);
  s.static_headers = {{"x-static", "s"}, {"x-over", "static"}};
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  std::vector<OutboxRow> rows = {BrokerRow("11111111-1111-1111-1111-111111111111", "orders.created",
                                           "k1", "{}", R"({"x-over":"row","x-row":"r"})")};
  rows[0].attempt = 2;
  std::vector<Outcome> out = PublishAll(*d, rows);
  ASSERT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;

  std::vector<Record> got = Consume(topic, 1);
  ASSERT_EQ(got.size(), 1u);
  std::vector<std::pair<std::string, std::string>> want = {
      {"x-over", "row"},  // a row header replaces the static one
      {"x-static", "s"},
      {"x-row", "r"},
      {"x-message-id", "11111111-1111-1111-1111-111111111111"},
      {"x-topic", "orders.created"},
      {"x-attempt", "2"}};
  EXPECT_EQ(got[0].headers, want);
}

TEST_F(KafkaDestinationTest, RouteKeyWinsAndBlankKeyMeansNoKey) {
  std::string topic = NewTopic();
  auto d = Started(Settings(topic));
  ASSERT_NE(d, nullptr);
  std::vector<OutboxRow> rows = {BrokerRow("id-1", "t", "row-key", "{}"),
                                 BrokerRow("id-2", "t", std::nullopt, "{}"),
                                 BrokerRow("id-3", "t", "  ", "{}")};
  std::vector<OutboundMessage> batch = testing::BatchOf(rows);
  batch[0].routing_key = "route-key";
  testing::CollectingSink sink;
  d->PublishBatch(batch, sink);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(sink.at(i).kind, Outcome::Kind::kDelivered) << i << ": " << sink.at(i).error;
  }
  std::vector<Record> got = Consume(topic, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].key, "route-key");
  EXPECT_EQ(got[1].key, std::nullopt);
  EXPECT_EQ(got[2].key, std::nullopt);  // blank => no key
}

// A lost claim (docs/guarantees.md §3) while the message waits for room in librdkafka's full
// local queue: queue.buffering.max.messages=1, and the one place is held by another batch's
// message that a slow leader has not acknowledged. The cancel flag is set from another thread,
// as the lease keeper does when a renewal finds the row taken: the waiting message is never
// produced, is reported cancelled, and its batch returns at once, before the message ahead is
// even acknowledged (so it was still waiting, not handed over).
TEST_F(KafkaDestinationTest, AMessageCancelledWhileWaitingForRoomInTheLocalQueueIsNeverProduced) {
  using namespace std::chrono_literals;
  using Clock = std::chrono::steady_clock;
  std::string topic = NewTopic();
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(cluster_, topic.c_str(), 0, 1),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  KafkaDestinationSettings s = Settings(topic);
  s.timeout_ms = 40000;
  s.librdkafka["queue.buffering.max.messages"] = "1";
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  // Warm up (producer id and metadata known) so the wait below is only the leader's.
  Outcome warm = PublishAll(*d, {BrokerRow("w", "t", std::nullopt, R"({"n":0})")})[0];
  ASSERT_EQ(warm.kind, Outcome::Kind::kDelivered) << warm.error;

  // The leader answers after 15 s (room for a sanitizer run): the next message holds the local
  // queue's only place.
  ASSERT_EQ(rd_kafka_mock_broker_set_rtt(cluster_, 1, 15000), RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<OutboxRow> ahead_rows = {BrokerRow("a", "t", std::nullopt, R"({"n":1})")};
  std::vector<OutboundMessage> ahead_batch = testing::BatchOf(ahead_rows);
  testing::CollectingSink ahead_sink;
  std::atomic<bool> ahead_done{false};
  std::thread ahead([&] {
    d->PublishBatch(ahead_batch, ahead_sink);
    ahead_done = true;
  });
  // "a" is taken by librdkafka at once: it holds the local queue's one place.
  EXPECT_TRUE(testing::WaitUntil([&] { return d->LocalQueueLengthForTest() == 1; }, 5s));

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
  // "b" found the queue full and waits for room (a poll, then the cancel flag, in a loop).
  // (Neither "w" nor "a" found it full.)
  EXPECT_TRUE(testing::WaitUntil([&] { return d->QueueFullWaitsForTest() > 0; }, 5s))
      << "the batch did not wait for room in the local queue";
  EXPECT_FALSE(lost_done) << "the batch did not wait for room in the local queue";
  const Clock::time_point cancelled_at = Clock::now();
  lost = true;
  bool returned = testing::WaitUntil([&] { return lost_done.load(); }, 10s);
  // Checked before the joins: the message ahead is still unacknowledged.
  const bool ahead_was_done = ahead_done;
  waiting.join();
  ahead.join();
  rd_kafka_mock_broker_set_rtt(cluster_, 1, 0);

  EXPECT_TRUE(returned) << "the cancelled batch did not return within 10 s of the cancel";
  EXPECT_FALSE(ahead_was_done) << "the batch ahead finished first: the queue was not full";
  EXPECT_LT(lost_returned - cancelled_at, 5s);  // not after the leader's 15 s
  EXPECT_EQ(lost_sink.at(0).kind, Outcome::Kind::kCancelled)
      << KindName(lost_sink.at(0).kind) << " " << lost_sink.at(0).error;
  EXPECT_EQ(ahead_sink.at(0).kind, Outcome::Kind::kDelivered) << ahead_sink.at(0).error;
  EXPECT_EQ(Stored(topic), 2);  // "w" and "a"; never "b"
  std::vector<Record> got = Consume(topic, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].value, R"({"n":0})");
  EXPECT_EQ(got[1].value, R"({"n":1})");
}

TEST_F(KafkaDestinationTest, TopicTemplateAndTopicFrom) {
  std::string base = NewTopic();
  std::string by_type = base + ".order";
  ASSERT_EQ(rd_kafka_mock_topic_create(cluster_, by_type.c_str(), 1, 3),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  auto templ = Started(Settings(base + ".{{ payload.kind }}"));
  ASSERT_NE(templ, nullptr);
  std::vector<Outcome> out = PublishAll(*templ, {BrokerRow("a", "t", "k", R"({"kind":"order"})")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;

  KafkaDestinationSettings s = Settings("ignored-{{ topic }}");
  s.topic_from = "aggregate_type";
  auto from = Started(std::move(s));
  ASSERT_NE(from, nullptr);
  OutboxRow row = BrokerRow("b", "t", "k", "{}");
  row.aggregate_type = by_type;
  out = PublishAll(*from, {row});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;

  std::vector<Record> got = Consume(by_type, 2);
  ASSERT_EQ(got.size(), 2u);
}

TEST_F(KafkaDestinationTest, EmptyRenderedTopicFailsWithoutADefault) {
  auto d = Started(Settings("{{ payload.missing }}"));
  ASSERT_NE(d, nullptr);
  std::vector<Outcome> out = PublishAll(*d, {BrokerRow("a", "t", "k", "{}")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kRetry);
  EXPECT_THAT(out[0].error, HasSubstr("rendered an empty topic"));
}

TEST_F(KafkaDestinationTest, InjectedRetriableErrorsAreRetriedUntilDelivered) {
  std::string topic = NewTopic();
  auto d = Started(Settings(topic));
  ASSERT_NE(d, nullptr);
  rd_kafka_mock_push_request_errors(cluster_, 0 /* Produce */, 2,
                                    RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
                                    RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION);
  std::vector<Outcome> out = PublishAll(*d, {BrokerRow("a", "t", "k", R"({"x":1})")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  EXPECT_EQ(Stored(topic), 1);  // idempotent producer: retried once, stored once
  EXPECT_EQ(Consume(topic, 1).size(), 1u);
}

TEST_F(KafkaDestinationTest, BrokersDownIsAnOutageThenDeliveryResumes) {
  std::string topic = NewTopic();
  KafkaDestinationSettings s = Settings(topic);
  s.timeout_ms = 2000;
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  // Warm up (metadata known) so the failure below is about the brokers, not the topic.
  ASSERT_EQ(PublishAll(*d, {BrokerRow("w", "t", "k", "{}")})[0].kind, Outcome::Kind::kDelivered);

  ASSERT_EQ(rd_kafka_mock_broker_set_down(cluster_, -1), RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<Outcome> out = PublishAll(*d, {BrokerRow("a", "t", "k", "{}")});
  Status health_while_down = d->Health();
  rd_kafka_mock_broker_set_up(cluster_, -1);
  // The destination's fault, not the message's: the relay releases the row (no attempt spent).
  EXPECT_EQ(out[0].kind, Outcome::Kind::kUnavailable) << KindName(out[0].kind) << out[0].error;
  EXPECT_EQ(health_while_down.code(), StatusCode::kUnavailable);
  EXPECT_THAT(out[0].error, HasSubstr("Kafka"));

  // The producer reconnects with its own backoff: delivery resumes within a few batches.
  std::string last_error;
  bool delivered = testing::WaitUntil(
      [&] {
        Outcome o = PublishAll(*d, {BrokerRow("a", "t", "k", "{}")})[0];
        last_error = o.error;
        return o.kind == Outcome::Kind::kDelivered;
      },
      std::chrono::seconds(30));
  EXPECT_TRUE(delivered) << last_error;
  EXPECT_TRUE(d->Health().ok()) << d->Health().ToString();
}

TEST_F(KafkaDestinationTest, ALeaderThatDoesNotAnswerIsAnOutage) {
  // The leader's connection stays up and the other brokers answer, so librdkafka never reports
  // all brokers down: the message, which had its partition, timed out on a leader that did not
  // answer. The destination's fault (before: an attempt spent, as for a missing topic).
  std::string topic = NewTopic();
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(cluster_, topic.c_str(), 0, 1),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  KafkaDestinationSettings s = Settings(topic);
  s.timeout_ms = 2000;
  auto d = Started(std::move(s));
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(PublishAll(*d, {BrokerRow("w", "t", "k", "{}")})[0].kind, Outcome::Kind::kDelivered);

  ASSERT_EQ(rd_kafka_mock_broker_set_rtt(cluster_, 1, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<Outcome> out = PublishAll(*d, {BrokerRow("a", "t", "k", "{}")});
  rd_kafka_mock_broker_set_rtt(cluster_, 1, 0);
  EXPECT_EQ(out[0].kind, Outcome::Kind::kUnavailable) << KindName(out[0].kind) << out[0].error;
  EXPECT_THAT(out[0].error, HasSubstr("timed out"));
  EXPECT_TRUE(d->Health().ok()) << d->Health().ToString();
}

// ---- configuration errors through LoadConfig (no server needed) ----

class KafkaConfigTest : public testing::ConfigFileTest {
 protected:
  std::string Error(const std::string& destination_block) {
    Result<Config> c =
        Load("database:\n  url: /tmp/qb-kafka.db\ndestinations:\n  k:\n" + destination_block +
             "routes:\n  - {topicPattern: \"**\", destination: k}\n");
    EXPECT_FALSE(c.ok());
    return c.ok() ? "" : c.status().message();
  }
};

TEST_F(KafkaConfigTest, EveryKeyIsChecked) {
  std::string e = Error(
      "    type: kafka\n    topic: \"{{ region }}\"\n    topicFrom: id\n    timeoutMs: 500\n"
      "    securityProtocol: TLS\n    keyTemplate: \"{{ x }}\"\n");
  EXPECT_THAT(e, AllOf(HasSubstr("destinations.k.bootstrapServers"),
                       HasSubstr("destinations.k.topicFrom"), HasSubstr("destinations.k.timeoutMs"),
                       HasSubstr("destinations.k.securityProtocol")));
  e = Error(
      "    type: kafka\n    bootstrapServers: 127.0.0.1:9092\n    topic: \"{{ region }}\"\n"
      "    keyTemplate: \"{{ x }}\"\n    securityProtocol: SASL_SSL\n");
  EXPECT_THAT(
      e, AllOf(HasSubstr("destinations.k.topic: unknown placeholder '{{ region }}'"),
               HasSubstr("destinations.k.keyTemplate: unknown placeholder '{{ x }}'"),
               HasSubstr("destinations.k.saslMechanism"), HasSubstr("destinations.k.saslUsername"),
               HasSubstr("destinations.k.saslPassword")));
}

TEST_F(KafkaConfigTest, ValidBlockLoadsAndBuilds) {
  Result<Config> c = Load(
      "database:\n  url: /tmp/qb-kafka.db\ndestinations:\n  k:\n    type: kafka\n"
      "    bootstrapServers: 127.0.0.1:9092\n    topic: \"events.{{ aggregateType }}\"\n"
      "    headers: {x-a: b}\nroutes:\n  - {topicPattern: \"**\", destination: k}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const DestinationConfig& dc = c->destinations.at("k");
  EXPECT_EQ(dc.options.value("timeoutMs", 0), 30000);
  EXPECT_EQ(dc.options.value("keyTemplate", ""), "{{ key }}");
  const DestinationType* type = FindDestinationType("kafka");
  ASSERT_NE(type, nullptr);
  Result<std::unique_ptr<Destination>> d = type->create(dc, DestinationContext{});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->type(), "kafka");
}

}  // namespace
}  // namespace queuebox
#else
#include <gtest/gtest.h>
TEST(BrokerDestination, NotBuilt) { GTEST_SKIP() << "QB_WITH_KAFKA is off"; }
#endif  // QB_WITH_KAFKA
