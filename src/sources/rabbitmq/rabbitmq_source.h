// rabbitmq_source.h: the rabbitmq broker source (QueueBox reference §11.3); see
// sources/broker_source.h for the lifecycle and sources/broker_intake.h for what becomes a row.
#pragma once

#include <memory>

#include "queuebox/status.h"
#include "sources/broker_source.h"
#include "sources/rabbitmq/rabbitmq_settings.h"

namespace queuebox::sources {

// No I/O: Start() connects. kInvalidArgument naming sources.<name>.<key> for bad settings.
Result<std::unique_ptr<BrokerSource>> CreateRabbitmqSource(RabbitmqSourceSettings settings,
                                                           const BrokerSourceContext& context);

}  // namespace queuebox::sources
