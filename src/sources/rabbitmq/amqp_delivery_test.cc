// RabbitMqBrokerMessage: a delivery's properties as the broker intake reads them (no broker).
#include <amqp.h>
#include <gtest/gtest.h>

#include <string>

#include "sources/broker_intake.h"
#include "sources/rabbitmq/rabbitmq_source.h"

namespace queuebox::sources {
namespace {

amqp_bytes_t AdtBytes(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

// Found by the amqp_delivery fuzz target: a message_id of bytes that are not UTF-8 (or hold a
// NUL) became the idempotency key as they were, a key PostgreSQL refuses, so the source could
// never store its batch. It follows the header text rules now, as a Kafka record key does.
TEST(RabbitMqBrokerMessage, AMessageIdThatIsNotUtf8IsBase64) {
  const std::string id(
      "\xff\xfe"
      "id\0",
      5),
      utf8 = "m-\xc3\xbc";
  amqp_basic_properties_t p{};
  p._flags = AMQP_BASIC_MESSAGE_ID_FLAG;
  p.message_id = AdtBytes(id);
  BrokerMessage m = RabbitMqBrokerMessage(p, "{}");
  EXPECT_EQ(m.message_id, "base64://5pZAA=");
  Result<BrokerIntake> intake = BrokerIntake::Create("rabbitmq", "s", BrokerSourceKeys{});
  ASSERT_TRUE(intake.ok()) << intake.status().ToString();
  std::optional<NewInboxMessage> row = intake->Receive(m);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->idempotency_key, "base64://5pZAA=");

  p.message_id = AdtBytes(utf8);
  EXPECT_EQ(RabbitMqBrokerMessage(p, "{}").message_id, utf8);  // UTF-8 stays as it is
}

}  // namespace
}  // namespace queuebox::sources
