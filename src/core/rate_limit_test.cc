#include "core/rate_limit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace queuebox {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;

TEST(RateLimit, ABurstThenOneRowPerIntervalEachGivenItsTurn) {
  const RateLimit::Clock::time_point t0{};
  RateLimit limit(10, 3, t0);  // 10/s: one token per 100 ms, 3 kept
  RateLimit::Grant g = limit.Take(5, t0);
  EXPECT_EQ(g.granted, 3u);
  EXPECT_THAT(g.delays_ms, ElementsAre(100, 200));  // the next tokens, in order
  EXPECT_NEAR(g.throttled_s, 0.2, 1e-9);
  EXPECT_EQ(limit.WakeInMs(t0), 300);  // a whole bucket
  // Rows claimed later queue behind the waiting ones, and the throttled time is not counted
  // twice.
  g = limit.Take(2, t0 + milliseconds(50));
  EXPECT_EQ(g.granted, 0u);
  EXPECT_THAT(g.delays_ms, ElementsAre(250, 350));
  EXPECT_NEAR(g.throttled_s, 0.2, 1e-9);
  // At 120 ms one token has come back (1.2 since t0, less the 0 left): one row may go.
  g = limit.Take(3, t0 + milliseconds(120));
  EXPECT_EQ(g.granted, 1u);
  EXPECT_EQ(g.delays_ms.size(), 2u);
  EXPECT_EQ(limit.WakeInMs(t0 + milliseconds(10000)), std::nullopt);  // nobody waits by then
}

TEST(RateLimit, TheBucketRefillsToBurstAtMost) {
  const RateLimit::Clock::time_point t0{};
  RateLimit limit(100, 5, t0);
  EXPECT_EQ(limit.Take(5, t0).granted, 5u);
  EXPECT_EQ(limit.Take(100, t0 + std::chrono::seconds(60)).granted, 5u);
  EXPECT_EQ(limit.Take(1, t0 + std::chrono::seconds(60)).granted, 0u);
  EXPECT_EQ(limit.Take(1, t0 + std::chrono::seconds(60) + milliseconds(5)).granted, 0u);
  EXPECT_EQ(limit.Take(1, t0 + std::chrono::seconds(60) + milliseconds(11)).granted, 1u);
}

}  // namespace
}  // namespace queuebox
