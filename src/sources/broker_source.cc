// broker_source.cc: builds the broker sources of a configuration through their kinds' binders.
#include "sources/broker_source.h"

#include "config/sources.h"
#include "sources/kafka/kafka_source.h"
#include "sources/nats/nats_source.h"
#include "sources/rabbitmq/rabbitmq_source.h"

namespace queuebox::sources {
namespace {

template <typename Settings>
Status Add(Result<Settings> bound,
           Result<std::unique_ptr<BrokerSource>> (*create)(Settings, const BrokerSourceContext&),
           const BrokerSourceContext& context, std::vector<std::unique_ptr<BrokerSource>>& out) {
  if (!bound.ok()) return bound.status();
  auto made = create(std::move(bound).value(), context);
  if (!made.ok()) return made.status();
  out.push_back(std::move(made).value());
  return Status();
}

[[maybe_unused]] Status NotBuilt(const SourceConfig& source) {
  return FailedPrecondition("sources." + source.name + ".type: " + source.type +
                            " sources are not compiled into this build");
}

}  // namespace

Result<std::vector<std::unique_ptr<BrokerSource>>> CreateBrokerSources(
    const Config& config, const BrokerSourceContext& context) {
  if (context.intake == nullptr) return InvalidArgument("broker sources need the inbox");
  std::vector<std::unique_ptr<BrokerSource>> out;
  for (const auto& [name, source] : config.sources) {
    Status s;
    if (source.type == "rabbitmq") {
#if QB_WITH_RABBITMQ_SOURCE
      s = Add(cfg::BindRabbitmqSource(source), &CreateRabbitmqSource, context, out);
#else
      s = NotBuilt(source);
#endif
    } else if (source.type == "kafka") {
#if QB_WITH_KAFKA_SOURCE
      s = Add(cfg::BindKafkaSource(source), &CreateKafkaSource, context, out);
#else
      s = NotBuilt(source);
#endif
    } else if (source.type == "nats") {
#if QB_WITH_NATS_SOURCE
      s = Add(cfg::BindNatsSource(source), &CreateNatsSource, context, out);
#else
      s = NotBuilt(source);
#endif
    }
    if (!s.ok()) return s;
  }
  return out;
}

}  // namespace queuebox::sources
