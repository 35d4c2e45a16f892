// destination.h: the destination seam. A destination takes a batch and reports one outcome per
// message; only the core turns outcomes into row states (architecture §7 rule 2).
//
// Thread-safety: PublishBatch may be called from several relay threads at once; an
// implementation serialises what its client library needs. Sink calls may come from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "queuebox/message.h"
#include "queuebox/status.h"

namespace queuebox {

// Data a producer attaches to one message for one kind of destination (e.g. AMQP properties,
// destinations/rabbitmq/amqp_extension.h). The destination of that kind reads its own extension
// (dynamic_cast); every other destination ignores it.
class MessageExtension {
 public:
  virtual ~MessageExtension() = default;
};

// The W3C trace context the relay hands on with one message (telemetry.enabled): its publish
// span's `traceparent` and the `tracestate` it continues. A destination sends these in place of
// any row or static header of those names (any letter case); an empty `traceparent` sends
// neither (the row's value was invalid and no trace is started).
struct TraceHeaders {
  std::string traceparent;
  std::string tracestate;  // empty: none
};

// One message to publish: a claimed row plus what the router resolved for it.
struct OutboundMessage {
  const OutboxRow* row = nullptr;
  // The route's routingKeyTemplate, rendered (QueueBox reference §6, §7.6); unset when the route
  // has none. RabbitMQ uses it as the routing key, Kafka as the record key.
  std::optional<std::string> routing_key;
  // Not owned, may be null (always null for relay rows); outlives PublishBatch.
  const MessageExtension* extension = nullptr;
  // The body after the route and destination transforms (QueueBox reference §8), JSON text;
  // unset: the row's payload. Address and key templates still read the row (its payload).
  std::optional<std::string> transformed_body = std::nullopt;
  // Set (never cleared) by the relay when a lease renewal finds that this row's claim was lost:
  // another replica owns the row. Not owned, may be null; outlives PublishBatch. A destination
  // checks it (cancel_requested()) right before it hands the message over (writes the request,
  // passes it to the broker client) and, when set, sends nothing and reports
  // Outcome::Cancelled(). A message already handed over cannot be called back: it is reported
  // as usual and the fenced outcome write changes nothing (docs/guarantees.md §3).
  const std::atomic<bool>* cancel = nullptr;
  // Not owned, outlives PublishBatch; null when tracing is off (the row's headers go as they are).
  const TraceHeaders* trace = nullptr;

  bool cancel_requested() const {
    return cancel != nullptr && cancel->load(std::memory_order_acquire);
  }

  // What the destination sends: the transformed body, else the row's payload.
  std::string_view body() const {
    return transformed_body ? std::string_view(*transformed_body) : std::string_view(row->payload);
  }
};

struct Outcome {
  enum class Kind {
    kDelivered,  // the destination durably accepted the message: row -> sent
    kRetry,      // a failure: retry with backoff while attempt < max_attempts, else dead
    kReject,     // a failure that can never succeed: row -> dead at once
    kCancelled,  // the message's cancel flag was set and nothing was sent: the row is not
                 // written (its claim is lost; the new owner writes it)
    // The destination's fault, not the message's (connection refused, DNS failure, connect
    // timeout, TLS failure, broker not connected, HTTP 429/502/503/504): with the destination's
    // circuit breaker enabled (the default) the row is released, pending again with its attempt
    // unchanged, and the breaker counts an outage; with it disabled, as kRetry.
    kUnavailable,
  };
  Kind kind = Kind::kRetry;
  // For failures: the reason, already redacted (core/redaction.h) and cut to
  // http.maxErrorBodyBytes; it becomes last_error. Empty for kDelivered.
  std::string error;
  // kUnavailable: how long the destination asked us to wait (HTTP Retry-After), ms; 0 = not said.
  int64_t retry_after_ms = 0;
  // What the destination answered, short ("HTTP 503"), for the attempt history; empty when the
  // destination says nothing more than the outcome.
  std::string answer = {};

  static Outcome Delivered() { return {Kind::kDelivered, {}}; }
  static Outcome Retry(std::string e) { return {Kind::kRetry, std::move(e)}; }
  static Outcome Reject(std::string e) { return {Kind::kReject, std::move(e)}; }
  static Outcome Cancelled() { return {Kind::kCancelled, "Publish cancelled: the claim was lost"}; }
  static Outcome Unavailable(std::string e, int64_t retry_after_ms = 0) {
    return {Kind::kUnavailable, std::move(e), retry_after_ms};
  }
};

// Receives outcomes. Report must be called exactly once per message index of the batch.
class OutcomeSink {
 public:
  virtual ~OutcomeSink() = default;
  virtual void Report(std::size_t index, Outcome outcome) = 0;
};

class Destination {
 public:
  virtual ~Destination() = default;

  // The configured name (destinations.<name>) and the type ("http", "file", "kafka", ...).
  virtual const std::string& name() const = 0;
  virtual std::string_view type() const = 0;

  // Connects or checks what it can at start. A failure here is reported by the caller as a
  // start failure naming the destination (scenario S11); transient failures at run time are
  // outcomes, not errors. A broker destination whose broker is merely unreachable returns OK,
  // reports not ready through Health() and reconnects in the background (QueueBox starts too).
  virtual Status Start() = 0;

  // Publishes every message of the batch with as many in flight as the destination allows and
  // reports each outcome to `sink` before returning. A message whose cancel flag is set before
  // it is handed over is not sent (Outcome::Cancelled()). Never throws.
  virtual void PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) = 0;

  // True when PublishBatch puts its whole batch on one ordered channel and reads the broker's
  // answers pipelined (RabbitMQ: publisher confirms), so a large batch costs about one round
  // trip. The relay then hands it a task's rows (different keys, at most outbox.batchSize) in one
  // call and counts the call as ONE of outbox.concurrency's publishes (docs/compatibility.md).
  // False (the default): a call counts one publish per message.
  virtual bool PipelinesBatch() const { return false; }

  // Health of the destination's connection, for /health/ready (brokers). Bounded; OK by default.
  virtual Status Health() { return Status::Ok(); }

  // Releases connections. Called once, after the last PublishBatch returned.
  virtual void Stop() {}
};

}  // namespace queuebox
