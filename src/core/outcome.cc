#include "core/outcome.h"

#include "core/backoff.h"
#include "core/redaction.h"

namespace queuebox {

RowDecision Decide(const OutboxRow& row, const Outcome& outcome, int64_t retry_base_delay_ms) {
  RowDecision d;
  switch (outcome.kind) {
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
