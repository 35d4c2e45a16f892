// registry.cc: the one list of built-in destination types (architecture §7 rule 5).
#include "destinations/registry.h"

#include <algorithm>

#include "destinations/file/file_destination.h"
#include "destinations/http/http_destination.h"

// Broker types are compiled in only when their CMake option is on (QB_WITH_<TYPE>); each brings
// <Broker>DestinationType() from src/destinations/<broker>/<broker>_destination.h.
#ifdef QB_WITH_KAFKA
#include "destinations/kafka/kafka_destination.h"
#endif
#ifdef QB_WITH_RABBITMQ
#include "destinations/rabbitmq/rabbitmq_destination.h"
#endif
#ifdef QB_WITH_NATS
#include "destinations/nats/nats_destination.h"
#endif

namespace queuebox {

const std::vector<DestinationType>& BuiltinDestinationTypes() {
  static const std::vector<DestinationType>* const types = [] {
    auto* list = new std::vector<DestinationType>();
    list->push_back(FileDestinationType());
    list->push_back(HttpDestinationType());
#ifdef QB_WITH_KAFKA
    list->push_back(KafkaDestinationType());
#endif
#ifdef QB_WITH_NATS
    list->push_back(NatsDestinationType());
#endif
#ifdef QB_WITH_RABBITMQ
    list->push_back(RabbitMqDestinationType());
#endif
    return list;
  }();
  return *types;
}

const DestinationType* FindDestinationType(std::string_view type) {
  for (const DestinationType& t : BuiltinDestinationTypes()) {
    if (t.type == type) return &t;
  }
  return nullptr;
}

std::string KnownDestinationTypes() {
  std::vector<std::string> names;
  for (const DestinationType& t : BuiltinDestinationTypes()) names.push_back(t.type);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

}  // namespace queuebox
