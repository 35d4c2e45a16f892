#include "core/rate_limit.h"

#include <algorithm>
#include <cmath>

namespace queuebox {

RateLimit::RateLimit(double per_second, double burst, Clock::time_point now)
    : per_second_(std::max(per_second, 1e-9)),
      burst_(std::max(burst, 1.0)),
      tokens_(burst_),
      refilled_at_(now),
      waiting_until_(now) {}

void RateLimit::Refill(Clock::time_point now) {
  if (now <= refilled_at_) return;
  const double elapsed = std::chrono::duration<double>(now - refilled_at_).count();
  tokens_ = std::min(burst_, tokens_ + elapsed * per_second_);
  refilled_at_ = now;
}

RateLimit::Grant RateLimit::Take(std::size_t n, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  Refill(now);
  Grant g;
  g.granted = std::min(n, static_cast<std::size_t>(std::floor(tokens_)));
  tokens_ -= static_cast<double>(g.granted);
  if (g.granted == n) return g;
  // The others wait their turn: one token interval apart, after the rows already waiting (or
  // after the bucket's next token when none waits).
  const auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / per_second_));
  const auto next_token = now + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>((1.0 - tokens_) / per_second_));
  Clock::time_point turn = waiting_until_ > now ? waiting_until_ + interval : next_token;
  const Clock::time_point throttled_from = std::max(now, waiting_until_);
  for (std::size_t i = g.granted; i < n; ++i) {
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(turn - now);
    g.delays_ms.push_back(std::max<int64_t>(1, wait.count()));
    waiting_until_ = turn;
    turn += interval;
  }
  g.throttled_s = std::chrono::duration<double>(waiting_until_ - throttled_from).count();
  return g;
}

std::optional<int64_t> RateLimit::WakeInMs(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (waiting_until_ <= now) return std::nullopt;
  // One refill of the whole bucket: a claim then may take up to `burst` rows (a shorter wait
  // would claim again before the waiting rows are due).
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(burst_ / per_second_ * 1000)));
}

}  // namespace queuebox
