// destination_transport.cc: see destination_transport.h.
#include "destinations/babelqueue_transport/destination_transport.h"

#include <optional>
#include <utility>

#include "babelqueue/bindings.h"
#include "destinations/rabbitmq/amqp_extension.h"

namespace babelqueue {
namespace {

// Keeps the single outcome of a one-message batch.
class OneOutcome final : public queuebox::OutcomeSink {
 public:
  void Report(std::size_t /*index*/, queuebox::Outcome outcome) override {
    outcome_ = std::move(outcome);
  }
  const std::optional<queuebox::Outcome>& outcome() const { return outcome_; }

 private:
  std::optional<queuebox::Outcome> outcome_;
};

}  // namespace

DestinationTransport::DestinationTransport(std::unique_ptr<queuebox::Destination> destination)
    : destination_(std::move(destination)) {}

DestinationTransport::~DestinationTransport() { destination_->Stop(); }

Result<std::unique_ptr<DestinationTransport>> DestinationTransport::Create(
    std::unique_ptr<queuebox::Destination> destination) {
  if (!destination) return queuebox::InvalidArgument("the destination is null");
  QB_RETURN_IF_ERROR(destination->Start());
  return std::unique_ptr<DestinationTransport>(new DestinationTransport(std::move(destination)));
}

Status DestinationTransport::Publish(std::string_view queue, std::string_view body) {
  Result<Envelope> env = Decode(body);
  if (!env.ok()) {
    return queuebox::InvalidArgument("the stored body is not an envelope: " +
                                     env.status().message());
  }
  queuebox::OutboxRow row;
  row.id = env->meta.id;
  row.topic = std::string(queue);
  row.payload = std::string(body);
  queuebox::OutboundMessage message{&row, std::nullopt};
  queuebox::AmqpExtension amqp_extension;
  Json headers = Json::object();
  if (destination_->type() == "rabbitmq") {
    // AMQP binding: native properties, and headers typed as the binding says (strings stay in
    // the row's headers, integers go to the extension).
    AmqpProjection amqp = ProjectAmqp(*env);
    amqp_extension.properties = {{"type", amqp.type},
                                 {"correlation_id", amqp.correlation_id},
                                 {"message_id", amqp.message_id},
                                 {"app_id", amqp.app_id},
                                 {"content_type", amqp.content_type}};
    message.extension = &amqp_extension;
    for (auto& [name, value] : amqp.headers.items()) {
      if (value.is_number_integer()) {
        amqp_extension.integer_headers[name] = value.get<int64_t>();
      } else {
        headers[name] = value;
      }
    }
  } else {
    for (auto& [name, value] : ProjectHttpHeaders(*env)) headers[name] = std::move(value);
  }
  QB_ASSIGN_OR_RETURN(row.headers, EncodeJson(headers));
  OneOutcome sink;
  destination_->PublishBatch(std::span<const queuebox::OutboundMessage>(&message, 1), sink);
  if (!sink.outcome()) {
    return queuebox::Internal("destination " + destination_->name() + " reported no outcome");
  }
  switch (sink.outcome()->kind) {
    case queuebox::Outcome::Kind::kDelivered:
      return Status::Ok();
    case queuebox::Outcome::Kind::kRetry:
    case queuebox::Outcome::Kind::kCancelled:  // no cancel flag is set here; never expected
    case queuebox::Outcome::Kind::kUnavailable:
      return queuebox::Unavailable(sink.outcome()->error);
    case queuebox::Outcome::Kind::kReject:
      return queuebox::FailedPrecondition(sink.outcome()->error);
  }
  return queuebox::Internal("unknown outcome");
}

}  // namespace babelqueue
