// kafka_settings.cc: the kafka kind's table and its start-up checks (QueueBox reference §11.3,
// §11.4).
#include "sources/kafka/kafka_settings.h"

namespace queuebox::sources {
namespace {

using nlohmann::json;

std::vector<std::string> CheckKafkaSource(const json& block) {
  std::vector<std::string> problems;
  if (block.contains("topics") && block["topics"].is_array()) {
    const json& topics = block["topics"];
    if (topics.empty()) problems.push_back("topics: must name at least one topic");
    for (size_t i = 0; i < topics.size(); ++i) {
      if (!topics[i].is_string() || IsBlank(topics[i].get<std::string>())) {
        problems.push_back("topics[" + std::to_string(i) + "]: must not be blank");
      }
    }
  }
  for (const char* key : {"bootstrapServers", "groupId"}) {
    if (block.contains(key) && block[key].is_string() && IsBlank(block[key].get<std::string>())) {
      problems.push_back(std::string(key) + ": must not be blank");
    }
  }
  const std::string protocol = block.value("securityProtocol", std::string("PLAINTEXT"));
  if (protocol.rfind("SASL_", 0) == 0) {
    for (const char* key : {"saslMechanism", "saslUsername", "saslPassword"}) {
      if (!HasKey(block, key)) {
        problems.push_back(std::string(key) + ": required when securityProtocol is " + protocol +
                           " (saslMechanism, saslUsername and saslPassword go together)");
      }
    }
  }
  CheckBrokerKeys(block, problems);
  return problems;
}

OptionTable<KafkaSourceSettings> BuildKafkaOptions() {
  using S = KafkaSourceSettings;
  OptionTable<S> t = {
      opt::Text("bootstrapServers", &S::bootstrap_servers, nullptr,
                "Comma-separated host:port list of Kafka brokers")
          .Required(),
      opt::TextList("topics", &S::topics, nullptr, "Topics to consume").Required(),
      opt::Text("groupId", &S::group_id, nullptr,
                "Consumer group; replicas with one group share the partitions")
          .Required(),
      opt::Choice("autoOffsetReset", &S::auto_offset_reset, {"earliest", "latest"}, "earliest",
                  "Where a group without a committed offset starts"),
      opt::Int("maxPollRecords", &S::max_poll_records, 100, "Records per stored batch at most")
          .Range(1, 100000),
      opt::Choice("securityProtocol", &S::security_protocol,
                  {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, "PLAINTEXT",
                  "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
      opt::Text("saslMechanism", &S::sasl_mechanism, nullptr,
                "SASL mechanism (e.g. PLAIN, SCRAM-SHA-512)"),
      opt::Text("saslUsername", &S::sasl_username, nullptr, "SASL username"),
      opt::Secret("saslPassword", &S::sasl_password, "SASL password (secret; file: allowed)"),
  };
  t.Nest("", &S::broker, BrokerKeyOptions());
  return t;
}

SourceCommon KafkaCommon(const KafkaSourceSettings& s) {
  return {s.broker.topic, s.broker.keys, std::nullopt};
}

}  // namespace

const OptionTable<KafkaSourceSettings>& KafkaSourceOptions() {
  static const OptionTable<KafkaSourceSettings>* const t =
      new OptionTable<KafkaSourceSettings>(BuildKafkaOptions());
  return *t;
}

SourceKind KafkaSourceKind(SourceFactory<KafkaSourceSettings> create) {
  return MakeSourceKind<KafkaSourceSettings>("kafka", KafkaSourceOptions(), &CheckKafkaSource,
                                             &KafkaCommon, create);
}

Result<KafkaSourceSettings> BindKafkaSource(const SourceConfig& source) {
  return BindSourceSettings(source, "kafka", KafkaSourceOptions());
}

}  // namespace queuebox::sources
