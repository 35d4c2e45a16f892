// relay.h: the outbox relay (QueueBox reference §4-6, §13.8). It claims due rows in batches,
// keeps one row per key in flight (through the claim), routes by topic, publishes with up to
// outbox.concurrency messages in flight, and writes outcomes with fenced, batched statements.
//
// Thread-safety: Start/Stop from one controlling thread; observers are called from relay threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "queuebox/config.h"
#include "queuebox/destination.h"
#include "queuebox/status.h"
#include "queuebox/store.h"

namespace queuebox::telemetry {
class Tracer;
}

namespace queuebox {

// Hooks for metrics (src/admin implements them with prometheus-cpp). Every method has a no-op
// default, must be cheap and thread-safe, and must not throw.
class RelayObserver {
 public:
  virtual ~RelayObserver() = default;
  // status: "sent" | "failed" (retry scheduled) | "dead" | "released" (a destination outage:
  // pending again, no attempt spent)  (queuebox_outbox_messages_total)
  virtual void OnMessages(std::string_view /*status*/, int64_t /*n*/) {}
  virtual void OnReclaimed(int64_t /*n*/) {}
  virtual void OnClaimsLost(int64_t /*n*/) {}               // component="outbox"
  virtual void OnProcessError() {}                          // queuebox_outbox_process_errors_total
  virtual void OnProcessingDuration(double /*seconds*/) {}  // claim -> outcome written
  virtual void OnPublish(const Destination& /*d*/, bool /*success*/, double /*seconds*/) {}
  // n rows of one outcome write, or the messages of one publish, that took the same time: one
  // call instead of one per message (the default makes the per-message calls).
  virtual void OnProcessingDurations(double seconds, int64_t n) {
    for (int64_t i = 0; i < n; ++i) OnProcessingDuration(seconds);
  }
  virtual void OnPublishes(const Destination& d, int64_t successes, int64_t failures,
                           double seconds) {
    for (int64_t i = 0; i < successes; ++i) OnPublish(d, true, seconds);
    for (int64_t i = 0; i < failures; ++i) OnPublish(d, false, seconds);
  }
  virtual void OnQueueDepth(const std::string& /*destination*/, int64_t /*delta*/) {}
  virtual void OnPollCycle(bool /*ok*/) {}  // the poller's liveness for health
  // A route or destination transform failed; strategy: "fail" | "skip" | "dead"
  // (queuebox_transform_failures_total{strategy}).
  virtual void OnTransformFailure(std::string_view /*strategy*/) {}
  // A destination's circuit breaker changed state: 0 closed, 1 open, 2 half-open
  // (queuebox_destination_circuit_state{destination}); also called once per breaker at Create.
  virtual void OnCircuitState(const std::string& /*destination*/, int /*state*/) {}
  // Rows of a destination wait for its rate limit's tokens for `seconds` more (each stretch of
  // time counted once) (queuebox_destination_throttled_seconds_total{destination}).
  virtual void OnThrottled(const std::string& /*destination*/, double /*seconds*/) {}
};

// The route and destination transform stages (QueueBox reference §8): what body each message is
// delivered with, or why it is not delivered. Implemented by the transform library
// (queuebox/transform/stages.h), so the core loads no JSONata engine; a relay without transforms
// has none (RelayOptions::transforms null).
//
// Thread-safety: Applies and Apply are called from the relay's worker threads at once.
class DeliveryTransforms {
 public:
  struct Message {
    const OutboxRow* row = nullptr;
    std::size_t route = 0;  // index into RelayOptions::routes (the route that matched)
  };
  struct Result {
    enum class Kind {
      kDeliver,  // deliver `body` (onError Skip after a failure also delivers)
      kRetry,    // onError Fail: the delivery fails; the retry path counts an attempt
      kDead,     // onError Dead: the row is dead at once
    };
    Kind kind = Kind::kDeliver;
    std::optional<std::string> body;  // kDeliver: JSON text; unset: the row's payload as is
    std::string error;                // kRetry, kDead: the reason for last_error (not redacted)
    // The strategy label of a stage that failed ("fail", "skip", "dead"); empty when none did.
    std::string_view failed_strategy;
  };
  virtual ~DeliveryTransforms() = default;
  // Whether the rows of `route` go through a stage (the route's or its destination's).
  virtual bool Applies(std::size_t route) const = 0;
  // Runs the stages of every message (messages[i] -> results[i]; the spans have one size) and
  // returns when all are done. It may block for up to the stages' timeouts.
  virtual void Apply(std::span<const Message> messages, std::span<Result> results) const = 0;
};

struct RelayOptions {
  OutboxConfig outbox;
  int max_error_body_bytes = 2048;
  std::vector<RouteConfig> routes;
  // The transform stages of `routes` and their destinations; null when none is configured.
  std::shared_ptr<const DeliveryTransforms> transforms;
  // destinations.<name>.circuitBreaker by destination name; a destination missing here gets the
  // defaults (enabled).
  std::map<std::string, CircuitBreakerConfig> circuit_breakers;
  // destinations.<name>.rateLimit by destination name; a destination missing here has no limit.
  std::map<std::string, RateLimitConfig> rate_limits;
  // telemetry.enabled: each delivery attempt gets a publish span, and its traceparent goes with
  // the message (OutboundMessage::trace). Null: tracing is off and costs nothing.
  std::shared_ptr<telemetry::Tracer> tracer;
};

class Relay {
 public:
  // `destinations` by name; every route's destination must be present (kInvalidArgument).
  // `claims` and `replicas` are not owned and must outlive the relay. `replicas` (optional): the
  // replica set this relay leaves when it stops claiming, so the other replicas take its keys
  // at once (key affinity).
  static Result<std::unique_ptr<Relay>> Create(
      RelayOptions options, OutboxClaims* claims,
      std::map<std::string, std::unique_ptr<Destination>> destinations,
      RelayObserver* observer = nullptr, ReplicaMembership* replicas = nullptr);
  virtual ~Relay() = default;

