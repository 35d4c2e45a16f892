// monotonic_clock.h: the process's monotonic clock in milliseconds, as an injectable function.
//
// The stores decide every row's fate on the database clock. Some of their own bookkeeping runs
// on the process's clock instead (how long the claim trusts what an earlier claim saw, when the
// next replica heartbeat is due): that code takes a MonotonicMs, so a test drives it with a fake
// clock instead of sleeping.
//
// Thread-safety: SteadyNowMs may be called from any thread; an injected clock must be too.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace queuebox::store {

// Milliseconds on a clock that never goes back; only differences mean anything.
using MonotonicMs = std::function<int64_t()>;

// std::chrono::steady_clock in milliseconds (the default clock).
inline int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace queuebox::store
