// The notifier thread's start, stop and waits (notifier_thread.h), on real file descriptors. The
// notifiers that use it are proved by tests/integration (pg_notify_test.cc, pg_capture_test.cc).
#include "store/postgres/notifier_thread.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "testing/status_matchers.h"

namespace queuebox::store {
namespace {

using ::queuebox::testing::StatusIs;

TEST(NotifierThreadTest, StopInterruptsAWaitWithoutTimeout) {
  NotifierThread thread("the test notifier", "the notifier");
  std::atomic<int> waited{2};
  ASSERT_TRUE(thread.Start([&] { waited = thread.WaitFor(-1, -1, -1); }).ok());
  EXPECT_TRUE(thread.Stop());
  EXPECT_EQ(waited.load(), -1);
  EXPECT_TRUE(thread.stopping());
  EXPECT_FALSE(thread.Stop());  // idempotent
}

TEST(NotifierThreadTest, AStartedOrStoppedNotifierCannotStartAgain) {
  NotifierThread thread("the test notifier", "the notifier");
  ASSERT_TRUE(thread.Start([&] { (void)thread.WaitFor(-1, -1, -1); }).ok());
  EXPECT_THAT(thread.Start([] {}),
              StatusIs(StatusCode::kFailedPrecondition, "the test notifier is already started"));
  thread.Stop();
  EXPECT_THAT(thread.Start([] {}), StatusIs(StatusCode::kFailedPrecondition));
}

TEST(NotifierThreadTest, WaitForReportsWhichDescriptorIsReadableOrATimeout) {
  int a[2], b[2];
  ASSERT_EQ(pipe(a), 0);
  ASSERT_EQ(pipe(b), 0);
  NotifierThread thread("the test notifier", "the notifier");
  std::atomic<int> timeout{9}, only_b{9}, both{9};
  std::atomic<bool> go{false};
  ASSERT_TRUE(thread
                  .Start([&] {
                    timeout = thread.WaitFor(a[0], b[0], 20);
                    while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    only_b = thread.WaitFor(a[0], b[0], 10000);
                    EXPECT_EQ(write(a[1], "x", 1), 1);
                    both = thread.WaitFor(a[0], b[0], 10000);
                  })
                  .ok());
  while (timeout.load() == 9) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(write(b[1], "x", 1), 1);
  go = true;
  while (both.load() == 9) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  thread.Stop();
  EXPECT_EQ(timeout.load(), 0);  // nothing written yet
  EXPECT_EQ(only_b.load(), 2);
  EXPECT_EQ(both.load(), 3);
  for (int fd : {a[0], a[1], b[0], b[1]}) close(fd);
}

}  // namespace
}  // namespace queuebox::store
