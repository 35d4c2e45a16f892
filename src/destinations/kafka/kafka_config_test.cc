// Configuration errors of every kafka key: the block validator and the factory
// (LoadConfig end to end: tests/integration/kafka_destination_test.cc)
// (QueueBox reference §7.3, §7.5).
#ifdef QB_WITH_KAFKA
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "destinations/kafka/kafka_destination.h"

namespace queuebox {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

nlohmann::json KafkaBlock(nlohmann::json extra) {
  nlohmann::json b = {{"bootstrapServers", "127.0.0.1:9092"},
                      {"topic", "events"},
                      {"keyTemplate", "{{ key }}"},
                      {"timeoutMs", 30000},
                      {"securityProtocol", "PLAINTEXT"}};
  if (extra.is_object()) b.update(extra);
  return b;
}

TEST(KafkaBlock, DefaultsAreValid) { EXPECT_THAT(ValidateKafkaBlock(KafkaBlock({})), IsEmpty()); }

TEST(KafkaBlock, SaslNeedsMechanismUserAndPassword) {
  EXPECT_THAT(
      ValidateKafkaBlock(KafkaBlock(
          {{"securityProtocol", "SASL_SSL"}, {"saslMechanism", "PLAIN"}, {"saslUsername", "u"}})),
      ElementsAre(HasSubstr("saslPassword: required when securityProtocol is SASL_SSL")));
  EXPECT_EQ(ValidateKafkaBlock(KafkaBlock({{"securityProtocol", "SASL_PLAINTEXT"}})).size(), 3u);
  EXPECT_THAT(ValidateKafkaBlock(KafkaBlock({{"securityProtocol", "SASL_SSL"},
                                             {"saslMechanism", "SCRAM-SHA-512"},
                                             {"saslUsername", "u"},
                                             {"saslPassword", "p"}})),
              IsEmpty());
  // SASL keys are not needed for SSL.
  EXPECT_THAT(ValidateKafkaBlock(KafkaBlock({{"securityProtocol", "SSL"}})), IsEmpty());
}

TEST(KafkaBlock, TimeoutBelow2000IsRefused) {
  EXPECT_THAT(ValidateKafkaBlock(KafkaBlock({{"timeoutMs", 1999}})),
              ElementsAre(HasSubstr("timeoutMs: must be at least 2000")));
  EXPECT_THAT(ValidateKafkaBlock(KafkaBlock({{"timeoutMs", 2000}})), IsEmpty());
}

TEST(KafkaBlock, TemplatesAndTopicFrom) {
  EXPECT_THAT(ValidateKafkaBlock(KafkaBlock({{"topic", "events.{{ region }}"}})),
              ElementsAre(HasSubstr("topic: unknown placeholder '{{ region }}'")));
  EXPECT_THAT(ValidateKafkaBlock(KafkaBlock({{"keyTemplate", "{{ id }}"}})),
              ElementsAre(HasSubstr("keyTemplate: unknown placeholder '{{ id }}'")));
  EXPECT_THAT(ValidateKafkaBlock(KafkaBlock({{"topicFrom", "aggregateType"}})),
              ElementsAre(HasSubstr("topicFrom: 'aggregateType' is not a column")));
  EXPECT_THAT(ValidateKafkaBlock(KafkaBlock(
                  {{"topic", "{{ payload.a.b }}.{{ data.c }}"}, {"topicFrom", "aggregate_type"}})),
              IsEmpty());
}

TEST(KafkaFactory, ErrorsNameTheDestinationAndKey) {
  KafkaDestinationSettings s;
  s.name = "stream";
  s.bootstrap_servers = "127.0.0.1:9092";
  s.topic = "{{ nope }}";
  Result<std::unique_ptr<KafkaDestination>> d = KafkaDestination::Create(s);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("destinations.stream.topic: unknown placeholder"));
  s.topic = "t";
  s.bootstrap_servers = "";
  EXPECT_THAT(KafkaDestination::Create(s).status().message(),
              HasSubstr("destinations.stream.bootstrapServers"));
}

// The producer's guarantees (docs/guarantees.md §1, reference §7.3) reach librdkafka: read back
// from the running producer's own configuration, not from the settings that asked for them.
TEST(KafkaFactory, TheProducerRunsIdempotentWithAcksAll) {
  KafkaDestinationSettings s;
  s.name = "stream";
  s.bootstrap_servers = "127.0.0.1:1";  // librdkafka connects in the background; none is needed
  s.topic = "t";
  Result<std::unique_ptr<KafkaDestination>> d = KafkaDestination::Create(s);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->ProducerPropertyForTest("enable.idempotence"), std::nullopt);  // not started
  ASSERT_TRUE((*d)->Start().ok());
  EXPECT_EQ((*d)->ProducerPropertyForTest("enable.idempotence"), "true");
  EXPECT_EQ((*d)->ProducerPropertyForTest("acks"), "-1");  // librdkafka's value for "all"
  (*d)->Stop();
}

}  // namespace
}  // namespace queuebox
#endif  // QB_WITH_KAFKA
