// Intake: the steps written once, under each refusal policy (sources/intake.h). The brokers'
// precedence is in broker_intake_test.cc; the HTTP answers, through a real server, in
// tests/integration/webhook_source_test.cc.
#include "sources/intake.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sources/waking_intake.h"

namespace queuebox::sources {
namespace {

using nlohmann::json;

class CountingObserver final : public IntakeObserver {
 public:
  void OnInboxMessages(std::string_view status, int64_t n) override {
    counts["messages." + std::string(status)] += n;
  }
  void OnInboxRejection(std::string_view reason) override {
    ++counts["rejected." + std::string(reason)];
  }
  void OnInboxFiltered(std::string_view source) override {
    ++counts["filtered." + std::string(source)];
  }
  std::map<std::string, int64_t> counts;
};

// A source stage whose transform always fails.
class FailingTransform final : public SourceTransforms {
 public:
  bool HasKeyExpressions(std::string_view) const override { return false; }
  ExpressionValues EvaluateKeys(std::string_view, std::string_view) const override { return {}; }
  bool HasTransform(std::string_view) const override { return true; }
  TransformOutput Apply(std::string_view, std::string_view, const TransformInput&) const override {
    TransformOutput out;
    out.rejected = true;
    out.reason = "T1001 at position 3: boom";
    return out;
  }
};

// Rules with the key from header X-Id, then $.id.
IntakeRules Rules(RefusalPolicy policy, CountingObserver* observer) {
  SourceKeys keys;
  auto made = RulesFromKeys("orders", keys, {"$.id"});
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  IntakeRules r = std::move(made).value();
  r.policy = policy;
  r.idempotency_key.header = "X-Id";
  r.idempotency_key.order = {KeyFrom::kHeader, KeyFrom::kPaths};
  r.observer = observer;
  return r;
}

Arrival Message(std::string body, std::vector<std::pair<std::string, std::string>> headers = {}) {
  Arrival a;
  a.body = std::move(body);
  a.headers = std::move(headers);
  return a;
}

TEST(Intake, RefusedFaultsAnswerTheirStatusAndAreCounted) {
  CountingObserver observer;
  Intake intake(Rules(RefusalPolicy::kRefuse, &observer));
  Intaken not_json = intake.Receive(Message("{nope", {{"X-Correlation-Id", "c-1"}}));
  EXPECT_EQ(not_json.kind, Intaken::Kind::kRefused);
  EXPECT_EQ(not_json.status, 400);
  EXPECT_EQ(not_json.error, "Invalid JSON");
  EXPECT_EQ(not_json.row.correlation_id, "c-1");  // read before the fault, for the answer
  Intaken no_key = intake.Receive(Message(R"({"other":1})"));
  EXPECT_EQ(no_key.kind, Intaken::Kind::kRefused);
  EXPECT_EQ(no_key.error, "No idempotency key: header X-Id or $.id gave no value");
  Intaken long_key = intake.Receive(Message(json{{"id", std::string(256, 'k')}}.dump()));
  EXPECT_EQ(long_key.status, 400);
  EXPECT_EQ(long_key.error, "The idempotency key is longer than 255 characters");
  EXPECT_EQ(observer.counts["rejected.invalid_json"], 1);
  EXPECT_EQ(observer.counts["rejected.extraction_failed"], 2);
}

TEST(Intake, StoreDeadKeepsTheMessageAndSkipsTheLaterSteps) {
  CountingObserver observer;
  IntakeRules rules = Rules(RefusalPolicy::kStoreDead, &observer);
  rules.idempotency_key.order.push_back(KeyFrom::kBodyDigest);
  rules.initial_delay_ms = 5000;
  Intake intake(std::move(rules));
  Intaken in = intake.Receive(Message("{nope"));
  ASSERT_EQ(in.kind, Intaken::Kind::kRow);
  EXPECT_TRUE(in.row.dead);
  EXPECT_EQ(json::parse(in.row.payload), (json{{"raw", "{nope"}}));
  EXPECT_EQ(in.row.idempotency_key, BodyDigestKey("{nope"));
  EXPECT_EQ(in.row.delay_ms, 0);  // a dead row gets no delay
  EXPECT_TRUE(observer.counts.empty());
  Intaken good = intake.Receive(Message(R"({"id":"a-1"})"));
  EXPECT_FALSE(good.row.dead);
  EXPECT_EQ(good.row.payload, R"({"id":"a-1"})");
  EXPECT_EQ(good.row.delay_ms, 5000);
}

TEST(Intake, AFailedTransformIsRefusedOrStoredDeadWithTheOriginalPayload) {
  FailingTransform transform;
  CountingObserver observer;
  IntakeRules refuse = Rules(RefusalPolicy::kRefuse, &observer);
  refuse.transforms = &transform;
  Intaken refused = Intake(std::move(refuse)).Receive(Message(R"({"id":"1"})"));
  EXPECT_EQ(refused.status, 422);
  EXPECT_EQ(refused.error, "Transform failed: T1001 at position 3: boom");
  IntakeRules dead = Rules(RefusalPolicy::kStoreDead, &observer);
  dead.transforms = &transform;
  dead.initial_delay_ms = 1000;
  Intaken stored = Intake(std::move(dead)).Receive(Message(R"({"id":"1"})"));
  ASSERT_EQ(stored.kind, Intaken::Kind::kRow);
  EXPECT_TRUE(stored.row.dead);
  EXPECT_EQ(stored.row.payload, R"({"id":"1"})");
  EXPECT_EQ(stored.row.last_error, "Transform failed: T1001 at position 3: boom");
  EXPECT_EQ(stored.row.delay_ms, 0);
  EXPECT_EQ(observer.counts["rejected.transform_failed"], 2);
}

TEST(Intake, TheFilterRunsFirstAndReadsTheSourcesValueOfARepeatedHeader) {
  IntakeRules rules = Rules(RefusalPolicy::kRefuse, nullptr);
  auto filter =
      HeaderFilter::Parse(json::parse(R"({"require":[{"header":"x-env","equals":"prod"}]})"));
  ASSERT_TRUE(filter.ok());
  rules.filter = *filter;
  IntakeRules last = rules;
  rules.repeated = RepeatedHeader::kFirstWins;
  last.repeated = RepeatedHeader::kLastWins;
  const auto headers =
      std::vector<std::pair<std::string, std::string>>{{"X-Env", "prod"}, {"x-env", "test"}};
  Intaken first = Intake(std::move(rules)).Receive(Message("not even json", headers));
  EXPECT_EQ(first.kind, Intaken::Kind::kRefused);  // passed the filter, then not JSON
  Intaken filtered = Intake(std::move(last)).Receive(Message("not even json", headers));
  EXPECT_EQ(filtered.kind, Intaken::Kind::kFiltered);
  EXPECT_EQ(filtered.filter_rule, "require[0] (x-env equals)");
}

TEST(Intake, UnstoredAndCredentialHeadersAreNotStored) {
  IntakeRules rules = Rules(RefusalPolicy::kRefuse, nullptr);
  rules.credential_headers = {"X-Signature"};
  rules.unstored = [](std::string_view name) { return name == "Host"; };
  Intaken in = Intake(std::move(rules))
                   .Receive(Message(R"({"id":"1"})", {{"Host", "example.test"},
                                                      {"x-signature", "sha256=00"},
                                                      {"Authorization", "Bearer t"},
                                                      {"X-Tenant", "t-1"}}));
  ASSERT_EQ(in.kind, Intaken::Kind::kRow);
  EXPECT_EQ(json::parse(in.row.headers), (json{{"X-Tenant", "t-1"}}));
}

// A store that kept a new row wakes the inbox relay; duplicates and failures do not.
TEST(WakingIntake, WakesAfterANewRowOnly) {
  struct Fixed final : InboxIntake {
    Result<std::vector<InboxStoreOutcome>> Store(std::span<const NewInboxMessage>) override {
      if (fail) return Unavailable("down");
      InboxStoreOutcome o;
      o.kind = kind;
      return std::vector<InboxStoreOutcome>{o};
    }
    InboxStoreOutcome::Kind kind = InboxStoreOutcome::Kind::kDuplicate;
    bool fail = false;
  } inner;
  int wakes = 0;
  WakingIntake intake(&inner, [&wakes] { ++wakes; });
  std::vector<NewInboxMessage> one(1);
  ASSERT_TRUE(intake.Store(one).ok());
  EXPECT_EQ(wakes, 0);
  inner.kind = InboxStoreOutcome::Kind::kStored;
  ASSERT_TRUE(intake.Store(one).ok());
  EXPECT_EQ(wakes, 1);
  inner.fail = true;
  EXPECT_FALSE(intake.Store(one).ok());
  EXPECT_EQ(wakes, 1);
}

}  // namespace
}  // namespace queuebox::sources
