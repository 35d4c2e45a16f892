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
  EXPECT_EQ(b.Record(true, false, 0, t0, "refused"), 1000);
  EXPECT_EQ(b.Record(false, false, 0, t0, ""), 0);  // the count restarts
  b.Record(true, false, 0, t0, "refused");
  b.Record(true, false, 0, t0, "refused");
  EXPECT_EQ(b.state(), State::kClosed);
  b.Record(true, false, 0, t0, "refused");
  EXPECT_EQ(b.state(), State::kOpen);
  CircuitBreaker::Admission a = b.Admit(t0 + milliseconds(999));
  EXPECT_FALSE(a.publish);
  EXPECT_EQ(a.release_delay_ms, 1000);
  EXPECT_EQ(transitions, std::vector<std::string>{"closed->open:refused"});
}

TEST_F(CircuitBreakerTest, HalfOpenLetsTheProbesThroughAndASuccessfulProbeCloses) {
  CircuitBreaker b =
      Make({.enabled = true, .failure_threshold = 1, .open_ms = 1000, .half_open_probes = 2});
  b.Record(true, false, 0, t0, "down");
  CircuitBreaker::Admission p1 = b.Admit(t0 + milliseconds(1000));
  CircuitBreaker::Admission p2 = b.Admit(t0 + milliseconds(1000));
  CircuitBreaker::Admission p3 = b.Admit(t0 + milliseconds(1000));
  EXPECT_TRUE(p1.publish && p1.probe);
  EXPECT_TRUE(p2.publish && p2.probe);
  EXPECT_FALSE(p3.publish);
  EXPECT_EQ(b.state(), State::kHalfOpen);
  b.Record(false, true, 0, t0 + milliseconds(1001), "");
  EXPECT_EQ(b.state(), State::kClosed);
  EXPECT_TRUE(b.Admit(t0 + milliseconds(1002)).publish);
  EXPECT_EQ(transitions, (std::vector<std::string>{"closed->open:down",
                                                   "open->half-open:", "half-open->closed:"}));
}

TEST_F(CircuitBreakerTest, AFailedProbeOpensAgainAndRetryAfterLengthensTheOpenTime) {
  CircuitBreaker b = Make({.enabled = true, .failure_threshold = 1, .open_ms = 1000});
  b.Record(true, false, 0, t0, "down");
  auto probe = b.Admit(t0 + milliseconds(1000));
  ASSERT_TRUE(probe.probe);
  EXPECT_EQ(b.Record(true, true, 5000, t0 + milliseconds(1000), "HTTP 503"), 5000);
  EXPECT_EQ(b.state(), State::kOpen);
  EXPECT_FALSE(b.Admit(t0 + milliseconds(5999)).publish);
  EXPECT_EQ(b.Admit(t0 + milliseconds(5999)).release_delay_ms, 5000);
  EXPECT_TRUE(b.Admit(t0 + milliseconds(6000)).probe);
  // Retry-After is capped.
  EXPECT_EQ(b.Record(true, true, 3600000, t0 + milliseconds(6000), "HTTP 429"),
            CircuitBreaker::kMaxOpenMs);
}

TEST_F(CircuitBreakerTest, AnAbandonedProbeGivesItsSlotBack) {
  CircuitBreaker b = Make({.enabled = true, .failure_threshold = 1, .open_ms = 10});
  b.Record(true, false, 0, t0, "down");
  auto p = b.Admit(t0 + milliseconds(10));
  ASSERT_TRUE(p.probe);
  EXPECT_FALSE(b.Admit(t0 + milliseconds(10)).publish);
  b.Abandon(true);
  EXPECT_TRUE(b.Admit(t0 + milliseconds(10)).probe);
}

}  // namespace
}  // namespace queuebox
