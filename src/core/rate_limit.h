// rate_limit.h: a destination's token bucket (destinations.<name>.rateLimit), one per destination
// per replica. The relay takes tokens when it claims rows: a row that gets one is published; a
// row that does not is given back at once (pending, no attempt spent) with a due time at its turn,
// one token interval after the previous waiting row's, so later claims meet each row about when
// the bucket has a token for it and the replica never holds rows that wait for tokens.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace queuebox {

class RateLimit {
 public:
  using Clock = std::chrono::steady_clock;

  // `per_second` tokens a second, at most `burst` kept (both >= 1). Starts full.
  RateLimit(double per_second, double burst, Clock::time_point now);

  struct Grant {
    std::size_t granted = 0;         // the first `granted` rows may be published now
    std::vector<int64_t> delays_ms;  // one per other row, in order: when its turn comes
    double throttled_s = 0;          // new seconds during which rows wait for tokens
  };
  // Tokens for up to `n` rows at `now`.
  Grant Take(std::size_t n, Clock::time_point now);
  // While rows wait for tokens: the time one whole bucket takes to refill (burst / rate, at least
  // 1 ms), the poller's wait between claims. nullopt when no row waits.
  std::optional<int64_t> WakeInMs(Clock::time_point now) const;

  double per_second() const { return per_second_; }

 private:
  void Refill(Clock::time_point now);

  const double per_second_;
  const double burst_;
  mutable std::mutex mu_;
  double tokens_;                    // guarded by mu_
  Clock::time_point refilled_at_;    // guarded by mu_
  Clock::time_point waiting_until_;  // guarded by mu_: the turn of the last row given back
};

}  // namespace queuebox
