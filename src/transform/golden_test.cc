// The golden cases (testdata/golden.json) through the embedded engine. testdata/golden_node.js
// runs the same file through the official npm package under Node: together, the differential
// test (docs/transforms.md).
//
// A case: {"name", "expr", "input"? (absent: no input), "bindings"? (object of $ variables),
// "maxDepth"? and one of "result" (JSON value, compared in order), "undefined": true, or
// "error" (JSONata code) with optional "position" and "message"}.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "queuebox/transform/jsonata.h"

namespace queuebox::transform {
namespace {

using Json = nlohmann::ordered_json;

Json LoadCases() {
  std::ifstream in(QB_GOLDEN_FILE);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return Json::parse(buffer.str());
}

TEST(Golden, EveryCaseGivesItsExpectedOutput) {
  const Json cases = LoadCases();
  ASSERT_GE(cases.size(), 300u);
  std::set<std::string> names;
  int passed = 0;
  for (const Json& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name + ": " + c.at("expr").get<std::string>());
    EXPECT_TRUE(names.insert(name).second) << "duplicate name";
    Limits limits;
    if (c.contains("maxDepth")) limits.max_depth = c["maxDepth"].get<int>();
    limits.timeout = std::chrono::milliseconds(5000);  // generous: CI machines are shared
    Bindings bindings;
    if (c.contains("bindings")) {
      for (const auto& [key, value] : c["bindings"].items()) bindings.SetJson(key, value.dump());
    }
    const std::string input = c.contains("input") ? c["input"].dump() : std::string();

    auto expr = Expression::Compile(c.at("expr").get<std::string>(), limits);
    TransformResult<std::optional<std::string>> out =
        expr.ok() ? expr.value().Evaluate(input, bindings)
                  : TransformResult<std::optional<std::string>>(expr.error());
    if (c.contains("error")) {
      if (out.ok()) {
        ADD_FAILURE() << "expected error " << c["error"] << ", got "
                      << out.value().value_or("undefined");
        continue;
      }
      EXPECT_EQ(out.error().code, c["error"].get<std::string>()) << out.error().ToString();
      if (c.contains("position")) EXPECT_EQ(out.error().position, c["position"].get<int>());
      if (c.contains("message")) {
        EXPECT_EQ(out.error().message, c["message"].get<std::string>());
      }
      if (!::testing::Test::HasFailure()) ++passed;
      continue;
    }
    if (!out.ok()) {
      ADD_FAILURE() << "unexpected error " << out.error().ToString();
      continue;
    }
    if (c.contains("undefined")) {
      EXPECT_FALSE(out.value().has_value()) << *out.value();
    } else if (!out.value().has_value()) {
      ADD_FAILURE() << "no value; expected " << c.at("result").dump();
      continue;
    } else {
      const Json got = Json::parse(*out.value());
      EXPECT_EQ(got, c.at("result")) << "got " << *out.value();
    }
    if (!::testing::Test::HasFailure()) ++passed;
  }
  std::printf("golden (embedded engine): %d of %zu cases as expected\n", passed, cases.size());
}

}  // namespace
}  // namespace queuebox::transform
