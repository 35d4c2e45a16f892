#include "core/outcome.h"

#include <algorithm>

#include "core/backoff.h"
#include "core/redaction.h"

namespace queuebox {

RowDecision Decide(const OutboxRow& row, const Outcome& outcome, int64_t retry_base_delay_ms,
                   std::optional<int64_t> release_delay_ms) {
  RowDecision d;
  Outcome::Kind kind = outcome.kind;
  if (kind == Outcome::Kind::kUnavailable && !release_delay_ms) kind = Outcome::Kind::kRetry;
  switch (kind) {
    case Outcome::Kind::kUnavailable:
      d.kind = RowDecision::Kind::kRelease;
      d.delay_ms = std::max<int64_t>(0, *release_delay_ms);
      break;
    case Outcome::Kind::kDelivered:
      d.kind = RowDecision::Kind::kSent;
      return d;
    case Outcome::Kind::kReject:
      d.kind = RowDecision::Kind::kDead;
      break;
    case Outcome::Kind::kRetry:
    case Outcome::Kind::kCancelled:  // the relay writes nothing for it; a retry if ever written
      if (row.attempt < row.max_attempts) {
        d.kind = RowDecision::Kind::kRetry;
        d.delay_ms = RetryDelayMs(row.attempt, retry_base_delay_ms);
      } else {
        d.kind = RowDecision::Kind::kDead;
      }
      break;
  }
  d.error = SanitizeError(outcome.error.empty() ? "Publish failed: no reason given" : outcome.error,
                          kMaxLastErrorChars);
  return d;
}

}  // namespace queuebox
