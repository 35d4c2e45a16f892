#include "core/circuit_breaker.h"

#include <algorithm>

namespace queuebox {

CircuitBreaker::CircuitBreaker(CircuitBreakerConfig config, OnTransition on_transition)
    : config_(std::move(config)), on_transition_(std::move(on_transition)) {
  open_for_ms_ = std::max<int64_t>(1, config_.open_ms);
}

std::string_view CircuitBreaker::Name(State s) {
  switch (s) {
    case State::kClosed:
      return "closed";
    case State::kOpen:
      return "open";
    case State::kHalfOpen:
      return "half-open";
  }
  return "closed";
}

void CircuitBreaker::MoveTo(State to, std::string_view reason) {
  State from = state_;
  state_ = to;
  if (on_transition_) on_transition_(from, to, reason);
}

CircuitBreaker::Admission CircuitBreaker::Admit(TimePoint now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ == State::kOpen && now >= open_until_) {
    probes_out_ = 0;
    ++round_;
    MoveTo(State::kHalfOpen, "");
  }
  switch (state_) {
    case State::kClosed:
      return {};
    case State::kOpen:
      return {.publish = false, .probe = 0, .release_delay_ms = open_for_ms_};
    case State::kHalfOpen:
      if (probes_out_ < std::max(1, config_.half_open_probes)) {
        ++probes_out_;
        return {.publish = true, .probe = round_, .release_delay_ms = 0};
      }
      return {.publish = false, .probe = 0, .release_delay_ms = open_for_ms_};
  }
  return {};
}

int64_t CircuitBreaker::Record(bool outage, uint64_t probe_round, int64_t retry_after_ms,
                               TimePoint now, std::string_view reason) {
  std::lock_guard<std::mutex> lock(mu_);
  const bool probe = probe_round != 0 && probe_round == round_;
  const int64_t asked =
      std::clamp<int64_t>(std::max<int64_t>(config_.open_ms, retry_after_ms), 1, kMaxOpenMs);
  if (!outage) {
    consecutive_outages_ = 0;
    if (probe && state_ == State::kHalfOpen) MoveTo(State::kClosed, "");
    if (probe && probes_out_ > 0) --probes_out_;
    return 0;
  }
  ++consecutive_outages_;
  if (probe && probes_out_ > 0) --probes_out_;
  const bool opens = (state_ == State::kClosed &&
                      consecutive_outages_ >= std::max(1, config_.failure_threshold)) ||
                     (state_ == State::kHalfOpen && probe);
  if (opens) {
    open_for_ms_ = asked;
    open_until_ = now + std::chrono::milliseconds(asked);
    MoveTo(State::kOpen, reason);
  } else if (state_ == State::kOpen) {
    // A late outage while open (a publish started before it opened): a longer Retry-After
    // extends the open time.
    if (asked > open_for_ms_) {
      open_for_ms_ = asked;
      open_until_ = std::max(open_until_, now + std::chrono::milliseconds(asked));
    }
  }
  return asked;
}

void CircuitBreaker::Abandon(uint64_t probe_round) {
  if (probe_round == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (probe_round == round_ && probes_out_ > 0) --probes_out_;
}

CircuitBreaker::State CircuitBreaker::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

}  // namespace queuebox
