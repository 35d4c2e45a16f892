#include "core/circuit_breaker.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace queuebox {
namespace {

using State = CircuitBreaker::State;
using std::chrono::milliseconds;

class CircuitBreakerTest : public ::testing::Test {
 protected:
  CircuitBreaker Make(CircuitBreakerConfig c) {
    return CircuitBreaker(c, [this](State from, State to, std::string_view reason) {
      transitions.push_back(std::string(CircuitBreaker::Name(from)) + "->" +
                            std::string(CircuitBreaker::Name(to)) + ":" + std::string(reason));
    });
  }
  CircuitBreaker::TimePoint t0 = CircuitBreaker::TimePoint{} + std::chrono::hours(1);
  std::vector<std::string> transitions;
};

TEST_F(CircuitBreakerTest, OpensAfterTheThresholdOfConsecutiveOutagesAndReleasesWithoutPublish) {
  CircuitBreaker b = Make({.enabled = true, .failure_threshold = 3, .open_ms = 1000});
  EXPECT_TRUE(b.Admit(t0).publish);
  EXPECT_EQ(b.Record(true, 0, 0, t0, "refused"), 1000);
  EXPECT_EQ(b.Record(false, 0, 0, t0, ""), 0);  // the count restarts
  b.Record(true, 0, 0, t0, "refused");
  b.Record(true, 0, 0, t0, "refused");
  EXPECT_EQ(b.state(), State::kClosed);
  b.Record(true, 0, 0, t0, "refused");
  EXPECT_EQ(b.state(), State::kOpen);
  CircuitBreaker::Admission a = b.Admit(t0 + milliseconds(999));
  EXPECT_FALSE(a.publish);
  EXPECT_EQ(a.release_delay_ms, 1000);
  EXPECT_EQ(transitions, std::vector<std::string>{"closed->open:refused"});
}

TEST_F(CircuitBreakerTest, HalfOpenLetsTheProbesThroughAndASuccessfulProbeCloses) {
  CircuitBreaker b =
      Make({.enabled = true, .failure_threshold = 1, .open_ms = 1000, .half_open_probes = 2});
  b.Record(true, 0, 0, t0, "down");
  CircuitBreaker::Admission p1 = b.Admit(t0 + milliseconds(1000));
  CircuitBreaker::Admission p2 = b.Admit(t0 + milliseconds(1000));
  CircuitBreaker::Admission p3 = b.Admit(t0 + milliseconds(1000));
  EXPECT_TRUE(p1.publish && p1.probe);
  EXPECT_TRUE(p2.publish && p2.probe);
  EXPECT_FALSE(p3.publish);
  EXPECT_EQ(b.state(), State::kHalfOpen);
  b.Record(false, p1.probe, 0, t0 + milliseconds(1001), "");
  EXPECT_EQ(b.state(), State::kClosed);
  EXPECT_TRUE(b.Admit(t0 + milliseconds(1002)).publish);
  EXPECT_EQ(transitions, (std::vector<std::string>{"closed->open:down",
                                                   "open->half-open:", "half-open->closed:"}));
}

TEST_F(CircuitBreakerTest, AFailedProbeOpensAgainAndRetryAfterLengthensTheOpenTime) {
  CircuitBreaker b = Make({.enabled = true, .failure_threshold = 1, .open_ms = 1000});
  b.Record(true, 0, 0, t0, "down");
  auto probe = b.Admit(t0 + milliseconds(1000));
  ASSERT_TRUE(probe.probe);
  EXPECT_EQ(b.Record(true, probe.probe, 5000, t0 + milliseconds(1000), "HTTP 503"), 5000);
  EXPECT_EQ(b.state(), State::kOpen);
  EXPECT_FALSE(b.Admit(t0 + milliseconds(5999)).publish);
  EXPECT_EQ(b.Admit(t0 + milliseconds(5999)).release_delay_ms, 5000);
  auto second = b.Admit(t0 + milliseconds(6000));
  EXPECT_NE(second.probe, 0u);
  // Retry-After is capped.
  EXPECT_EQ(b.Record(true, second.probe, 3600000, t0 + milliseconds(6000), "HTTP 429"),
            CircuitBreaker::kMaxOpenMs);
}

TEST_F(CircuitBreakerTest, AnAbandonedProbeGivesItsSlotBack) {
  CircuitBreaker b = Make({.enabled = true, .failure_threshold = 1, .open_ms = 10});
  b.Record(true, 0, 0, t0, "down");
  auto p = b.Admit(t0 + milliseconds(10));
  ASSERT_TRUE(p.probe);
  EXPECT_FALSE(b.Admit(t0 + milliseconds(10)).publish);
  b.Abandon(p.probe);
  EXPECT_TRUE(b.Admit(t0 + milliseconds(10)).probe);
}

// A probe that outlives its round (another probe's outage reopened the breaker, and the open time
// passed) neither closes the next round nor frees one of its slots.
TEST_F(CircuitBreakerTest, AProbeFromAnEarlierRoundHasNoSayInTheNextRound) {
  CircuitBreaker b =
      Make({.enabled = true, .failure_threshold = 1, .open_ms = 100, .half_open_probes = 2});
  b.Record(true, 0, 0, t0, "down");
  auto slow = b.Admit(t0 + milliseconds(100));
  auto fast = b.Admit(t0 + milliseconds(100));
  ASSERT_NE(slow.probe, 0u);
  ASSERT_EQ(slow.probe, fast.probe);
  b.Record(true, fast.probe, 0, t0 + milliseconds(101), "down");  // reopens
  ASSERT_EQ(b.state(), State::kOpen);
  auto next1 = b.Admit(t0 + milliseconds(201));
  auto next2 = b.Admit(t0 + milliseconds(201));
  ASSERT_NE(next1.probe, 0u);
  EXPECT_NE(next1.probe, slow.probe);
  EXPECT_NE(next2.probe, 0u);
  EXPECT_FALSE(b.Admit(t0 + milliseconds(201)).publish);  // both slots taken
  // The slow probe of the first round succeeds late: the new round stays half-open, full.
  b.Record(false, slow.probe, 0, t0 + milliseconds(202), "");
  EXPECT_EQ(b.state(), State::kHalfOpen);
  EXPECT_FALSE(b.Admit(t0 + milliseconds(202)).publish);
  b.Abandon(slow.probe);
  EXPECT_FALSE(b.Admit(t0 + milliseconds(202)).publish);
  // This round's own probe decides.
  b.Record(false, next1.probe, 0, t0 + milliseconds(203), "");
  EXPECT_EQ(b.state(), State::kClosed);
}

}  // namespace
}  // namespace queuebox
