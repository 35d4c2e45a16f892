// startup.h: waiting for the database at start (QueueBox reference §13.6 step 6).
//
// Thread-safety: call from the start-up thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "queuebox/status.h"
#include "queuebox/store.h"

namespace queuebox {

// Pings the store with capped, jittered backoff until it answers or `startup_timeout_ms` passes.
// Returns kUnavailable with a message that names `database.startupTimeoutMs` and carries the last
// (redacted) reason. `cancel` (optional) stops the wait early (a signal during start-up).
Status WaitForDatabase(OutboxOperations& store, int64_t startup_timeout_ms,
                       const std::atomic<bool>* cancel = nullptr);

}  // namespace queuebox
