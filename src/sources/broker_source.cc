// broker_source.cc: builds the broker sources of a configuration through the registry.
#include "sources/broker_source.h"

#include "sources/registry.h"

namespace queuebox::sources {

Result<std::vector<std::unique_ptr<BrokerSource>>> CreateBrokerSources(
    const Config& config, const BrokerSourceContext& context) {
  if (context.intake == nullptr) return InvalidArgument("broker sources need the inbox");
  std::vector<std::unique_ptr<BrokerSource>> out;
  for (const auto& [name, source] : config.sources) {
    const SourceKind* kind = FindSourceKind(source.type);
    if (kind == nullptr || !kind->create) continue;  // http: served on the data port
    QB_ASSIGN_OR_RETURN(std::unique_ptr<BrokerSource> made, kind->create(source, context));
    out.push_back(std::move(made));
  }
  return out;
}

}  // namespace queuebox::sources
