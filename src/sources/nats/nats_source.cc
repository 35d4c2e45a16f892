// nats_source.cc: placeholder until the nats consumer lands (issue 15).
#include "sources/nats/nats_source.h"

namespace queuebox::sources {

Result<std::unique_ptr<BrokerSource>> CreateNatsSource(NatsSourceSettings settings,
                                                       const BrokerSourceContext&) {
  return FailedPrecondition("sources." + settings.name + ".type: nats sources are not built yet");
}

}  // namespace queuebox::sources
