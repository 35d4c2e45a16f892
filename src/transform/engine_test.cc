#include "engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "queuebox/transform/jsonata.h"

namespace queuebox::transform {
namespace {

using ::testing::HasSubstr;

TEST(Jsonata, EvaluatesAPath) {
  auto expr = Expression::Compile("order.amount * 2");
  ASSERT_TRUE(expr.ok()) << expr.error().ToString();
  auto out = expr.value().Evaluate(R"({"order":{"amount":21}})");
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(out.value(), std::optional<std::string>("42"));
}

}  // namespace
}  // namespace queuebox::transform
