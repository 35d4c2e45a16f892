// POST /admin/transform/test, the logic (transform_tester.h): QueueBox's request and answers
// (reference §13.2), with the message id and the clock injected.
#include "queuebox/transform/transform_tester.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace queuebox::transform {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

constexpr char kId[] = "6b1f0c1e-9a7d-4f0e-8a1c-2f3d4e5f6a7b";

TransformTester::Options Fixed(int64_t max_timeout_ms = 1000) {
  TransformTester::Options o;
  o.max_transform_timeout_ms = max_timeout_ms;
  o.new_message_id = [] { return std::string(kId); };
  o.now_iso = [] { return std::string("2026-09-23T18:00:00.123000Z"); };
  return o;
}

void ExpectError(const TransformTestAnswer& a, const std::string& error) {
  EXPECT_EQ(a.status, 400);
  EXPECT_EQ(a.body, Json({{"success", false}, {"error", error}}).dump());
}

// The requests of QueueBox's docs (transform-payloads how-to, http-api reference), vendored in
// tests/vendor/queuebox/transform_examples.json, give the documented result.
TEST(TransformTester, TheDocumentedRequestsGiveTheDocumentedAnswers) {
  std::ifstream in(QB_EXAMPLES_FILE);
  std::stringstream text;
  text << in.rdbuf();
  TransformTester tester(Fixed());
  int requests = 0;
  for (const Json& c : Json::parse(text.str())) {
    if (c["stage"] != "admin") continue;
    ++requests;
    TransformTestAnswer a = tester.Handle(c["request"].dump());
    EXPECT_EQ(a.status, 200) << c["name"];
    Json expected = {{"success", true},
                     {"result", c["result"]},
                     {"context",
                      {{"messageId", kId},
                       {"topic", "order.created"},
                       {"attempt", 0},
                       {"timestamp", "2026-09-23T18:00:00.123Z"}}}};
    EXPECT_EQ(a.body, expected.dump()) << c["name"];
  }
  EXPECT_EQ(requests, 2);
}

TEST(TransformTester, BindsTheMockVariables) {
  TransformTester tester(Fixed());
  TransformTestAnswer a = tester.Handle(
      R"({"expression": "[$messageId, $topic, $attempt, $timestamp, $source, $headers]",
          "payload": {}})");
  ASSERT_EQ(a.status, 200) << a.body;
  // Default topic test.topic; no mockSource: $source unbound; never $headers.
  EXPECT_EQ(Json::parse(a.body)["result"],
            Json::array({kId, "test.topic", 0, "2026-09-23T18:00:00.123Z"}));
  a = tester.Handle(
      R"({"expression": "$source & '/' & $topic", "payload": null, "mockSource": "stripe",
          "mockTopic": "payment.succeeded", "unknownField": [1, 2]})");
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(Json::parse(a.body)["result"], "stripe/payment.succeeded");
  EXPECT_EQ(Json::parse(a.body)["context"]["topic"], "payment.succeeded");
}

TEST(TransformTester, NoValueIsANullResult) {
  TransformTester tester(Fixed());
  TransformTestAnswer a = tester.Handle(R"({"expression": "missing", "payload": {"name": "x"}})");
  ASSERT_EQ(a.status, 200);
  EXPECT_THAT(a.body, HasSubstr(R"({"success":true,"result":null,"context":{)"));
}

TEST(TransformTester, InvalidRequests) {
  TransformTester tester(Fixed());
  ExpectError(tester.Handle("not valid json"), "Invalid request: the body is not a JSON document");
  ExpectError(tester.Handle("[1]"), "Invalid request: the body must be a JSON object");
  ExpectError(tester.Handle(R"({"payload": {}})"),
              "Invalid request: field 'expression' is required");
  ExpectError(tester.Handle(R"({"expression": 5, "payload": {}})"),
              "Invalid request: field 'expression' must be a string");
  ExpectError(tester.Handle(R"({"expression": "a"})"),
              "Invalid request: field 'payload' is required");
  ExpectError(tester.Handle(R"({"expression": "a", "payload": {}, "mockTopic": 1})"),
              "Invalid request: field 'mockTopic' must be a string");
  ExpectError(tester.Handle(R"({"expression": "a", "payload": {}, "timeoutMs": "100"})"),
              "Invalid request: field 'timeoutMs' must be an integer");
  ExpectError(tester.Handle(R"({"expression": "a", "payload": {}, "timeoutMs": 0})"),
              "Invalid request: field 'timeoutMs' must be greater than 0");
}

TEST(TransformTester, InvalidExpressionAndEvaluationErrors) {
  TransformTester tester(Fixed());
  ExpectError(tester.Handle(R"({"expression": "{ unclosed", "payload": {}})"),
              "Invalid expression: S0203 at position 10: Expected \":\" before end of "
              "expression");
  ExpectError(tester.Handle(R"j({"expression": "$undefined()", "payload": {}})j"),
              "T1006 at position 11: Attempted to invoke a non-function");
}

// transform_engine_fuzz: a result cut inside a surrogate pair made an answer that JSON readers
// such as nlohmann refuse ("\ud83d"); the half is now U+FFFD.
TEST(TransformTester, AnAnswerIsJsonWhenAResultCutsASurrogatePair) {
  TransformTester tester(Fixed());
  TransformTestAnswer a =
      tester.Handle(R"j({"expression": "$split(s, '')", "payload": {"s": "\ud83d\ude00"}})j");
  ASSERT_EQ(a.status, 200) << a.body;
  Json body = Json::parse(a.body, nullptr, false);
  ASSERT_FALSE(body.is_discarded()) << a.body;
  EXPECT_EQ(body["result"], Json::array({"\xEF\xBF\xBD", "\xEF\xBF\xBD"}));
}

// transform_engine_fuzz: a regular expression that JavaScript refuses was answered 503 "The JSONata
// engine is unavailable on this server".
TEST(TransformTester, ARegularExpressionJavaScriptRefusesIsAnInvalidExpression) {
  TransformTester tester(Fixed());
  TransformTestAnswer a = tester.Handle(R"j({"expression": "$match(s, /\\s?+/)", "payload": {}})j");
  EXPECT_EQ(a.status, 400);
  EXPECT_THAT(a.body, HasSubstr(R"("error":"Invalid expression: SyntaxError: )"));
}

TEST(TransformTester, TheCallersTimeoutIsClampedToTheMaximum) {
  TransformTester tester(Fixed(/*max_timeout_ms=*/150));
  auto loop = [](const std::string& timeout) {
    return R"j({"expression": "($f := function($x){ $f($x + 1) }; $f(0))", "payload": {})j" +
           timeout + "}";
  };
  ExpectError(tester.Handle(loop(", \"timeoutMs\": 600000")),
              "D1012: The evaluation ran longer than 150 ms and was stopped");
  // A smaller one is the caller's.
  ExpectError(tester.Handle(loop(", \"timeoutMs\": 50")),
              "D1012: The evaluation ran longer than 50 ms and was stopped");
  // And the default is 100 ms.
  ExpectError(tester.Handle(loop("")),
              "D1012: The evaluation ran longer than 100 ms and was stopped");
}

TEST(TransformTester, ErrorAnswerShape) {
  TransformTestAnswer a = TransformTester::ErrorAnswer(413, "Request body exceeds 10 bytes");
  EXPECT_EQ(a.status, 413);
  EXPECT_EQ(a.body, R"({"success":false,"error":"Request body exceeds 10 bytes"})");
}

}  // namespace
}  // namespace queuebox::transform
