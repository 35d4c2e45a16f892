// write_retry.h: a fenced write retried through a database outage, the outbox and the inbox
// relays alike. A write that fails with a transient error (IsTransient: the database is out) is
// tried again after a capped backoff (50 ms doubling to 5 s, jittered: ReconnectDelayMs) for as
// long as the caller's claims can still hold; any other answer is the caller's.
//
// Thread-safety: a pure function of its arguments; it blocks the calling thread while it waits.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

#include "core/backoff.h"
#include "queuebox/status.h"

namespace queuebox {

struct WriteRetryHooks {
  // Called with each transient failure before the wait: logs it and says whether to go on
  // (false: the claims may have passed, return the failure).
  std::function<bool(const Status&)> retry;
  // Called after each wait, before the next try (the inbox relay renews its leases there).
  // Optional.
  std::function<void()> after_wait;
};

// Runs `write` until it succeeds, fails for good (not transient), or `hooks.retry` gives up;
// returns its last answer.
template <typename Write>
auto RetryTransientWrite(Write&& write, const WriteRetryHooks& hooks) -> decltype(write()) {
  int failures = 0;
  while (true) {
    auto result = write();
    if (result.ok() || !IsTransient(result.status().code())) return result;
    if (!hooks.retry(result.status())) return result;
    std::this_thread::sleep_for(std::chrono::milliseconds(ReconnectDelayMs(failures++, 50, 5000)));
    if (hooks.after_wait) hooks.after_wait();
  }
}

}  // namespace queuebox
