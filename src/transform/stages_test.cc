// The route and destination stages (stages.h) on the real engine: variables, chaining, the error
// strategies of QueueBox reference §8, start-up compile errors, and the evaluation threads.
#include "queuebox/transform/stages.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "queuebox/transform/evaluation_threads.h"

namespace queuebox::transform {
namespace {

using ::testing::HasSubstr;
using Kind = StageResult::Kind;

// Loaded machines descheduled a trivial evaluation past 100 ms: tests that are not about the
// timeout give a generous one.
TransformConfig StageBlock(std::string expression, std::string on_error = "Fail",
                           int64_t timeout_ms = 10000) {
  TransformConfig b;
  b.expression = std::move(expression);
  b.on_error = std::move(on_error);
  b.timeout_ms = timeout_ms;
  return b;
}

Stage MustCompile(const TransformConfig& block, std::string path = "routes[0].transform") {
  Result<Stage> s = CompileStage(block, std::move(path));
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

OutboxRow Row() {
  OutboxRow row;
  row.id = "6b1f0c1e-9a7d-4f0e-8a1c-2f3d4e5f6a7b";
  row.topic = "order.created";
  row.attempt = 2;
  row.created_at = "2026-09-23T18:00:00.123000Z";  // PostgreSQL's text, microseconds
  row.payload = R"({"orderId":"1001","n":5})";
  return row;
}

TEST(InstantText, PrintsTheFractionAsJavaDoes) {
  EXPECT_EQ(InstantText("2026-09-23T18:00:00.123000Z"), "2026-09-23T18:00:00.123Z");
  EXPECT_EQ(InstantText("2026-09-23T18:00:00.123456Z"), "2026-09-23T18:00:00.123456Z");
  EXPECT_EQ(InstantText("2026-09-23T18:00:00.120Z"), "2026-09-23T18:00:00.120Z");  // SQLite
  EXPECT_EQ(InstantText("2026-09-23T18:00:00.000000Z"), "2026-09-23T18:00:00Z");
  EXPECT_EQ(InstantText("2026-09-23T18:00:00.000100Z"), "2026-09-23T18:00:00.000100Z");
  EXPECT_EQ(InstantText("2026-09-23T18:00:00Z"), "2026-09-23T18:00:00Z");
  EXPECT_EQ(InstantText("not a time"), "not a time");
  EXPECT_EQ(InstantText(""), "");
}

TEST(OnError, ExactCaseAndMetricLabels) {
  EXPECT_EQ(ParseOnError("Fail"), OnError::kFail);
  EXPECT_EQ(ParseOnError("Skip"), OnError::kSkip);
  EXPECT_EQ(ParseOnError("Dead"), OnError::kDead);
  EXPECT_EQ(ParseOnError("fail"), std::nullopt);
  EXPECT_EQ(StrategyLabel(OnError::kFail), "fail");
  EXPECT_EQ(StrategyLabel(OnError::kSkip), "skip");
  EXPECT_EQ(StrategyLabel(OnError::kDead), "dead");
  EXPECT_THAT(StrategyLabels(), ::testing::ElementsAre("fail", "skip", "dead"));
}

TEST(CompileStage, ASyntaxErrorNamesTheKeyPathCodeAndPosition) {
  Result<Stage> s = CompileStage(StageBlock("Account.Order[0"), "routes[0].transform");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(),
            "routes[0].transform.expression: S0203 at position 15: Expected \"]\" before end of "
            "expression");
  TransformConfig bad = StageBlock("$");
  bad.on_error = "skip";
  EXPECT_THAT(CompileStage(bad, "destinations.x.transform").status().message(),
              HasSubstr("destinations.x.transform.onError: must be one of Fail, Skip, Dead"));
}

TEST(DeliveryBindings, AreTheRouteAndDestinationVariables) {
  Stage s =
      MustCompile(StageBlock("[$messageId, $topic, $attempt, $timestamp, $source, $headers]"));
  StageResult r = ApplyDeliveryStages(&s, nullptr, Row());
  ASSERT_EQ(r.kind, Kind::kDeliver);
  // $source and $headers are not bound at these stages (no value: left out of the array).
  EXPECT_EQ(r.body, std::optional<std::string>(
                        R"(["6b1f0c1e-9a7d-4f0e-8a1c-2f3d4e5f6a7b","order.created",2,)"
                        R"("2026-09-23T18:00:00.123Z"])"));
  EXPECT_TRUE(r.failed_strategy.empty());
}

TEST(ApplyDeliveryStages, TheDestinationStageReadsTheRouteOutput) {
  Stage route = MustCompile(StageBlock(R"({"id": orderId, "double": n * 2})"));
  Stage dest =
      MustCompile(StageBlock(R"({"data": $, "type": $topic})"), "destinations.d.transform");
  StageResult r = ApplyDeliveryStages(&route, &dest, Row());
  ASSERT_EQ(r.kind, Kind::kDeliver);
  EXPECT_EQ(r.body, std::optional<std::string>(
                        R"({"data":{"id":"1001","double":10},"type":"order.created"})"));
  // A destination stage alone reads the row's payload.
  r = ApplyDeliveryStages(nullptr, &dest, Row());
  EXPECT_EQ(r.body, std::optional<std::string>(
                        R"({"data":{"orderId":"1001","n":5},"type":"order.created"})"));
}

TEST(ApplyDeliveryStages, NoValueDeliversNull) {
  Stage route = MustCompile(StageBlock("missing.field"));
  StageResult r = ApplyDeliveryStages(&route, nullptr, Row());
  ASSERT_EQ(r.kind, Kind::kDeliver);
  EXPECT_EQ(r.body, std::optional<std::string>("null"));
}

// Reference §8: Skip on a route delivers the outbox payload and the destination stage does not
// run; Skip on a destination delivers the route's output.
TEST(ApplyDeliveryStages, SkipPassesTheStagesInputOn) {
  Stage failing_route = MustCompile(StageBlock(R"(orderId + 1)", "Skip"));  // T2001
  Stage dest = MustCompile(StageBlock(R"({"wrapped": $})"), "destinations.d.transform");
  StageResult r = ApplyDeliveryStages(&failing_route, &dest, Row());
  EXPECT_EQ(r.kind, Kind::kDeliver);
  EXPECT_EQ(r.body, std::nullopt);  // the row's payload as is
  EXPECT_EQ(r.failed_strategy, "skip");

  Stage route = MustCompile(StageBlock(R"({"id": orderId})"));
  Stage failing_dest = MustCompile(StageBlock(R"(id + 1)", "Skip"), "destinations.d.transform");
  r = ApplyDeliveryStages(&route, &failing_dest, Row());
  EXPECT_EQ(r.kind, Kind::kDeliver);
  EXPECT_EQ(r.body, std::optional<std::string>(R"({"id":"1001"})"));
  EXPECT_EQ(r.failed_strategy, "skip");
}

TEST(ApplyDeliveryStages, FailRetriesAndDeadDeadLetters) {
  Stage fail = MustCompile(StageBlock(R"(orderId + 1)", "Fail"));
  StageResult r = ApplyDeliveryStages(&fail, nullptr, Row());
  EXPECT_EQ(r.kind, Kind::kRetry);
  EXPECT_EQ(r.error,
            "Transform failed: T2001 at position 9: The left side of the \"+\" operator must "
            "evaluate to a number");
  EXPECT_EQ(r.failed_strategy, "fail");

  Stage dead = MustCompile(StageBlock(R"(orderId + 1)", "Dead"), "destinations.d.transform");
  Stage route = MustCompile(StageBlock("$"));
  r = ApplyDeliveryStages(&route, &dead, Row());
  EXPECT_EQ(r.kind, Kind::kDead);
  EXPECT_EQ(r.error,
            "Transform dead-lettered the message: T2001 at position 9: The left side of the \"+\" "
            "operator must evaluate to a number");
  EXPECT_EQ(r.failed_strategy, "dead");
}

// A timeout and a depth overflow are transform errors like any other.
TEST(ApplyDeliveryStages, LimitsAreTransformErrors) {
  // 1000 ms: the limit binds the compile too, which a sanitizer run on a busy machine slows.
  Stage loop = MustCompile(StageBlock("($f := function($x){ $f($x + 1) }; $f(0))", "Dead", 1000));
  StageResult r = ApplyDeliveryStages(&loop, nullptr, Row());
  EXPECT_EQ(r.kind, Kind::kDead);
  EXPECT_EQ(r.error,
            "Transform dead-lettered the message: D1012: The evaluation ran longer than 1000 ms "
            "and was stopped");

  TransformConfig deep = StageBlock("($f := function($x){ $f($x + 1) + 1 }; $f(0))", "Fail");
  deep.max_depth = 50;
  Stage recursion = MustCompile(deep);
  r = ApplyDeliveryStages(&recursion, nullptr, Row());
  EXPECT_EQ(r.kind, Kind::kRetry);
  EXPECT_THAT(r.error, HasSubstr("Transform failed: D1011"));

  // The engine goes on.
  Stage ok = MustCompile(StageBlock("n"));
  EXPECT_EQ(ApplyDeliveryStages(&ok, nullptr, Row()).body, std::optional<std::string>("5"));
}

Config TwoRoutesOneDestination() {
  Config c;
  DestinationConfig d;
  d.name = "partner";
  d.type = "http";
  d.transform = StageBlock(R"({"data": $})");
  c.destinations["partner"] = d;
  DestinationConfig plain;
  plain.name = "plain";
  plain.type = "http";
  c.destinations["plain"] = plain;
  RouteConfig shaped{"order.*", "partner", {}, ""};
  shaped.transform = StageBlock(R"({"id": orderId})");
  c.routes = {shaped, {"invoice.*", "partner", {}, ""}, {"**", "plain", {}, ""}};
  return c;
}

TEST(DeliveryStages, CreateGivesNothingWithoutTransforms) {
  Config c;
  c.routes = {{"**", "plain", {}, ""}};
  DestinationConfig plain;
  plain.name = "plain";
  c.destinations["plain"] = plain;
  auto stages = DeliveryStages::Create(c, 2);
  ASSERT_TRUE(stages.ok());
  EXPECT_EQ(*stages, nullptr);
  EXPECT_TRUE(CheckTransforms(c).ok());
}

TEST(DeliveryStages, EachRouteGetsItsStageAndItsDestinationsStage) {
  auto created = DeliveryStages::Create(TwoRoutesOneDestination(), 2);
  ASSERT_TRUE(created.ok()) << created.status().message();
  std::shared_ptr<DeliveryStages> stages = *created;
  ASSERT_NE(stages, nullptr);
  EXPECT_EQ(stages->threads(), 2);
  EXPECT_TRUE(stages->Applies(0));
  EXPECT_TRUE(stages->Applies(1));
  EXPECT_FALSE(stages->Applies(2));
  EXPECT_FALSE(stages->Applies(3));

  std::vector<OutboxRow> rows(3, Row());
  std::vector<DeliveryTransforms::Message> in = {{&rows[0], 0}, {&rows[1], 1}, {&rows[2], 2}};
  std::vector<DeliveryTransforms::Result> out(3);
  stages->Apply(in, out);
  EXPECT_EQ(out[0].body, std::optional<std::string>(R"({"data":{"id":"1001"}})"));
  EXPECT_EQ(out[1].body, std::optional<std::string>(R"({"data":{"orderId":"1001","n":5}})"));
  EXPECT_EQ(out[2].body, std::nullopt);  // a route without stages: the payload as is
}

TEST(DeliveryStages, EveryBlockThatDoesNotCompileIsListed) {
  Config c = TwoRoutesOneDestination();
  c.destinations["partner"].transform = StageBlock(R"({"a": })");
  c.routes[0].transform = StageBlock("Account.Order[0");
  c.routes[1].transform = StageBlock("$", "Skip", 0);
  const std::string expected =
      "The configuration has 3 errors. Fix each one and start QueueBox again.\n"
      "  - destinations.partner.transform.expression: S0211 at position 7: The symbol \"}\" "
      "cannot be used as a unary operator\n"
      "  - routes[0].transform.expression: S0203 at position 15: Expected \"]\" before end of "
      "expression\n"
      "  - routes[1].transform.timeoutMs: must be at least 1, got 0";
  auto created = DeliveryStages::Create(c, 1);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(created.status().message(), expected);
  EXPECT_EQ(CheckTransforms(c).message(), expected);
}

TEST(DeliveryStages, ConcurrentCallersShareTheThreads) {
  auto created = DeliveryStages::Create(TwoRoutesOneDestination(), 2);
  ASSERT_TRUE(created.ok());
  std::shared_ptr<DeliveryStages> stages = *created;
  std::vector<std::thread> callers;
  std::atomic<int> right{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int round = 0; round < 25; ++round) {
        std::vector<OutboxRow> rows(8, Row());
        std::vector<DeliveryTransforms::Message> in;
        for (auto& r : rows) in.push_back({&r, 0});
        std::vector<DeliveryTransforms::Result> out(rows.size());
        stages->Apply(in, out);
        for (const auto& r : out) {
          if (r.body == std::optional<std::string>(R"({"data":{"id":"1001"}})")) ++right;
        }
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(right, 4 * 25 * 8);
}

TEST(EvaluationThreads, RunsEveryIndexOnceOnItsOwnThreads) {
  EvaluationThreads threads(3);
  EXPECT_EQ(threads.size(), 3);
  std::mutex mu;
  std::set<std::thread::id> ran_on;
  std::vector<int> seen(100, 0);
  threads.Run(seen.size(), [&](std::size_t i) {
    std::lock_guard<std::mutex> lock(mu);
    ++seen[i];
    ran_on.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 100);
  EXPECT_EQ(ran_on.count(std::this_thread::get_id()), 0u);
  EXPECT_LE(ran_on.size(), 3u);
  threads.Run(0, [&](std::size_t) { ADD_FAILURE() << "no work for n = 0"; });
}

TEST(EvaluationThreads, DefaultCountFollowsCoresAndWorkers) {
  EXPECT_EQ(DefaultEvaluationThreads(1), 1);
  EXPECT_GE(DefaultEvaluationThreads(16), 1);
  EXPECT_LE(DefaultEvaluationThreads(16),
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace queuebox::transform
