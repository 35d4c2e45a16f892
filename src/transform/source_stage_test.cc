// The source stage and the key expressions (source_stage.h) on the real engine: variables, the
// error strategies at a source, the value rules of reference §11.4 and the one warning.
#include "queuebox/transform/source_stage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/log.h"

namespace queuebox::transform {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

TransformConfig Block(std::string expression, std::string on_error = "Fail") {
  TransformConfig b;
  b.expression = std::move(expression);
  b.on_error = std::move(on_error);
  b.timeout_ms = 10000;  // not about the timeout: a loaded machine must not fail it
  return b;
}

SourceMessage Message() {
  SourceMessage m;
  m.source = "github";
  m.message_id = "0d5f7a51-3c1e-4b61-9d3e-7a4c2b1e9f00";
  m.received_at = "2026-09-23T18:00:00.500000Z";
  m.idempotency_key = "d-77";
  m.event_type = "opened";
  m.headers = {{"x-github-event", "pull_request"}, {"X-Tenant", "acme"}};
  return m;
}

std::unique_ptr<SourceStages> MustCreate(std::vector<SourceTransformConfig> sources) {
  auto created = SourceStages::Create(sources, 1);
  EXPECT_TRUE(created.ok()) << created.status().message();
  return std::move(created).value();
}

// Collects log lines while alive.
class LogCapture {
 public:
  LogCapture() {
    log::SetSinkForTesting([this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    });
  }
  ~LogCapture() { log::SetSinkForTesting(nullptr); }
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST(SourceStage, BindsTheSourceVariables) {
  auto stages = MustCreate({{"github",
                             Block(R"({"id": $messageId, "topic": $topic, "attempt": $attempt,
                                      "at": $timestamp, "source": $source, "h": $headers,
                                      "key": $idempotencyKey, "type": $eventType})"),
                             {},
                             {},
                             {}}});
  SourceStageResult r = stages->Apply("github", R"({"action":"opened"})", Message());
  ASSERT_EQ(r.kind, SourceStageResult::Kind::kStore);
  EXPECT_FALSE(r.failed);
  EXPECT_EQ(r.payload,
            R"({"id":"0d5f7a51-3c1e-4b61-9d3e-7a4c2b1e9f00","topic":"opened","attempt":0,)"
            R"("at":"2026-09-23T18:00:00.500Z","source":"github",)"
            R"("h":{"x-github-event":"pull_request","X-Tenant":"acme"},"key":"d-77",)"
            R"("type":"opened"})");
  // Missing keys are JSON null; $topic is "" without an event type.
  SourceMessage bare = Message();
  bare.idempotency_key.reset();
  bare.event_type.reset();
  auto nulls = MustCreate(
      {{"s", Block(R"([$topic, $idempotencyKey, $eventType, $headers."x-tenant"])"), {}, {}, {}}});
  r = nulls->Apply("s", "{}", bare);
  // Header names match exactly: "x-tenant" is not "X-Tenant".
  EXPECT_EQ(r.payload, R"(["",null,null])");
}

// QueueBox's how-to "Normalise a webhook at the source"
// (tests/vendor/queuebox/transform_examples.json).
TEST(SourceStage, TheDocumentedGitHubExample) {
  std::ifstream in(QB_EXAMPLES_FILE);
  std::stringstream text;
  text << in.rdbuf();
  Json example;
  for (const Json& c : Json::parse(text.str())) {
    if (c["name"] == "queuebox-docs/source normalises a webhook") example = c;
  }
  ASSERT_TRUE(example.is_object());
  auto stages =
      MustCreate({{"github", Block(example["expr"].get<std::string>(), "Skip"), {}, {}, {}}});
  SourceMessage m = Message();
  m.headers.clear();
  for (const auto& [name, value] : example["bindings"]["headers"].items()) {
    m.headers.emplace_back(name, value.get<std::string>());
  }
  SourceStageResult r = stages->Apply("github", example["input"].dump(), m);
  ASSERT_EQ(r.kind, SourceStageResult::Kind::kStore);
  EXPECT_EQ(Json::parse(r.payload), example["result"]);
}

TEST(SourceStage, SkipStoresTheOriginalBody) {
  auto stages = MustCreate({{"s", Block("action + 1", "Skip"), {}, {}, {}}});
  const std::string body = R"({"action":"opened"})";
  SourceStageResult r = stages->Apply("s", body, Message());
  EXPECT_EQ(r.kind, SourceStageResult::Kind::kStore);
  EXPECT_TRUE(r.failed);
  EXPECT_EQ(r.payload, body);
}

TEST(SourceStage, FailAndDeadRejectTheMessage) {
  for (const char* on_error : {"Fail", "Dead"}) {
    auto stages = MustCreate({{"s", Block("action + 1", on_error), {}, {}, {}}});
    SourceStageResult r = stages->Apply("s", R"({"action":"opened"})", Message());
    EXPECT_EQ(r.kind, SourceStageResult::Kind::kRejected) << on_error;
    EXPECT_EQ(r.reason,
              "T2001 at position 8: The left side of the \"+\" operator must evaluate to a number");
    EXPECT_EQ(RejectionBody(r.reason),
              R"({"error":"Transform failed: T2001 at position 8: The left side of the \"+\" )"
              R"(operator must evaluate to a number"})");
  }
}

