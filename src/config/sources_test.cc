// sources.<name> and inbox.*: the start-up checks of QueueBox reference §11.4 and what this build
// refuses by name (source transforms); the broker kinds' tables and checks (§11.3).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config_test_util.h"
#include "core/header_filter.h"
#include "sources/http/http_settings.h"
#include "sources/kafka/kafka_settings.h"
#include "sources/nats/nats_settings.h"
#include "sources/rabbitmq/rabbitmq_settings.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using Env = std::map<std::string, std::string>;

constexpr char kDatabase[] = "database:\n  url: /tmp/queuebox-test.db\n";

class SourcesConfigTest : public testing::ConfigFileTest {
 protected:
  std::string Error(const std::string& yaml, Env env = {}) {
    Result<Config> c = Load(std::string(kDatabase) + yaml, std::move(env));
    EXPECT_FALSE(c.ok());
    return c.ok() ? "" : c.status().message();
  }
};

TEST_F(SourcesConfigTest, HttpSourceBindsWithDefaults) {
  Result<Config> c = Load(std::string(kDatabase) + R"(
inbox:
  basePath: /hooks
sources:
  stripe:
    path: /stripe
    idempotencyKeyPath: $.id
    eventTypePath: [$.type, $.kind]
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->inbox.base_path, "/hooks");
  EXPECT_EQ(c->inbox.max_body_bytes, 1048576);
  ASSERT_EQ(c->sources.count("stripe"), 1u);
  EXPECT_EQ(c->sources.at("stripe").type, "http");
  auto s = sources::BindHttpSource(c->sources.at("stripe"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->path, "/stripe");
  EXPECT_EQ(s->topic, "{{ eventType }}");
  EXPECT_EQ(s->idempotency_key_path, std::vector<std::string>{"$.id"});
  EXPECT_EQ(s->keys.event_type_path, (std::vector<std::string>{"$.type", "$.kind"}));
  EXPECT_EQ(s->keys.consumption, "push");
}

TEST_F(SourcesConfigTest, BrokerKindsBindWithQueueBoxDefaults) {
  Result<Config> c = Load(std::string(kDatabase) + R"(
sources:
  orders:
    type: kafka
    bootstrapServers: 127.0.0.1:9092
    topics: [orders]
    groupId: queuebox-orders
  jobs:
    type: rabbitmq
    queueName: jobs
    connectionUrl: amqp://guest:guest@127.0.0.1:5672
    eventTypeFromHeader: true
    attributeHeaders:
      eventType: x-kind
    topic: "{{ eventType }}"
  stream:
    type: nats
    servers: nats://127.0.0.1:4222
    stream: ORDERS
    durable: queuebox-orders
    idempotencyKeyPath: [$.key, $.id]
    ackWaitMs: 5000
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto k = sources::BindKafkaSource(c->sources.at("orders"));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->topics, std::vector<std::string>{"orders"});
  EXPECT_EQ(k->group_id, "queuebox-orders");
  EXPECT_EQ(k->auto_offset_reset, "earliest");
  EXPECT_EQ(k->max_poll_records, 100);
  EXPECT_EQ(k->broker.topic, "{{ source }}");
  EXPECT_EQ(k->broker.idempotency_key_path, std::vector<std::string>{"$.id"});
  EXPECT_EQ(k->broker.attribute_headers.idempotency_key, "x-idempotency-key");
  auto r = sources::BindRabbitmqSource(c->sources.at("jobs"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prefetch_count, 10);
  EXPECT_FALSE(r->declare_queue);
  EXPECT_TRUE(r->broker.event_type_from_header);
  EXPECT_EQ(r->broker.attribute_headers.event_type, "x-kind");
  EXPECT_EQ(r->broker.attribute_headers.aggregate_id, "x-aggregate-id");
  auto n = sources::BindNatsSource(c->sources.at("stream"));
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->ack_wait_ms, 5000);
  EXPECT_EQ(n->batch_size, 100);
  EXPECT_EQ(n->broker.idempotency_key_path, (std::vector<std::string>{"$.key", "$.id"}));
  EXPECT_FALSE(sources::BindNatsSource(c->sources.at("orders")).ok());
}

TEST_F(SourcesConfigTest, BrokerKindsListEveryProblemWithItsPath) {
  std::string e = Error(R"(
sources:
  orders:
    type: kafka
    bootstrapServers: 127.0.0.1:9092
    topics: []
    groupId: g
    securityProtocol: SASL_SSL
  jobs:
    type: rabbitmq
    queueName: jobs
    connectionUrl: http://127.0.0.1:5672
    topic: "{{ eventType }}"
  stream:
    type: nats
    servers: nats://127.0.0.1:4222
    stream: " "
    durable: d
    username: u
    scheduledAtPath: $.at
)");
  EXPECT_THAT(e, HasSubstr("sources.orders.topics: must name at least one topic"));
  EXPECT_THAT(e, HasSubstr("sources.orders.saslMechanism: required when securityProtocol is "
                           "SASL_SSL"));
  EXPECT_THAT(e, HasSubstr("sources.jobs.connectionUrl: must be an amqp:// or amqps:// URL"));
  EXPECT_THAT(e, HasSubstr("sources.jobs.topic: renders {{ eventType }}, so the source needs "
                           "eventTypePath, eventTypeExpression or eventTypeFromHeader: true"));
  EXPECT_THAT(e, HasSubstr("sources.stream.stream: must not be blank"));
  EXPECT_THAT(e, HasSubstr("sources.stream.password: username and password go together"));
  EXPECT_THAT(e, HasSubstr("sources.stream.initialDelay: scheduledAtHeader and scheduledAtPath "
                           "need initialDelay above 0"));
}

TEST_F(SourcesConfigTest, TransformsAndExpressionsBind) {
  Result<Config> c = Load(std::string(kDatabase) + R"(
sources:
  stripe:
    path: /stripe
    idempotencyKeyExpression: id
    eventTypeExpression: $uppercase(type)
    topic: "{{ eventType }}"
    transform:
      expression: "{'id': id}"
      onError: Dead
  orders:
    type: kafka
    bootstrapServers: 127.0.0.1:9092
    topics: [orders]
    groupId: g
    aggregateIdExpression: order.id
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto s = sources::BindHttpSource(c->sources.at("stripe"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->keys.idempotency_key_expression, "id");
  EXPECT_EQ(s->keys.event_type_expression, "$uppercase(type)");
  ASSERT_TRUE(s->keys.transform.has_value());
  EXPECT_EQ(s->keys.transform->expression, "{'id': id}");
  EXPECT_EQ(s->keys.transform->on_error, "Dead");
  EXPECT_EQ(s->keys.transform->timeout_ms, 100);
  auto k = sources::BindKafkaSource(c->sources.at("orders"));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->broker.keys.aggregate_id_expression, "order.id");
  EXPECT_FALSE(k->broker.keys.transform.has_value());
  EXPECT_THAT(Error("sources:\n  s:\n    path: /s\n    idempotencyKeyPath: $.id\n"
                    "    transform:\n      expression: $\n      onError: fail\n"),
              HasSubstr("sources.s.transform.onError"));
}

TEST_F(SourcesConfigTest, StartUpChecks) {
  std::string e = Error(R"(
sources:
  a:
    path: stripe
    idempotencyKeyPath: $..id
  b:
    path: /b
    idempotencyKeyPath: $.id
    eventTypePath: $.type
  c:
    path: /c
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    idempotencyKeyHeader: Authorization
  d:
    path: /b
    idempotencyKeyPath: $.id
    eventTypePath: $.type
  e:
    path: /e
    eventTypePath: $.type
)");
  EXPECT_THAT(e, HasSubstr("sources.a.path: must start with /"));
  EXPECT_THAT(e, HasSubstr("sources.a.idempotencyKeyPath: $..id is not a definite JSONPath"));
  EXPECT_THAT(e, HasSubstr("sources.e.idempotencyKeyPath: required for an http source"));
  EXPECT_THAT(e, HasSubstr("sources.d.path: POST /inbox/b is already the route of source b"));
  EXPECT_THAT(e, HasSubstr("sources.c.idempotencyKeyHeader: Authorization carries a credential"));
}

// Issue 36: a provider's message id is the key of standard-webhooks and stripe sources, so they
// need none configured; other auth types still do; a signature header is never a key header; the
// provider types are not admin.auth types.
TEST_F(SourcesConfigTest, ProviderAuthTypesAndTheirKeys) {
  Result<Config> c = Load(std::string(kDatabase) + R"(
sources:
  sw:
    path: /sw
    eventTypePath: $.type
    auth: {type: standard-webhooks, secret: whsec_Zm9vYmFy, previousSecrets: [whsec_YmFy]}
  stripe:
    path: /stripe
    eventTypePath: $.type
    auth: {type: stripe, secret: whsec_s}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::string e = Error(R"(
sources:
  gh:
    path: /gh
    auth: {type: github, secret: s}
  sh:
    path: /sh
    idempotencyKeyHeader: webhook-signature
    auth: {type: standard-webhooks, secret: whsec_Zm9vYmFy}
admin:
  enabled: true
  auth: {type: stripe, secret: whsec_s}
)");
  EXPECT_THAT(e, HasSubstr("sources.gh.idempotencyKeyPath: required for an http source"));
  EXPECT_THAT(e, HasSubstr("sources.sh.idempotencyKeyHeader: webhook-signature carries a "
                           "credential"));
  EXPECT_THAT(e, HasSubstr("admin.auth.type"));
}

TEST_F(SourcesConfigTest, BasePathShape) {
  EXPECT_THAT(Error("inbox:\n  basePath: inbox/\n"),
              HasSubstr("inbox.basePath: must start with / and not end with /"));
}

// QueueBox's environment-variables page: a header filter set with list indexes at two levels.
// Values stay strings, as every variable's; the filter takes `exists: "true"`.
TEST_F(SourcesConfigTest, HeaderFilterFromEnvironmentListIndexes) {
  Result<Config> c = Load(std::string(kDatabase) + R"(
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    eventTypePath: $.type
)",
                          {{"QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_HEADER", "x-region"},
                           {"QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_IN_0", "eu"},
                           {"QUEUEBOX_SOURCES_ORDERS_FILTER_REQUIRE_0_IN_1", "uk"},
                           {"QUEUEBOX_SOURCES_ORDERS_FILTER_EXCLUDE_0_HEADER", "x-test"},
                           {"QUEUEBOX_SOURCES_ORDERS_FILTER_EXCLUDE_0_EXISTS", "true"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto s = sources::BindHttpSource(c->sources.at("orders"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->keys.filter, nlohmann::json::parse(
                                R"({"require": [{"header": "x-region", "in": ["eu", "uk"]}],
                                    "exclude": [{"header": "x-test", "exists": "true"}]})"));
  EXPECT_TRUE(HeaderFilter::Parse(s->keys.filter).ok());
}

}  // namespace
}  // namespace queuebox
