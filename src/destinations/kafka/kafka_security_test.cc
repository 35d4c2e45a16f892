// The Kafka security keys shared by the kafka destination and the kafka source.
#ifdef QB_WITH_KAFKA
#include "destinations/kafka/kafka_security.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Props = std::vector<std::pair<std::string, std::string>>;

TEST(KafkaSecurity, PlaintextAndSslSetOnlyTheProtocol) {
  EXPECT_TRUE(
      KafkaSecurityProblems({"PLAINTEXT", std::nullopt, std::nullopt, std::nullopt}).empty());
  EXPECT_EQ(KafkaSecurityProperties({"SSL", "PLAIN", "u", "p"}),
            (Props{{"security.protocol", "SSL"}}));
}

TEST(KafkaSecurity, SaslSetsTheThreeKeys) {
  EXPECT_EQ(KafkaSecurityProperties({"SASL_SSL", "SCRAM-SHA-512", "u", "p"}),
            (Props{{"security.protocol", "SASL_SSL"},
                   {"sasl.mechanism", "SCRAM-SHA-512"},
                   {"sasl.username", "u"},
                   {"sasl.password", "p"}}));
}

TEST(KafkaSecurity, SaslNeedsAllThreeAndNeverQuotesTheSecret) {
  std::vector<std::string> p =
      KafkaSecurityProblems({"SASL_PLAINTEXT", "PLAIN", std::nullopt, "s3cret"});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_THAT(p[0], HasSubstr("saslUsername: required when securityProtocol is SASL_PLAINTEXT"));
  EXPECT_THAT(p[0], Not(HasSubstr("s3cret")));
  EXPECT_EQ(KafkaSecurityProblems({"SASL_SSL", "", "", ""}).size(), 3u);
}

TEST(KafkaSecurity, AnUnknownProtocolIsNamed) {
  EXPECT_THAT(KafkaSecurityProblems({"TLS", std::nullopt, std::nullopt, std::nullopt}),
              ElementsAre(HasSubstr("securityProtocol: 'TLS' is not one of PLAINTEXT, SSL")));
}

}  // namespace
}  // namespace queuebox
#endif  // QB_WITH_KAFKA
