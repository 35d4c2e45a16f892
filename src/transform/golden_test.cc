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

Json LoadCases(const char* file = QB_GOLDEN_FILE) {
  std::ifstream in(file);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return Json::parse(buffer.str());
}

// What is wrong with one case's output, or "" when it is as expected (as golden_node.js checks).
std::string Check(const Json& c, const TransformResult<std::optional<std::string>>& out) {
  if (c.contains("error")) {
    const std::string code = c["error"].get<std::string>();
    if (out.ok()) return "expected error " + code + ", got " + out.value().value_or("undefined");
    const TransformError& e = out.error();
    if (e.code != code) return "expected error " + code + ", got " + e.ToString();
    if (c.contains("position") && e.position != c["position"].get<int>()) {
      return "expected position " + c["position"].dump() + ", got " + std::to_string(e.position);
    }
    if (c.contains("message") && e.message != c["message"].get<std::string>()) {
      return "expected message " + c["message"].dump() + ", got " + Json(e.message).dump();
    }
    return "";
  }
  if (!out.ok()) return "unexpected error " + out.error().ToString();
  if (c.contains("undefined")) {
    return out.value().has_value() ? "expected no value, got " + *out.value() : "";
  }
  if (!out.value().has_value()) return "no value; expected " + c.at("result").dump();
  const Json got = Json::parse(*out.value(), nullptr, /*allow_exceptions=*/false);
  // ordered_json: key order counts, as in JSON text.
  return got == c.at("result") ? "" : "got " + *out.value() + ", expected " + c["result"].dump();
}

// Runs every case; returns the number that failed (each reported with ADD_FAILURE).
int RunCases(const Json& cases, const char* what) {
  std::set<std::string> names;
  int passed = 0;
  int failed = 0;
  for (const Json& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    Limits limits;
    if (c.contains("maxDepth")) limits.max_depth = c["maxDepth"].get<int>();
    limits.timeout = std::chrono::milliseconds(10000);  // generous: CI machines are shared
    Bindings bindings;
    if (c.contains("bindings")) {
      for (const auto& [key, value] : c["bindings"].items()) bindings.SetJson(key, value.dump());
    }
    const std::string input = c.contains("input") ? c["input"].dump() : std::string();

    auto expr = Expression::Compile(c.at("expr").get<std::string>(), limits);
    const TransformResult<std::optional<std::string>> out =
        expr.ok() ? expr.value().Evaluate(input, bindings)
                  : TransformResult<std::optional<std::string>>(expr.error());
    std::string problem = names.insert(name).second ? Check(c, out) : "duplicate name";
    if (problem.empty()) {
      ++passed;
    } else {
      ++failed;
      ADD_FAILURE() << name << ": " << c["expr"].get<std::string>() << "\n  " << problem;
    }
  }
  std::printf("%s (embedded engine): %zu cases\n%d passed, %d failed\n", what, cases.size(), passed,
              failed);
  return failed;
}

TEST(Golden, EveryCaseGivesItsExpectedOutput) {
  const Json cases = LoadCases();
  ASSERT_GE(cases.size(), 300u);
  RunCases(cases, "golden");
}

// QueueBox's documented transform examples (vendored from its docs, see the file's "doc" fields)
// give the outputs the docs show.
TEST(Golden, QueueBoxDocumentedExamplesGiveTheDocumentedOutput) {
  const Json cases = LoadCases(QB_EXAMPLES_FILE);
  ASSERT_GE(cases.size(), 10u);
  RunCases(cases, "queuebox examples");
}

}  // namespace
}  // namespace queuebox::transform
