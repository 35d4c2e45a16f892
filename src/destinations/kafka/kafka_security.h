// kafka_security.h: the security keys a Kafka client shares between the `kafka` destination and
// the `kafka` source (QueueBox reference §7.3, §11.3): securityProtocol, saslMechanism,
// saslUsername, saslPassword, checked and turned into librdkafka properties.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace queuebox {

// PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.
const std::vector<std::string>& KafkaSecurityProtocols();

struct KafkaSecurity {
  std::string protocol = "PLAINTEXT";
  std::optional<std::string> sasl_mechanism;
  std::optional<std::string> sasl_username;
  std::optional<std::string> sasl_password;  // a secret: never logged
};

// Relative "key: reason" problems (no prefix): an unknown protocol; a SASL_* protocol without
// saslMechanism, saslUsername and saslPassword (all three go together). Never quotes a secret.
std::vector<std::string> KafkaSecurityProblems(const KafkaSecurity& security);

// security.protocol, then sasl.mechanism/username/password for SASL_* protocols.
std::vector<std::pair<std::string, std::string>> KafkaSecurityProperties(
    const KafkaSecurity& security);

}  // namespace queuebox
