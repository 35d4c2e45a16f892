// rabbitmq_settings.cc: the rabbitmq kind's table and its start-up checks (QueueBox reference
// §11.3, §11.4).
#include "sources/rabbitmq/rabbitmq_settings.h"

namespace queuebox::sources {
namespace {

using nlohmann::json;

std::vector<std::string> CheckRabbitmqSource(const json& block) {
  std::vector<std::string> problems;
  for (const char* key : {"queueName", "connectionUrl"}) {
    if (block.contains(key) && block[key].is_string() && IsBlank(block[key].get<std::string>())) {
      problems.push_back(std::string(key) + ": must not be blank");
    }
  }
  if (block.contains("connectionUrl") && block["connectionUrl"].is_string()) {
    const std::string url = block["connectionUrl"].get<std::string>();
    if (url.rfind("amqp://", 0) != 0 && url.rfind("amqps://", 0) != 0) {
      problems.push_back("connectionUrl: must be an amqp:// or amqps:// URL");
    }
  }
  CheckBrokerKeys(block, problems);
  return problems;
}

OptionTable<RabbitmqSourceSettings> BuildRabbitmqOptions() {
  using S = RabbitmqSourceSettings;
  OptionTable<S> t = {
      opt::Text("queueName", &S::queue_name, nullptr, "Queue to consume").Required(),
      opt::Text("connectionUrl", &S::connection_url, nullptr,
                "amqp://user:password@host:port/vhost of the broker")
          .Required(),
      opt::Int("prefetchCount", &S::prefetch_count, 10,
               "Unacknowledged deliveries at most (basic.qos); also the stored batch")
          .Range(1, 65535),
      opt::Flag("declareQueue", &S::declare_queue, false,
                "Declare a durable queue; false: a missing queue stops the source with an error"),
  };
  t.Nest("", &S::broker, BrokerKeyOptions());
  return t;
}

SourceCommon RabbitmqCommon(const RabbitmqSourceSettings& s) {
  return {s.broker.topic, s.broker.keys, std::nullopt};
}

}  // namespace

const OptionTable<RabbitmqSourceSettings>& RabbitmqSourceOptions() {
  static const OptionTable<RabbitmqSourceSettings>* const t =
      new OptionTable<RabbitmqSourceSettings>(BuildRabbitmqOptions());
  return *t;
}

SourceKind RabbitmqSourceKind(SourceFactory<RabbitmqSourceSettings> create) {
  return MakeSourceKind<RabbitmqSourceSettings>("rabbitmq", RabbitmqSourceOptions(),
                                                &CheckRabbitmqSource, &RabbitmqCommon, create);
}

Result<RabbitmqSourceSettings> BindRabbitmqSource(const SourceConfig& source) {
  return BindSourceSettings(source, "rabbitmq", RabbitmqSourceOptions());
}

}  // namespace queuebox::sources
