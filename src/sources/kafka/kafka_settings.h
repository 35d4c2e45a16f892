// kafka_settings.h: the kafka source kind's settings and option table (QueueBox reference §11.3,
// §12.2), built whether or not the consumer is (sources/kafka/kafka_source.h), so a kafka block
// always validates.
//
// Thread-safety: the table is built once and immutable.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/config.h"
#include "sources/registry.h"
#include "sources/source_keys.h"

namespace queuebox {

// type: kafka (QueueBox reference §11.3): a consumer group member over `topics`.
struct KafkaSourceSettings {
  std::string name;
  std::string bootstrap_servers;                // bootstrapServers, required
  std::vector<std::string> topics;              // topics, required, non-blank
  std::string group_id;                         // groupId, required
  std::string auto_offset_reset = "earliest";   // autoOffsetReset: earliest | latest
  int max_poll_records = 100;                   // maxPollRecords: records per stored batch
  std::string security_protocol = "PLAINTEXT";  // as the kafka destination
  std::optional<std::string> sasl_mechanism;
  std::optional<std::string> sasl_username;
  std::optional<std::string> sasl_password;  // secret
  // Extra librdkafka properties (tests, tuning); applied after the ones above.
  std::map<std::string, std::string> librdkafka;
  BrokerSourceKeys broker;
};

}  // namespace queuebox

namespace queuebox::sources {

const OptionTable<KafkaSourceSettings>& KafkaSourceOptions();
// The registry entry; `create` is null when this build has no kafka consumer.
SourceKind KafkaSourceKind(SourceFactory<KafkaSourceSettings> create);
// Binds a validated source block; kInvalidArgument when it is of another kind.
Result<KafkaSourceSettings> BindKafkaSource(const SourceConfig& source);

}  // namespace queuebox::sources
