// The transform blocks of the configuration (QueueBox reference §8, §12.2): routes[i].transform,
// destinations.<name>.transform, admin.maxTransformTimeoutMs. The expressions are compiled at
// start by the transform library (src/transform/stages.h); here only the keys are checked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config_test_util.h"
#include "config/render.h"
#include "queuebox/config.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Env = std::map<std::string, std::string>;

constexpr char kTransformBase[] =
    "database:\n  url: /tmp/queuebox-test.db\n"
    "destinations:\n"
    "  billing:\n    type: http\n    baseUrl: https://billing.internal\n    path: /orders\n";

class TransformConfigTest : public testing::ConfigFileTest {
 protected:
  std::string Error(const std::string& yaml, Env env = {}) {
    Result<Config> c = Load(yaml, std::move(env));
    EXPECT_FALSE(c.ok());
    if (c.ok()) return "";
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    return c.status().message();
  }
};

// QueueBox's how-to (transform-payloads), "Shape one kind of event on a route" and "Reshape a
// payload at a destination", as written there.
TEST_F(TransformConfigTest, QueueBoxHowToBlocksLoad) {
  Result<Config> c = Load(R"(
database:
  url: /tmp/queuebox-test.db
destinations:
  partner-api:
    type: http
    baseUrl: https://api.partner.example
    path: /events
    transform:
      expression: '{ "id": $messageId, "type": $topic, "data": $ }'
      timeoutMs: 100
      onError: Fail
  billing:
    type: http
    baseUrl: https://billing.internal
    path: /orders

routes:
  - topicPattern: "order.*"
    destination: billing
    transform:
      expression: |
        {
          "orderId": id,
          "customer": customer.name,
          "total": items.(price * quantity) ~> $sum()
        }
      timeoutMs: 150
      onError: Fail
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->routes[0].transform.has_value());
  const TransformConfig& route = *c->routes[0].transform;
  EXPECT_EQ(route.expression,
            "{\n  \"orderId\": id,\n  \"customer\": customer.name,\n  \"total\": items.(price * "
            "quantity) ~> $sum()\n}\n");
  EXPECT_EQ(route.timeout_ms, 150);
  EXPECT_EQ(route.max_depth, 100);
  EXPECT_EQ(route.on_error, "Fail");
  const DestinationConfig& partner = c->destinations.at("partner-api");
  ASSERT_TRUE(partner.transform.has_value());
  EXPECT_EQ(partner.transform->expression, "{ \"id\": $messageId, \"type\": $topic, \"data\": $ }");
  // The common key stays out of the type's options.
  EXPECT_FALSE(partner.options.contains("transform"));
  EXPECT_FALSE(c->destinations.at("billing").transform.has_value());
}

