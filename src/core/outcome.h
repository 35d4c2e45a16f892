// outcome.h: the one place that turns a destination's outcome into the next row state
// (architecture §7 rule 2; QueueBox reference §5.1, §5.2).
//
//   Delivered                      -> sent
//   Reject                         -> dead (no retry can succeed)
//   Retry and attempt < max        -> pending again, attempt + 1, due after RetryDelayMs(attempt)
//   Retry and attempt >= max       -> dead (so a row gets max_attempts + 1 deliveries in all)
//   Unavailable, breaker enabled   -> pending again, attempt unchanged, due after the release
//                                     delay the destination's circuit breaker gives (released)
//   Unavailable, breaker disabled  -> as Retry (QueueBox: every failure spends an attempt)
//
// The error text is redacted and cut to 2000 characters before it reaches last_error.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "queuebox/destination.h"
#include "queuebox/message.h"

namespace queuebox {

struct RowDecision {
  enum class Kind { kSent, kRetry, kDead, kRelease };
  Kind kind = Kind::kSent;
  int64_t delay_ms = 0;  // kRetry, kRelease: ms after the database clock's now
  std::string error;     // kRetry / kDead / kRelease: redacted, <= 2000 characters
};

inline constexpr size_t kMaxLastErrorChars = 2000;

// release_delay_ms: for an Unavailable outcome, the circuit breaker's delay; unset when the
// destination has no breaker (circuitBreaker.enabled false).
RowDecision Decide(const OutboxRow& row, const Outcome& outcome, int64_t retry_base_delay_ms,
                   std::optional<int64_t> release_delay_ms = std::nullopt);

}  // namespace queuebox
