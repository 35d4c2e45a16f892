// join_on_exit.h: joins a test's helper thread when the test leaves the scope, also through a
// failed ASSERT_* (which returns from the test body early). A std::thread still joinable at its
// destruction calls std::terminate, which ends the whole test binary and loses every other test's
// result; with the guard the failed test fails alone.
//
// `unblock` runs first, and only if the thread was not joined yet: whatever lets the thread finish
// (stop a worker, open a gate). The guard refers to the thread and must not outlive it: declare it
// right after the thread. Not thread-safe; one guard per thread.
#pragma once

#include <functional>
#include <thread>
#include <utility>

namespace queuebox::testing {

class JoinOnExit {
 public:
  explicit JoinOnExit(std::thread& thread, std::function<void()> unblock = {})
      : thread_(thread), unblock_(std::move(unblock)) {}
  JoinOnExit(const JoinOnExit&) = delete;
  JoinOnExit& operator=(const JoinOnExit&) = delete;
  ~JoinOnExit() {
    if (!thread_.joinable()) return;
    if (unblock_) unblock_();
    thread_.join();
  }

 private:
  std::thread& thread_;
  std::function<void()> unblock_;
};

}  // namespace queuebox::testing
