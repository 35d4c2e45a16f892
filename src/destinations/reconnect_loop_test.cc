// ReconnectLoop (broker_common.h): keeps attempting until one succeeds, then waits for a Kick.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "destinations/broker_common.h"

namespace queuebox {
namespace {

// Counts attempts; the first `failures` fail. Waits are bounded by a condition, never a sleep.
class Attempts {
 public:
  explicit Attempts(int failures) : failures_(failures) {}
  Status operator()() {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    cv_.notify_all();
    return calls_ <= failures_ ? Unavailable("broker down") : Status::Ok();
  }
  bool WaitForCalls(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return calls_ >= n; });
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  int failures_;
  std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
};

TEST(ReconnectLoopTest, RetriesUntilConnectedThenWaitsForAKick) {
  Attempts attempts(3);
  ReconnectLoop loop(
      "events", [&] { return attempts(); }, /*initial_ms=*/1, /*cap_ms=*/4);
  EXPECT_EQ(attempts.calls(), 0) << "nothing happens before the first Kick";
  loop.Kick();
  ASSERT_TRUE(attempts.WaitForCalls(4));  // three failures, then the success
  loop.Kick();                            // a lost connection
  ASSERT_TRUE(attempts.WaitForCalls(5));
  loop.Stop();
  int after_stop = attempts.calls();
  loop.Kick();  // ignored after Stop
  EXPECT_EQ(attempts.calls(), after_stop);
}

TEST(ReconnectLoopTest, StopEndsABackoffWait) {
  Attempts attempts(1000000);
  // A long backoff: Stop must not wait for it.
  ReconnectLoop loop(
      "events", [&] { return attempts(); }, /*initial_ms=*/600000,
      /*cap_ms=*/600000);
  loop.Kick();
  ASSERT_TRUE(attempts.WaitForCalls(1));
  loop.Stop();  // returns at once (a wait for the 10 minutes would time the test out)
  EXPECT_EQ(attempts.calls(), 1);
}

}  // namespace
}  // namespace queuebox
