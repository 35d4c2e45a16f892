#include "core/backoff.h"

#include <gtest/gtest.h>

namespace queuebox {
namespace {

TEST(RetryDelayTest, DefaultBaseFollowsQueueBoxTable) {
  // attempt 0 -> 1000..1250, 1 -> 2000..2500, 3 -> 8000..10000, >= 6 -> 60000.
  EXPECT_EQ(RetryDelayMsWithJitter(0, 1000, 0), 1000);
  EXPECT_EQ(RetryDelayMsWithJitter(0, 1000, 250), 1250);
  EXPECT_EQ(RetryDelayMsWithJitter(0, 1000, 9999), 1250);  // jitter clamped to exp/4
  EXPECT_EQ(RetryDelayMsWithJitter(1, 1000, 0), 2000);
  EXPECT_EQ(RetryDelayMsWithJitter(3, 1000, 2000), 10000);
  EXPECT_EQ(RetryDelayMsWithJitter(5, 1000, 0), 32000);
  EXPECT_EQ(RetryDelayMsWithJitter(6, 1000, 0), 60000);
  EXPECT_EQ(RetryDelayMsWithJitter(400, 1000, 0), 60000);
}

TEST(RetryDelayTest, NegativeAttemptCountsAsZeroAndJitterIsAtLeastOne) {
  EXPECT_EQ(RetryDelayMsWithJitter(-3, 1000, 0), 1000);
  EXPECT_EQ(RetryDelayMsWithJitter(0, 2, 5), 3);  // exp 2, jitter range [0, 1]
}

TEST(RetryDelayTest, RandomDelayStaysInRange) {
  for (int i = 0; i < 2000; ++i) {
    int64_t d = RetryDelayMs(2, 1000);
    ASSERT_GE(d, 4000);
    ASSERT_LE(d, 5000);
  }
}

TEST(ReconnectDelayTest, CappedAndJittered) {
  for (int f = 0; f < 40; ++f) {
    int64_t d = ReconnectDelayMs(f, 100, 30000);
    ASSERT_GE(d, 1);
    ASSERT_LE(d, 30000);
  }
  EXPECT_GE(ReconnectDelayMs(30, 100, 30000), 15000);
}

}  // namespace
}  // namespace queuebox
