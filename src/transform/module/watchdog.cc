#include "watchdog.h"

#include <fcntl.h>
#include <js/Interrupt.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace queuebox::transform::internal {
namespace {

std::int64_t Nanos(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}
std::int64_t Nanos(std::chrono::steady_clock::time_point t) { return Nanos(t.time_since_epoch()); }

}  // namespace

Watchdog& Watchdog::Get() {
  static Watchdog* const watchdog = new Watchdog();  // never destroyed: see the header
  return *watchdog;
}

Watchdog::Watchdog() {
  thread_ = std::thread([this] { Run(); });
  thread_.detach();
}

std::size_t Watchdog::ResidentBytes() {
  // One descriptor for the process's life: a read is one pread (~1 µs).
  static const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  static const long page = sysconf(_SC_PAGESIZE);
  char buf[128];
  const ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char* end = nullptr;
  std::strtoul(buf, &end, 10);                                    // size
  const unsigned long resident = std::strtoul(end, nullptr, 10);  // resident pages
  return static_cast<std::size_t>(resident) * static_cast<std::size_t>(page);
}

Watchdog::Slot* Watchdog::Register(JSContext* cx, std::size_t max_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_.emplace_back();
  slot.cx = cx;
  slot.max_bytes = max_bytes;
  return &slot;
}

void Watchdog::Unregister(Slot* slot) {
  // Under mu_, so the watchdog is not calling into this slot's context while it goes away.
  std::lock_guard<std::mutex> lock(mu_);
  slots_.remove_if([slot](const Slot& s) { return &s == slot; });
}

void Watchdog::Arm(Slot* slot, std::chrono::steady_clock::time_point deadline) {
  slot->memory_baseline.store(0);
  slot->memory_alarm.store(false);
  slot->armed_ns.store(Nanos(std::chrono::steady_clock::now()));
  slot->deadline_ns.store(std::max<std::int64_t>(1, Nanos(deadline)));
  // Paired with Run's store of sleeping_ and its re-scan (both sequentially consistent): either
  // the watchdog sees this deadline, or this sees it asleep and wakes it.
  if (sleeping_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_one();
  }
}

int Watchdog::ArmedCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(),
                                        [](const Slot& s) { return s.deadline_ns.load() != 0; }));
}

int Watchdog::BaselinedCount() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) {
    return s.deadline_ns.load() != 0 && s.memory_baseline.load() != 0;
  }));
}

void Watchdog::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  auto last_armed = std::chrono::steady_clock::now();
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const std::int64_t now_ns = Nanos(now);
    bool armed = false;
    auto wake = now + kTick;
    std::size_t in_use = 0;  // read once per tick, when an evaluation has run a tick
    for (Slot& slot : slots_) {
      const std::int64_t deadline = slot.deadline_ns.load();
      if (deadline == 0) continue;
      armed = true;
      if (deadline <= now_ns) {
        JS_RequestInterruptCallback(slot.cx);
        continue;
      }
      if (now_ns - slot.armed_ns.load() >= Nanos(kTick) && !slot.memory_alarm.load()) {
        if (in_use == 0) in_use = ResidentBytes();
        std::size_t expected = 0;
        // The first reading of this evaluation is its baseline.
        if (!slot.memory_baseline.compare_exchange_strong(expected, in_use) &&
            in_use > expected + slot.max_bytes) {
          slot.memory_alarm.store(true);
          JS_RequestInterruptCallback(slot.cx);
        }
      }
      wake =
          std::min(wake, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline)));
    }
    if (armed) last_armed = now;
    if (armed || now - last_armed < kIdleBeforeSleep) {
      cv_.wait_until(lock, wake);
      continue;
    }
    sleeping_.store(true);
    const bool any_armed = std::any_of(slots_.begin(), slots_.end(),
                                       [](const Slot& s) { return s.deadline_ns.load() != 0; });
    if (!any_armed) cv_.wait(lock);
    sleeping_.store(false);
    last_armed = std::chrono::steady_clock::now();
  }
}

}  // namespace queuebox::transform::internal