TEST_F(TransformConfigTest, DefaultsFillAGivenBlock) {
  Result<Config> c = Load(std::string(kTransformBase) +
                          "routes:\n  - topicPattern: '**'\n    destination: billing\n"
                          "    transform: {expression: '$'}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->routes[0].transform.has_value());
  EXPECT_EQ(c->routes[0].transform->timeout_ms, 100);
  EXPECT_EQ(c->routes[0].transform->max_depth, 100);
  EXPECT_EQ(c->routes[0].transform->on_error, "Fail");
  EXPECT_EQ(c->admin.max_transform_timeout_ms, 1000);
}

TEST_F(TransformConfigTest, OnErrorNeedsTheExactCase) {
  std::string m = Error(std::string(kTransformBase) +
                        "routes:\n  - topicPattern: '**'\n    destination: billing\n"
                        "    transform: {expression: '$', onError: fail}\n");
  EXPECT_THAT(m, HasSubstr("  - routes[0].transform.onError: must be one of Fail, Skip, Dead "
                           "(exact case); did you mean Fail?"));
  m = Error(std::string(kTransformBase) + "    transform: {expression: '$', onError: Retry}\n");
  EXPECT_THAT(m, HasSubstr("  - destinations.billing.transform.onError: must be one of Fail, "
                           "Skip, Dead, got 'Retry'"));
}

TEST_F(TransformConfigTest, BadBlocksAreReportedWithTheirPath) {
  std::string m = Error(std::string(kTransformBase) +
                        "    transform: {timeoutMs: 0, maxDepth: -1}\n"
                        "routes:\n  - topicPattern: '**'\n    destination: billing\n"
                        "    transform: {expression: '$', timeout: 5}\n"
                        "  - topicPattern: 'a'\n    destination: billing\n"
                        "    transform: '$.a'\n");
  EXPECT_THAT(m, HasSubstr("  - destinations.billing.transform.expression: required key is "
                           "missing"));
  EXPECT_THAT(m, HasSubstr("  - destinations.billing.transform.timeoutMs: must be at least 1, "
                           "got 0"));
  EXPECT_THAT(m, HasSubstr("  - destinations.billing.transform.maxDepth: must be between 1 and "
                           "2147483647, got -1"));
  EXPECT_THAT(m, HasSubstr("  - routes[0].transform.timeout: unknown key; did you mean "
                           "timeoutMs?"));
  EXPECT_THAT(m, HasSubstr("  - routes[1].transform:"));
}

TEST_F(TransformConfigTest, EnvironmentSetsTransformKeys) {
  Result<Config> c = Load(
      std::string(kTransformBase) + "routes:\n  - topicPattern: '**'\n    destination: billing\n",
      // A list set by variables replaces the YAML list, so the route is set whole.
      {{"QUEUEBOX_ROUTES_0_TOPICPATTERN", "**"},
       {"QUEUEBOX_ROUTES_0_DESTINATION", "billing"},
       {"QUEUEBOX_ROUTES_0_TRANSFORM_EXPRESSION", "{'id': $messageId}"},
       {"QUEUEBOX_ROUTES_0_TRANSFORM_ONERROR", "Skip"},
       {"QUEUEBOX_DESTINATIONS_BILLING_TRANSFORM_EXPRESSION", "$"},
       {"QUEUEBOX_DESTINATIONS_BILLING_TRANSFORM_TIMEOUTMS", "250"},
       {"QUEUEBOX_ADMIN_MAXTRANSFORMTIMEOUTMS", "2000"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->routes[0].transform.has_value());
  EXPECT_EQ(c->routes[0].transform->expression, "{'id': $messageId}");
  EXPECT_EQ(c->routes[0].transform->on_error, "Skip");
  ASSERT_TRUE(c->destinations.at("billing").transform.has_value());
  EXPECT_EQ(c->destinations.at("billing").transform->timeout_ms, 250);
  EXPECT_EQ(c->admin.max_transform_timeout_ms, 2000);

  std::string m = Error(
      std::string(kTransformBase) + "routes:\n  - topicPattern: '**'\n    destination: billing\n",
      {{"QUEUEBOX_ROUTES_0_TOPICPATTERN", "**"},
       {"QUEUEBOX_ROUTES_0_DESTINATION", "billing"},
       {"QUEUEBOX_ROUTES_0_TRANSFORM_EXPRESSION", "$"},
       {"QUEUEBOX_ROUTES_0_TRANSFORM_ONERROR", "dead"}});
  EXPECT_THAT(m, HasSubstr("routes[0].transform.onError"));
  EXPECT_THAT(m, HasSubstr("QUEUEBOX_ROUTES_0_TRANSFORM_ONERROR"));
}

TEST_F(TransformConfigTest, CheckConfigPrintsTheBlocks) {
  Result<Config> c = Load(std::string(kTransformBase) +
                          "    transform: {expression: '$merge([$, {\"at\": $timestamp}])'}\n"
                          "routes:\n  - topicPattern: '**'\n    destination: billing\n"
                          "    transform: {expression: 'id', onError: Dead}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::string printed = RenderMasked(*c);
  EXPECT_THAT(printed, HasSubstr("transform"));
  EXPECT_THAT(printed, HasSubstr("Dead"));
  EXPECT_THAT(printed, HasSubstr("$timestamp"));
  EXPECT_THAT(printed, Not(HasSubstr("transform: null")));
}

}  // namespace
}  // namespace queuebox
