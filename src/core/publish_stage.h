// publish_stage.h: how the outbox relay publishes one slice of a delivery task (relay.h;
// QueueBox reference §6-8). Each row of the slice gets its DeliveryAttempt, in five steps:
//
//   admit            the destination's circuit breaker (core/circuit_breaker.h) admits rows to
//                    publish; a row it keeps back gets Outcome::Unavailable ("Not published, its
//                    circuit breaker is open: ...") and the breaker's release delay, no publish.
//                    (Any other gate before the destination, say a rate limit, belongs here.)
//   transform        the route and destination stages (DeliveryTransforms) give each admitted
//                    row its body; a failed stage keeps the row back (Retry, or Reject for Dead)
//   drop cancelled   a row whose claim was lost while it was queued is not published (Cancelled)
//   publish          one Destination::PublishBatch for the rest; a message the destination did
//                    not report is a Retry; a Cancelled for a claim still held is a Retry
//   trace            (telemetry.enabled) each message gets a publish span, a child of its row's
//                    traceparent (or a new trace), and hands the span's traceparent on
//   record           the breaker records each published row's outcome (and gives an outage's
//                    release delay); a probe that never reached the destination is abandoned;
//                    the observer gets the publish counts, its duration and the queue depth.
//
// The stage owns the circuit breakers (destinations.<name>.circuitBreaker; one per destination
// whose breaker is enabled) and logs their transitions.
//
// Thread-safety: Publish may be called from several workers at once, each for its own slice.
// `observer` and the destinations must outlive the stage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/circuit_breaker.h"
#include "core/delivery_task.h"
#include "queuebox/relay.h"

namespace queuebox {

class PublishStage {
 public:
  // `destinations` by name: a breaker is made for each whose configuration (by name in
  // `options.circuit_breakers`, the defaults when absent) has it enabled; each breaker reports
  // its state to `observer` once now and on every transition.
  PublishStage(const RelayOptions& options,
               const std::map<std::string, std::unique_ptr<Destination>>& destinations,
               RelayObserver* observer);
  PublishStage(const PublishStage&) = delete;  // the breakers call back into this stage
  PublishStage& operator=(const PublishStage&) = delete;

  // Publishes rows [begin, end) of `task` and sets their task.attempts entries.
  void Publish(DeliveryTask& task, size_t begin, size_t end);

  // Whether `destination` has a circuit breaker (its Unavailable outcomes release the row).
  bool HasBreaker(const Destination& destination) const;
  // "closed", "open" or "half-open"; empty when the destination has no breaker.
  std::string CircuitState(const std::string& destination) const;

 private:
  // The admitted rows of a slice and each slice row's probe (CircuitBreaker::Admission::probe).
  struct Admitted {
    std::vector<size_t> rows;
    std::vector<uint64_t> probe;  // by row - begin
  };
  // The messages to publish: messages[j] is task.rows[index[j]].
  struct Messages {
    std::vector<OutboundMessage> messages;
    std::vector<size_t> index;
  };

  Admitted Admit(DeliveryTask& task, CircuitBreaker* breaker, size_t begin, size_t end);
  Messages Transform(DeliveryTask& task, const std::vector<size_t>& rows);
  static void DropCancelled(DeliveryTask& task, Messages& m);
  // The publish spans of one batch: begun before it, ended (recorded) after it.
  struct Traces;
  void BeginSpans(Messages& m, Traces& traces) const;
  void EndSpans(const DeliveryTask& task, const Messages& m, Traces& traces) const;
  void Record(DeliveryTask& task, CircuitBreaker* breaker, const Admitted& admitted, size_t begin,
              Messages& m, std::vector<Outcome> published, RelayClock::time_point start,
              RelayClock::time_point done);
  CircuitBreaker* BreakerOf(const Destination& d) const;
  void OnBreakerTransition(const std::string& destination, CircuitBreaker::State from,
                           CircuitBreaker::State to, std::string_view reason);

  std::shared_ptr<const DeliveryTransforms> transforms_;  // null: no stages
  RelayObserver* observer_;
  std::shared_ptr<telemetry::Tracer> tracer_;  // null: tracing off
  // Each destination's publish-span attributes that never change, encoded once (tracing on).
  std::map<const Destination*, std::string> span_attributes_;
  // By destination name, for destinations whose breaker is enabled; fixed after construction.
  std::map<std::string, std::unique_ptr<CircuitBreaker>> breakers_;
};

}  // namespace queuebox
