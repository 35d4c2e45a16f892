#include "core/startup.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/backoff.h"
#include "core/log.h"
#include "core/redaction.h"

namespace queuebox {

Status WaitForDatabase(OutboxOperations& store, int64_t startup_timeout_ms,
                       const std::atomic<bool>* cancel) {
  using StartupClock = std::chrono::steady_clock;
  auto deadline = StartupClock::now() + std::chrono::milliseconds(startup_timeout_ms);
  int failures = 0;
  Status last;
  log::RateLimiter limiter(std::chrono::milliseconds(5000));
  while (true) {
    last = store.Ping();
    if (last.ok()) {
      if (failures > 0) log::Info("The database answered; starting");
      return last;
    }
    auto now = StartupClock::now();
    if (now >= deadline || (cancel != nullptr && cancel->load())) break;
    int64_t suppressed = 0;
    if (limiter.Allow(&suppressed)) {
      log::Warn("Waiting for the database",
                {{"reason", SanitizeError(last.message(), 500)},
                 {"startup_timeout_ms", std::to_string(startup_timeout_ms)}});
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    int64_t delay = std::min<int64_t>(ReconnectDelayMs(failures++, 200, 5000), left);
    // Sleep in short slices so a cancel is seen quickly.
    auto until = StartupClock::now() + std::chrono::milliseconds(delay);
    while (StartupClock::now() < until && !(cancel != nullptr && cancel->load())) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(50, delay)));
    }
  }
  return Unavailable("The database did not answer within database.startupTimeoutMs (" +
                     std::to_string(startup_timeout_ms) +
                     " ms). Check database.url and that the server is running, or raise "
                     "database.startupTimeoutMs. Last error: " +
                     SanitizeError(last.message(), 500));
}

}  // namespace queuebox
