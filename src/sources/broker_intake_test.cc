// BrokerIntake: the key precedence of QueueBox reference §9.4 per broker kind, the dead raw row
// of §11.3, the header filter, header text and the body digest.
#include "sources/broker_intake.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace queuebox::sources {
namespace {

using nlohmann::json;

BrokerIntake Make(const std::string& kind, BrokerSourceKeys keys = {}) {
  auto made = BrokerIntake::Create(kind, "orders", keys);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return std::move(made).value();
}

BrokerMessage Body(std::string body) {
  BrokerMessage m;
  m.body = std::move(body);
  return m;
}

TEST(HeaderText, Utf8StaysAndOtherBytesAreBase64) {
  EXPECT_EQ(HeaderText("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_EQ(HeaderText(std::string("\xff\x00\x01", 3)), "base64:/wAB");
  EXPECT_EQ(HeaderText(std::string("a\0b", 3)), "base64:YQBi");
  EXPECT_EQ(HeaderText("\xc0\xaf"), "base64:wK8=");  // an overlong form is not UTF-8
}

TEST(BodyDigestKey, IsSha256Hex) {
  EXPECT_EQ(BodyDigestKey("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(BrokerIntake, IdempotencyKeyPrecedence) {
  BrokerIntake intake = Make("rabbitmq");
  BrokerMessage m = Body(R"({"id":"from-path"})");
  m.message_id = "from-message-id";
  m.headers = {{"X-Idempotency-Key", "  from-header  "}};
  EXPECT_EQ(intake.Receive(m)->idempotency_key, "from-header");
  m.headers = {{"x-idempotency-key", "   "}};  // blank counts as missing
  EXPECT_EQ(intake.Receive(m)->idempotency_key, "from-path");
  m.body = R"({"other":1})";
  EXPECT_EQ(intake.Receive(m)->idempotency_key, "from-message-id");
  m.message_id.reset();
  EXPECT_EQ(intake.Receive(m)->idempotency_key, BodyDigestKey(m.body));

  // Kafka: the record key, not a message id.
  BrokerIntake kafka = Make("kafka");
  BrokerMessage k = Body(R"({"other":1})");
  k.message_id = "ignored";
  k.record_key = "record-7";
  EXPECT_EQ(kafka.Receive(k)->idempotency_key, "record-7");
  EXPECT_EQ(kafka.Receive(k)->aggregate_id, "record-7");  // the aggregate's last fallback
}

TEST(BrokerIntake, AggregateEventTypeAndAttributeHeaders) {
  BrokerSourceKeys keys;
  keys.keys.aggregate_id_path = {"$.order"};
  keys.keys.event_type_path = {"$.type"};
  keys.attribute_headers.aggregate_id = "x-agg";
  keys.attribute_headers.event_type = "x-kind";
  BrokerIntake plain = Make("nats", keys);
  BrokerMessage m = Body(R"({"id":"1"})");
  m.headers = {{"X-Agg", "a-9"}, {"x-kind", "from-header"}};
  auto row = plain.Receive(m);
  EXPECT_EQ(row->aggregate_id, "a-9");
  EXPECT_FALSE(row->event_type.has_value());  // the header needs eventTypeFromHeader
  keys.event_type_from_header = true;
  BrokerIntake from_header = Make("nats", keys);
  EXPECT_EQ(from_header.Receive(m)->event_type, "from-header");
  m.body = R"({"id":"1","order":"o-1","type":"order.created"})";
  row = from_header.Receive(m);
  EXPECT_EQ(row->aggregate_id, "o-1");  // the path comes first
  EXPECT_EQ(row->event_type, "order.created");
}

TEST(BrokerIntake, CorrelationIdFromHeaderPropertyOrNew) {
  BrokerIntake intake = Make("rabbitmq");
  BrokerMessage m = Body(R"({"id":"1"})");
  m.correlation_property = "from-property";
  EXPECT_EQ(intake.Receive(m)->correlation_id, "from-property");
  m.headers = {{"x-correlation-id", "from\x01header"}};
  EXPECT_EQ(intake.Receive(m)->correlation_id, "fromheader");
  m.headers.clear();
  m.correlation_property.reset();
  EXPECT_EQ(intake.Receive(m)->correlation_id->size(), 36u);
}

TEST(BrokerIntake, BodyThatIsNotJsonIsADeadRawRow) {
  BrokerIntake intake = Make("rabbitmq");
  BrokerMessage m = Body("not json {");
  m.message_id = "m-1";
  auto row = intake.Receive(m);
  ASSERT_TRUE(row.has_value());
  EXPECT_TRUE(row->dead);
  EXPECT_EQ(json::parse(row->payload), (json{{"raw", "not json {"}}));
  EXPECT_EQ(row->idempotency_key, "m-1");
  EXPECT_NE(row->last_error.find("not JSON"), std::string::npos);
  // Bytes that are not UTF-8 still make a JSON payload.
  row = intake.Receive(Body("\xff\xfe"));
  EXPECT_TRUE(row->dead);
  EXPECT_FALSE(json::parse(row->payload, nullptr, false).is_discarded());
  // nlohmann's parser alone stops at a NUL and would store {"id":"a"}.
  row = intake.Receive(Body(std::string("{\"id\":\"a\"}\0junk", 15)));
  EXPECT_TRUE(row->dead);
  EXPECT_EQ(json::parse(row->payload), (json{{"raw", std::string("{\"id\":\"a\"}\0junk", 15)}}));
}

TEST(BrokerIntake, KeyOverItsColumnGoesDeadUnderADigest) {
  BrokerIntake intake = Make("nats");
  const std::string long_key(300, 'k');
  auto row = intake.Receive(Body(json{{"id", long_key}}.dump()));
  ASSERT_TRUE(row.has_value());
  EXPECT_TRUE(row->dead);
  EXPECT_EQ(row->idempotency_key, BodyDigestKey(long_key));
  EXPECT_EQ(row->last_error, "The idempotency key is longer than 255 characters");
}

TEST(BrokerIntake, FilterDropsBeforeReading) {
  BrokerSourceKeys keys;
  keys.keys.filter = json::parse(R"({"require":[{"header":"x-env","equals":"prod"}]})");
  BrokerIntake intake = Make("kafka", keys);
  BrokerMessage m = Body("not even json");
  m.headers = {{"X-Env", "test"}};
  EXPECT_FALSE(intake.Receive(m).has_value());
  m.headers = {{"X-Env", "test"}, {"x-env", "prod"}};  // the last value of a name wins
  EXPECT_TRUE(intake.Receive(m).has_value());
}

TEST(BrokerIntake, DelayAndPublishTime) {
  BrokerSourceKeys keys;
  keys.keys.initial_delay_ms = 5000;
  BrokerIntake delay_only = Make("rabbitmq", keys);
  BrokerMessage m = Body(R"({"id":"1","at":"2026-01-01T00:00:00Z"})");
  m.broker_time_ms = 1000;
  auto row = delay_only.Receive(m);
  EXPECT_EQ(row->delay_ms, 5000);
  EXPECT_FALSE(row->publish_time_ms.has_value());  // the broker time needs a publish-time key
  keys.keys.scheduled_at_path = {"$.at"};
  BrokerIntake with_path = Make("rabbitmq", keys);
  EXPECT_EQ(with_path.Receive(m)->publish_time_ms, int64_t{1767225600000});
  m.body = R"({"id":"1"})";
  EXPECT_EQ(with_path.Receive(m)->publish_time_ms, 1000);  // then the broker's time
  m.body = "raw";
  EXPECT_EQ(with_path.Receive(m)->delay_ms, 0);  // a dead row gets no delay
}

TEST(BrokerIntake, StoredHeadersDropCredentials) {
  BrokerIntake intake = Make("nats");
  BrokerMessage m = Body(R"({"id":"1"})");
  m.headers = {{"Authorization", "Bearer x"}, {"x-tenant", "t1"}};
  EXPECT_EQ(json::parse(intake.Receive(m)->headers), (json{{"x-tenant", "t1"}}));
}

TEST(BrokerIntake, BadPathIsRefusedNamingTheKey) {
  BrokerSourceKeys keys;
  keys.idempotency_key_path = {"$..id"};
  auto made = BrokerIntake::Create("kafka", "orders", keys);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("sources.orders.idempotencyKeyPath"), std::string::npos);
}

}  // namespace
}  // namespace queuebox::sources
