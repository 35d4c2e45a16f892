// The retry of a fenced write through a database outage (core/write_retry.h).
#include "core/write_retry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace queuebox {
namespace {

// A write that answers `answers` in turn, then OK.
struct ScriptedWrite {
  std::vector<Status> answers;
  size_t calls = 0;
  Result<int> operator()() {
    const size_t n = calls++;
    if (n < answers.size()) return answers[n];
    return 7;
  }
};

TEST(WriteRetryTest, AnOutageIsRetriedUntilTheWriteSucceeds) {
  ScriptedWrite write{{Unavailable("down"), Unavailable("still down")}};
  std::vector<std::string> seen;
  int waits = 0;
  WriteRetryHooks hooks;
  hooks.retry = [&](const Status& s) {
    seen.push_back(s.message());
    return true;
  };
  hooks.after_wait = [&] { ++waits; };
  Result<int> r = RetryTransientWrite([&] { return write(); }, hooks);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(write.calls, 3u);
  EXPECT_EQ(seen, (std::vector<std::string>{"down", "still down"}));
  EXPECT_EQ(waits, 2);
}

TEST(WriteRetryTest, ARefusalThatIsNotAnOutageIsReturnedAtOnce) {
  ScriptedWrite write{{Internal("duplicate key")}};
  int retries = 0;
  WriteRetryHooks hooks;
  hooks.retry = [&](const Status&) { return ++retries > 0; };
  Result<int> r = RetryTransientWrite([&] { return write(); }, hooks);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(write.calls, 1u);
  EXPECT_EQ(retries, 0);
}

TEST(WriteRetryTest, TheCallerGivesUpAndGetsTheLastFailure) {
  ScriptedWrite write{{Unavailable("one"), Unavailable("two"), Unavailable("three")}};
  int retries = 0;
  WriteRetryHooks hooks;  // no after_wait: optional
  hooks.retry = [&](const Status&) { return ++retries < 2; };
  Result<int> r = RetryTransientWrite([&] { return write(); }, hooks);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "two");
  EXPECT_EQ(write.calls, 2u);
}

}  // namespace
}  // namespace queuebox