  // Starts the poller and lease keeper threads. Between cycles the poller waits
  // outbox.pollIntervalMs, or in capture mode (outbox.capture.mode is not `polling`; QueueBox
  // reference §13.8), where change capture wakes it for new rows,
  // OutboxClaims::NextWakeDelayMs(outbox.capture.reconciliationIntervalMs): the next due time or
  // lease deadline (the reconciliation interval when that query fails). A Wake or a finished
  // message ends the wait early.
  virtual Status Start() = 0;
  // Wakes the poller now (e.g. a LISTEN/NOTIFY notification). Cheap; conflated.
  virtual void Wake() = 0;
  // Runs claim cycles until no row is claimable and nothing is in flight, or until `timeout`.
  // For tests, the quickstart and `queuebox run --until-idle`. Requires Start().
  virtual Status WaitIdle(std::chrono::milliseconds timeout) = 0;
  // Stops claiming, waits up to outbox.shutdownTimeoutMs for the held rows (in a publish or
  // queued behind one) to be published and their outcomes written, then stops the destinations.
  // After the timeout no publish starts; rows still held are left to lease expiry.
  // Returns the number of abandoned held rows.
  virtual int64_t Stop() = 0;
  // Seconds since the last poll cycle finished (health: outbox-poller).
  virtual double SecondsSinceLastCycle() const = 0;
  // Rows held: claimed, outcome not yet written (in a publish, queued, or being written).
  virtual int64_t InFlight() const = 0;
  // The state of a destination's circuit breaker: "closed", "open" or "half-open"; empty when
  // the destination has none (circuitBreaker.enabled false, or no such destination).
  virtual std::string CircuitState(const std::string& /*destination*/) const { return ""; }
};

}  // namespace queuebox
