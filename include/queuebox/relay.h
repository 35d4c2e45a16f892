// relay.h: the outbox relay (QueueBox reference §4-6, §13.8). It claims due rows in batches,
// keeps one row per key in flight (through the claim), routes by topic, publishes with up to
// outbox.concurrency messages in flight, and writes outcomes with fenced, batched statements.
//
// Thread-safety: Start/Stop from one controlling thread; observers are called from relay threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "queuebox/config.h"
#include "queuebox/destination.h"
#include "queuebox/status.h"
#include "queuebox/store.h"

namespace queuebox {

// Hooks for metrics (src/admin implements them with prometheus-cpp). Every method has a no-op
// default, must be cheap and thread-safe, and must not throw.
class RelayObserver {
 public:
  virtual ~RelayObserver() = default;
  // status: "sent" | "failed" (retry scheduled) | "dead"  (queuebox_outbox_messages_total)
  virtual void OnMessages(std::string_view /*status*/, int64_t /*n*/) {}
  virtual void OnReclaimed(int64_t /*n*/) {}
  virtual void OnClaimsLost(int64_t /*n*/) {}               // component="outbox"
  virtual void OnProcessError() {}                          // queuebox_outbox_process_errors_total
  virtual void OnProcessingDuration(double /*seconds*/) {}  // claim -> outcome written
  virtual void OnPublish(const Destination& /*d*/, bool /*success*/, double /*seconds*/) {}
  virtual void OnQueueDepth(const std::string& /*destination*/, int64_t /*delta*/) {}
  virtual void OnPollCycle(bool /*ok*/) {}  // the poller's liveness for health
};

struct RelayOptions {
  OutboxConfig outbox;
  int max_error_body_bytes = 2048;
  std::vector<RouteConfig> routes;
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
  // Stops claiming, waits for in-flight publishes up to outbox.shutdownTimeoutMs, writes their
  // outcomes, then stops the destinations. Rows still in flight are left to lease expiry.
  // Returns the number of abandoned in-flight messages.
  virtual int64_t Stop() = 0;
  // Seconds since the last poll cycle finished (health: outbox-poller).
  virtual double SecondsSinceLastCycle() const = 0;
  // Messages currently in flight.
  virtual int64_t InFlight() const = 0;
};

}  // namespace queuebox
