// registry.cc: the one list of source kinds.
#include "sources/registry.h"

#include <algorithm>

#include "sources/http/http_settings.h"
#include "sources/kafka/kafka_settings.h"
#include "sources/nats/nats_settings.h"
#include "sources/rabbitmq/rabbitmq_settings.h"

// Each broker kind's consumer is compiled in only with its client library (QB_WITH_<KIND>_SOURCE;
// src/sources/CMakeLists.txt); its settings and table always are, so its blocks validate.
#if QB_WITH_KAFKA_SOURCE
#include "sources/kafka/kafka_source.h"
#endif
#if QB_WITH_NATS_SOURCE
#include "sources/nats/nats_source.h"
#endif
#if QB_WITH_RABBITMQ_SOURCE
#include "sources/rabbitmq/rabbitmq_source.h"
#endif

namespace queuebox::sources {
namespace {

// A broker kind without its consumer: building one of its sources names the build.
[[maybe_unused]] SourceKind NotBuilt(SourceKind kind) {
  kind.create = [type = kind.type](
                    const SourceConfig& source,
                    const BrokerSourceContext&) -> Result<std::unique_ptr<BrokerSource>> {
    return FailedPrecondition("sources." + source.name + ".type: " + type +
                              " sources are not compiled into this build");
  };
  return kind;
}

}  // namespace

const std::vector<SourceKind>& BuiltinSourceKinds() {
  static const std::vector<SourceKind>* const kinds = [] {
    auto* list = new std::vector<SourceKind>();
    list->push_back(HttpSourceKind());
#if QB_WITH_KAFKA_SOURCE
    list->push_back(KafkaSourceKind(&CreateKafkaSource));
#else
    list->push_back(NotBuilt(KafkaSourceKind(nullptr)));
#endif
#if QB_WITH_NATS_SOURCE
    list->push_back(NatsSourceKind(&CreateNatsSource));
#else
    list->push_back(NotBuilt(NatsSourceKind(nullptr)));
#endif
#if QB_WITH_RABBITMQ_SOURCE
    list->push_back(RabbitmqSourceKind(&CreateRabbitmqSource));
#else
    list->push_back(NotBuilt(RabbitmqSourceKind(nullptr)));
#endif
    return list;
  }();
  return *kinds;
}

const SourceKind* FindSourceKind(std::string_view type) {
  for (const SourceKind& k : BuiltinSourceKinds()) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

std::string KnownSourceTypes() {
  std::vector<std::string> names;
  for (const SourceKind& k : BuiltinSourceKinds()) names.push_back(k.type);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

Result<SourceCommon> BindSourceCommon(const SourceConfig& source) {
  const SourceKind* kind = FindSourceKind(source.type);
  if (kind == nullptr) {
    return InvalidArgument("sources." + source.name + ".type: unknown source type '" + source.type +
                           "' (known: " + KnownSourceTypes() + ")");
  }
  return kind->common(source);
}

}  // namespace queuebox::sources
