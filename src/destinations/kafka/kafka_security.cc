#include "destinations/kafka/kafka_security.h"

#include <algorithm>

namespace queuebox {

const std::vector<std::string>& KafkaSecurityProtocols() {
  static const std::vector<std::string> kProtocols = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT",
                                                      "SASL_SSL"};
  return kProtocols;
}

namespace {
bool IsSasl(const std::string& protocol) { return protocol.starts_with("SASL_"); }
}  // namespace

std::vector<std::string> KafkaSecurityProblems(const KafkaSecurity& security) {
  std::vector<std::string> problems;
  const auto& known = KafkaSecurityProtocols();
  if (std::find(known.begin(), known.end(), security.protocol) == known.end()) {
    problems.push_back("securityProtocol: '" + security.protocol +
                       "' is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL");
    return problems;
  }
  if (!IsSasl(security.protocol)) return problems;
  const std::pair<const char*, const std::optional<std::string>*> keys[] = {
      {"saslMechanism", &security.sasl_mechanism},
      {"saslUsername", &security.sasl_username},
      {"saslPassword", &security.sasl_password}};
  for (const auto& [key, value] : keys) {
    if (!*value || (*value)->empty()) {
      problems.push_back(std::string(key) + ": required when securityProtocol is " +
                         security.protocol +
                         " (saslMechanism, saslUsername and saslPassword go together)");
    }
  }
  return problems;
}

std::vector<std::pair<std::string, std::string>> KafkaSecurityProperties(
    const KafkaSecurity& security) {
  std::vector<std::pair<std::string, std::string>> props = {
      {"security.protocol", security.protocol}};
  if (IsSasl(security.protocol)) {
    props.emplace_back("sasl.mechanism", security.sasl_mechanism.value_or(""));
    props.emplace_back("sasl.username", security.sasl_username.value_or(""));
    props.emplace_back("sasl.password", security.sasl_password.value_or(""));
  }
  return props;
}

}  // namespace queuebox
