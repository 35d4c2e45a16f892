// circuit_breaker.h: one destination's circuit breaker (CircuitBreakerConfig, config.h).
//
//   closed     rows are published; `failure_threshold` consecutive outage outcomes open it
//   open       rows are released without a publish, due after the open time; when the open time
//              has passed, the next admission turns it half-open
//   half-open  `half_open_probes` rows are published (the probes), the others released; a
//              probe's outage opens it again, any other probe outcome closes it
//
// Time is passed in (steady clock; only the relay's in-process pacing depends on it, every row's
// due time is set on the database clock by the store). Every transition calls `on_transition`
// (under the breaker's lock: it must not call back into the breaker).
// Thread-safety: every method may be called from several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "queuebox/config.h"

namespace queuebox {

class CircuitBreaker {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // The values of queuebox_destination_circuit_state (docs/metrics.md).
  enum class State { kClosed = 0, kOpen = 1, kHalfOpen = 2 };
  // from, to, and for an opening the outage's reason.
  using OnTransition = std::function<void(State from, State to, std::string_view reason)>;

  // The longest open time a Retry-After can ask for.
  static constexpr int64_t kMaxOpenMs = 600000;

  CircuitBreaker(CircuitBreakerConfig config, OnTransition on_transition);

  struct Admission {
    bool publish = true;  // false: release the row without publishing it
    // publish: a half-open probe's round (Record or Abandon it with this value); 0: not a probe.
    uint64_t probe = 0;
    int64_t release_delay_ms = 0;  // !publish: due again after this
  };
  Admission Admit(TimePoint now);

  // The outcome of a published row. outage: an Outcome of kind kUnavailable; probe: its
  // Admission's `probe`; retry_after_ms: what the destination asked for (0: nothing). Returns the
  // release delay for an outage's row. A probe of an earlier half-open round (it outlived the
  // open time) counts as an ordinary outcome: its verdict is stale.
  int64_t Record(bool outage, uint64_t probe, int64_t retry_after_ms, TimePoint now,
                 std::string_view reason);
  // A probe that was admitted but got no verdict from the destination (e.g. a transform failed
  // before the publish): its slot in its round is given back.
  void Abandon(uint64_t probe);

  State state() const;
  static std::string_view Name(State s);

 private:
  void MoveTo(State to, std::string_view reason);

  const CircuitBreakerConfig config_;
  const OnTransition on_transition_;
  mutable std::mutex mu_;
  State state_ = State::kClosed;
  int consecutive_outages_ = 0;
  int probes_out_ = 0;       // half-open: this round's probes admitted and not yet recorded
  uint64_t round_ = 0;       // half-open rounds so far (a probe carries its round)
  int64_t open_for_ms_ = 0;  // the current (or last) open time
  TimePoint open_until_{};
};

}  // namespace queuebox
