// amqp_extension.h: AMQP 0-9-1 metadata a producer asks for beyond the row, read only by the
// rabbitmq destination (an OutboundMessage::extension). Filled by the BabelQueue adapter
// (destinations/babelqueue_transport) from the RabbitMQ binding (broker-bindings §2,
// babelqueue/bindings.h). Needs no rabbitmq-c: it is plain values, whatever the build options.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "queuebox/destination.h"

namespace queuebox {

struct AmqpExtension final : MessageExtension {
  // Basic properties by name: one of content_type, content_encoding, correlation_id, reply_to,
  // expiration, message_id, type, user_id, app_id (short strings, at most 255 bytes). A value
  // replaces the destination's default (message_id = row id, content_type = "application/json");
  // an unknown name or a longer value is a kReject outcome.
  std::map<std::string, std::string> properties;
  // Headers with a signed 64-bit integer value (field-table kind 'l'), added after the string
  // headers (x-topic, x-attempt, static, row); a header of the same name is replaced.
  std::map<std::string, int64_t> integer_headers;
};

}  // namespace queuebox
