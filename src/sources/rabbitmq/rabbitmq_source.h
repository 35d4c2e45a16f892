// rabbitmq_source.h: the rabbitmq broker source (QueueBox reference §11.3); see
// sources/broker_source.h for the lifecycle and sources/broker_intake.h for what becomes a row.
#pragma once

#include <amqp.h>

#include <memory>
#include <string_view>

#include "queuebox/status.h"
#include "sources/broker_intake.h"
#include "sources/broker_source.h"
#include "sources/rabbitmq/rabbitmq_settings.h"

namespace queuebox::sources {

// A delivery as BrokerIntake reads it, from its content header's properties and its body: headers
// through AmqpHeaderStrings (sources/rabbitmq/amqp_headers.h), message_id through HeaderText
// (UTF-8 without NUL, else "base64:"), correlation_property as its bytes (the intake sanitises
// it), broker_time_ms from the timestamp (seconds) when it fits. No I/O.
BrokerMessage RabbitMqBrokerMessage(const amqp_basic_properties_t& properties,
                                    std::string_view body);

// No I/O: Start() connects. kInvalidArgument naming sources.<name>.<key> for bad settings.
Result<std::unique_ptr<BrokerSource>> CreateRabbitmqSource(RabbitmqSourceSettings settings,
                                                           const BrokerSourceContext& context);

}  // namespace queuebox::sources
