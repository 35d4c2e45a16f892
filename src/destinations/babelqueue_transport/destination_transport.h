// destination_transport.h: a babelqueue::Transport over one of the QueueBox relay's destinations
// (include/queuebox/destination.h: http, file, rabbitmq; other brokers as they land), so an
// OutboxRelay can publish through them. Library `babelqueue_transport`, beside the destinations
// and above the SDK, so the SDK links no broker or HTTP client.
//
// Each Publish(queue, body) sends one OutboundMessage whose OutboxRow has
//   payload = body (the envelope bytes, verbatim; never re-encoded), topic = queue,
//   id = meta.id, attempt = 0, and the binding's projection of the envelope (bindings.h):
//   - a destination of type "rabbitmq": the AMQP binding (ProjectAmqp, broker-bindings §2).
//     An AmqpExtension (destinations/rabbitmq/amqp_extension.h) carries the properties type,
//     correlation_id, message_id, app_id, content_type and the integer headers x-schema-version
//     and x-attempts; x-source-lang (string) goes in the row's headers. The destination adds its
//     own x-topic and x-attempt headers and delivery_mode.
//   - any other type: headers = a JSON object of strings bq-job, bq-trace-id, bq-message-id,
//     bq-schema-version, bq-source-lang, bq-attempts (the Kafka binding; for HTTP, QueueBox's
//     choice as no upstream binding exists).
// The body is decoded (read only) to project the headers; an undecodable body is refused with
// kInvalidArgument and nothing is sent.
// Outcome mapping: Delivered -> OK; Retry -> kUnavailable(reason); Reject ->
// kFailedPrecondition(reason). The relay marks the row failed for either error.
//
// Thread-safety: Publish may be called from several threads (destinations allow it).
#pragma once

#include <memory>

#include "babelqueue/outbox.h"
#include "queuebox/destination.h"

namespace babelqueue {

class DestinationTransport final : public Transport {
 public:
  // Takes ownership and calls destination->Start(); its error is returned as is.
  static Result<std::unique_ptr<DestinationTransport>> Create(
      std::unique_ptr<queuebox::Destination> destination);
  ~DestinationTransport() override;  // calls Stop()

  Status Publish(std::string_view queue, std::string_view body) override;

 private:
  explicit DestinationTransport(std::unique_ptr<queuebox::Destination> destination);
  std::unique_ptr<queuebox::Destination> destination_;
};

}  // namespace babelqueue
