#include "watchdog.h"

#include <js/Interrupt.h>

#include <algorithm>

namespace queuebox::transform::internal {
namespace {

std::int64_t Nanos(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

Watchdog& Watchdog::Get() {
  static Watchdog* const watchdog = new Watchdog();  // never destroyed: see the header
  return *watchdog;
}

Watchdog::Watchdog() {
  thread_ = std::thread([this] { Run(); });
  thread_.detach();
}

Watchdog::Slot* Watchdog::Register(JSContext* cx) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = slots_.emplace_back();
  slot.cx = cx;
  return &slot;
}

void Watchdog::Unregister(Slot* slot) {
  // Under mu_, so the watchdog is not calling into this slot's context while it goes away.
  std::lock_guard<std::mutex> lock(mu_);
  slots_.remove_if([slot](const Slot& s) { return &s == slot; });
}

void Watchdog::Arm(Slot* slot, std::chrono::steady_clock::time_point deadline) {
  slot->deadline_ns.store(std::max<std::int64_t>(1, Nanos(deadline)));
  // Paired with Run's store of sleeping_ and its re-scan (both sequentially consistent): either
  // the watchdog sees this deadline, or this sees it asleep and wakes it.
  if (sleeping_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_one();
  }
}

void Watchdog::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  auto last_armed = std::chrono::steady_clock::now();
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const std::int64_t now_ns = Nanos(now);
    bool armed = false;
    auto wake = now + kTick;
    for (Slot& slot : slots_) {
      const std::int64_t deadline = slot.deadline_ns.load();
      if (deadline == 0) continue;
      armed = true;
      if (deadline <= now_ns) {
        JS_RequestInterruptCallback(slot.cx);
      } else {
        wake = std::min(wake,
                        std::chrono::steady_clock::time_point(std::chrono::nanoseconds(deadline)));
      }
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
