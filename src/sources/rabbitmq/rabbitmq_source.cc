// rabbitmq_source.cc: placeholder until the rabbitmq consumer lands (issue 15).
#include "sources/rabbitmq/rabbitmq_source.h"

namespace queuebox::sources {

Result<std::unique_ptr<BrokerSource>> CreateRabbitmqSource(RabbitmqSourceSettings settings,
                                                           const BrokerSourceContext&) {
  return FailedPrecondition("sources." + settings.name +
                            ".type: rabbitmq sources are not built yet");
}

}  // namespace queuebox::sources