TEST(SourceStage, ASourceWithoutATransformStoresTheBody) {
  auto stages = MustCreate({{"keys", {}, "id", {}, {}}});
  EXPECT_FALSE(stages->HasTransform("keys"));
  EXPECT_TRUE(stages->HasKeyExpressions("keys"));
  EXPECT_FALSE(stages->HasKeyExpressions("other"));
  SourceStageResult r = stages->Apply("keys", R"({"id":1})", Message());
  EXPECT_EQ(r.kind, SourceStageResult::Kind::kStore);
  EXPECT_EQ(r.payload, R"({"id":1})");
}

TEST(SourceStages, NothingConfiguredGivesNothing) {
  auto created = SourceStages::Create({{"plain", {}, {}, {}, {}}}, 1);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(*created, nullptr);
}

TEST(SourceStages, ExpressionsThatDoNotCompileStopTheStartWithTheirKeys) {
  auto created = SourceStages::Create({{"github", Block("{"), "Account.Order[0", {}, "type"}}, 1);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().message(),
            "The configuration has 2 errors. Fix each one and start QueueBox again.\n"
            "  - sources.github.transform.expression: S0203 at position 1: Expected \":\" before "
            "end of expression\n"
            "  - sources.github.idempotencyKeyExpression: S0203 at position 15: Expected \"]\" "
            "before end of expression");
}

// Reference §11.4: string, number (whole without a decimal point), boolean give a value; object,
// array, null, blank and no value give none.
TEST(KeyExpressions, ValueRules) {
  auto stages = MustCreate({{"s", {}, "key", "agg", "type"}});
  auto keys = [&](const std::string& body) { return stages->EvaluateKeys("s", body); };
  EXPECT_EQ(keys(R"({"key":"evt_1","agg":515725.0,"type":true})").idempotency_key, "evt_1");
  EXPECT_EQ(keys(R"({"key":"evt_1","agg":515725.0,"type":true})").aggregate_id, "515725");
  EXPECT_EQ(keys(R"({"key":"evt_1","agg":515725.0,"type":true})").event_type, "true");
  EXPECT_EQ(keys(R"({"key":1.5,"agg":-3,"type":false})").idempotency_key, "1.5");
  EXPECT_EQ(keys(R"({"key":1.5,"agg":-3,"type":false})").aggregate_id, "-3");
  EXPECT_EQ(keys(R"({"key":1.5,"agg":-3,"type":false})").event_type, "false");
  ExpressionKeys none = keys(R"({"key":{"a":1},"agg":[1],"type":null})");
  EXPECT_EQ(none.idempotency_key, std::nullopt);
  EXPECT_EQ(none.aggregate_id, std::nullopt);
  EXPECT_EQ(none.event_type, std::nullopt);
  ExpressionKeys blank = keys(R"({"key":"  ","agg":""})");
  EXPECT_EQ(blank.idempotency_key, std::nullopt);
  EXPECT_EQ(blank.aggregate_id, std::nullopt);
  EXPECT_EQ(blank.event_type, std::nullopt);  // no value
  // A source without expressions reads nothing here.
  EXPECT_EQ(stages->EvaluateKeys("other", R"({"key":"x"})").idempotency_key, std::nullopt);
}

TEST(KeyExpressions, AFailureGivesNoValueAndOneWarning) {
  auto stages = MustCreate({{"stripe", {}, "id + 1", {}, "type"}});
  LogCapture capture;
  ExpressionKeys keys = stages->EvaluateKeys("stripe", R"({"id":"evt_1","type":"paid"})");
  EXPECT_EQ(keys.idempotency_key, std::nullopt);
  EXPECT_EQ(keys.event_type, "paid");
  std::vector<std::string> lines = capture.Lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0],
              HasSubstr("The idempotencyKeyExpression of source 'stripe' failed, so it gives no "
                        "value: T2001 at position 4: The left side of the \\\"+\\\" operator must "
                        "evaluate to a number"));
  EXPECT_THAT(lines[0], HasSubstr("\"level\":\"warn\""));
}

TEST(KeyExpressions, RunWithQueueBoxsFixedLimits) {
  // 100 ms and depth 100: a loop ends at the timeout and gives no value.
  auto stages = MustCreate({{"s", {}, "($f := function($x){ $f($x + 1) }; $f(0))", {}, {}}});
  LogCapture capture;
  EXPECT_EQ(stages->EvaluateKeys("s", "{}").idempotency_key, std::nullopt);
  ASSERT_EQ(capture.Lines().size(), 1u);
  EXPECT_THAT(capture.Lines()[0], HasSubstr("D1012: The evaluation ran longer than 100 ms"));
}

}  // namespace
}  // namespace queuebox::transform
