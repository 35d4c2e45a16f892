// backoff.h: delays for retries (QueueBox reference §5.1) and for reconnecting.
//
// Thread-safety: the functions are thread-safe (each thread has its own random engine).
#pragma once

#include <cstdint>

namespace queuebox {

// Maximum retry delay (QueueBox MAX_DELAY_MS), in milliseconds.
inline constexpr int64_t kMaxRetryDelayMs = 60000;

// Retry delay in ms for a row whose `attempt` (before the increment) failed:
// base × 2^attempt (exponent capped at 20, negative attempt counts as 0), plus a uniformly
// random whole jitter in [0, max(1, exp/4)], then capped at 60000 ms.
int64_t RetryDelayMs(int attempt, int64_t base_ms);
// The same with the jitter given (for tests): jitter is clamped into its allowed range.
int64_t RetryDelayMsWithJitter(int attempt, int64_t base_ms, int64_t jitter);

// Capped, jittered exponential backoff for reconnecting to a database or broker:
// min(cap, initial × 2^failures) × a random factor in [0.5, 1.0].
int64_t ReconnectDelayMs(int failures, int64_t initial_ms = 100, int64_t cap_ms = 30000);

}  // namespace queuebox
