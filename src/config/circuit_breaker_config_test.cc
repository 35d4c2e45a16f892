// destinations.<name>.circuitBreaker (docs/configuration.md): absent means the defaults (the
// breaker enabled); `enabled: false` restores QueueBox's behaviour; bad values name their path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config_test_util.h"
#include "queuebox/config.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;

constexpr char kBreakerBase[] =
    "database:\n  url: /tmp/queuebox-test.db\n"
    "destinations:\n"
    "  billing:\n    type: http\n    baseUrl: https://billing.internal\n    path: /orders\n";

class CircuitBreakerConfigTest : public testing::ConfigFileTest {};

TEST_F(CircuitBreakerConfigTest, AbsentMeansTheDefaultsWithTheBreakerEnabled) {
  Result<Config> c = Load(kBreakerBase);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const CircuitBreakerConfig b =
      c->destinations.at("billing").circuit_breaker.value_or(CircuitBreakerConfig{});
  EXPECT_TRUE(b.enabled);
  EXPECT_EQ(b.failure_threshold, 3);
  EXPECT_EQ(b.open_ms, 5000);
  EXPECT_EQ(b.half_open_probes, 1);
}

TEST_F(CircuitBreakerConfigTest, AGivenBlockIsReadWithDefaultsFilled) {
  Result<Config> c = Load(std::string(kBreakerBase) +
                          "    circuitBreaker:\n      failureThreshold: 5\n      openMs: 2000\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const DestinationConfig& d = c->destinations.at("billing");
  ASSERT_TRUE(d.circuit_breaker.has_value());
  EXPECT_TRUE(d.circuit_breaker->enabled);
  EXPECT_EQ(d.circuit_breaker->failure_threshold, 5);
  EXPECT_EQ(d.circuit_breaker->open_ms, 2000);
  EXPECT_EQ(d.circuit_breaker->half_open_probes, 1);
  EXPECT_FALSE(d.options.contains("circuitBreaker")) << "a common key, not the type's";
}

TEST_F(CircuitBreakerConfigTest, EnabledFalseRestoresQueueBoxBehaviour) {
  Result<Config> c = Load(std::string(kBreakerBase) + "    circuitBreaker: {enabled: false}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->destinations.at("billing").circuit_breaker->enabled);
}

TEST_F(CircuitBreakerConfigTest, BadValuesAreReportedWithTheirPath) {
  Result<Config> c = Load(std::string(kBreakerBase) +
                          "    circuitBreaker: {failureThreshold: 0, halfOpenProbes: 0, "
                          "openMs: 0, enable: false}\n");
  ASSERT_FALSE(c.ok());
  const std::string m = c.status().message();
  EXPECT_THAT(m, HasSubstr("destinations.billing.circuitBreaker.failureThreshold"));
  EXPECT_THAT(m, HasSubstr("destinations.billing.circuitBreaker.halfOpenProbes"));
  EXPECT_THAT(m, HasSubstr("destinations.billing.circuitBreaker.openMs"));
  EXPECT_THAT(m, HasSubstr("destinations.billing.circuitBreaker.enable"));
}

}  // namespace
}  // namespace queuebox
