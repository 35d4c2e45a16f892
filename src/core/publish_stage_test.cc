// The publish stage (core/publish_stage.h): admit -> transform -> drop cancelled -> publish ->
// record, with a programmable destination.
#include "core/publish_stage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <mutex>

#include "testing/fake_destination.h"

namespace queuebox {
namespace {

using testing::FakeDestination;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class RecordingObserver : public RelayObserver {
 public:
  void OnPublishes(const Destination&, int64_t s, int64_t f, double) override {
    std::lock_guard<std::mutex> lock(mu);
    successes += s;
    failures += f;
  }
  void OnQueueDepth(const std::string&, int64_t delta) override {
    std::lock_guard<std::mutex> lock(mu);
    depth += delta;
  }
  void OnTransformFailure(std::string_view strategy) override {
    std::lock_guard<std::mutex> lock(mu);
    transform_failures[std::string(strategy)] += 1;
  }
  void OnCircuitState(const std::string&, int state) override {
    std::lock_guard<std::mutex> lock(mu);
    states.push_back(state);
  }
  std::mutex mu;
  int64_t successes = 0, failures = 0, depth = 0;
  std::map<std::string, int64_t> transform_failures;
  std::vector<int> states;
};

// Fails what the payload says (as a stage with that onError), else wraps the payload.
class PayloadTransforms : public DeliveryTransforms {
 public:
  bool Applies(std::size_t) const override { return true; }
  void Apply(std::span<const Message> messages, std::span<Result> results) const override {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const std::string& p = messages[i].row->payload;
      if (p.find("fail") != std::string::npos) {
        results[i] = {Result::Kind::kRetry, std::nullopt, "Transform failed", "fail"};
      } else if (p.find("dead") != std::string::npos) {
        results[i] = {Result::Kind::kDead, std::nullopt, "Transform dead-lettered it", "dead"};
      } else {
        results[i].body = "{\"wrapped\":" + p + "}";
      }
    }
  }
};

class PublishStageTest : public ::testing::Test {
 protected:
  void Make(bool breaker, int threshold = 3) {
    auto d = std::make_unique<FakeDestination>("sink");
    destination_ = d.get();
    destinations_.emplace("sink", std::move(d));
    options_.circuit_breakers["sink"].enabled = breaker;
    options_.circuit_breakers["sink"].failure_threshold = threshold;
    options_.circuit_breakers["sink"].open_ms = 1;
    stage_ = std::make_unique<PublishStage>(options_, destinations_, &observer_);
  }
  // A task of one row per payload, routing key "rk-<n>".
  DeliveryTask Task(const std::vector<std::string>& payloads) {
    DeliveryTask t;
    t.destination = destination_;
    for (size_t i = 0; i < payloads.size(); ++i) {
      OutboxRow row;
      row.id = "id-" + std::to_string(i);
      row.topic = "t";
      row.payload = payloads[i];
      row.claim_token = "token";
      t.rows.push_back(row);
      t.routing_keys.push_back("rk-" + std::to_string(i));
      t.routes.push_back(0);
    }
    t.transformed = options_.transforms != nullptr;
    t.cancel = CancelFlags(new std::atomic<bool>[payloads.size()]());
    t.attempts.resize(payloads.size());
    return t;
  }

  RelayOptions options_;
  std::map<std::string, std::unique_ptr<Destination>> destinations_;
  FakeDestination* destination_ = nullptr;
  RecordingObserver observer_;
  std::unique_ptr<PublishStage> stage_;
};

TEST_F(PublishStageTest, PublishesTheSliceWithItsRoutingKeysAndRecordsEachAttempt) {
  Make(/*breaker=*/false);
  DeliveryTask task = Task({R"({"n":0})", R"({"n":1})", R"({"n":2})"});
  stage_->Publish(task, 1, 3);
  ASSERT_EQ(destination_->count(), 2u);
  EXPECT_EQ(destination_->published()[0].id, "id-1");
  EXPECT_EQ(destination_->published()[1].routing_key, std::optional<std::string>("rk-2"));
  EXPECT_EQ(task.attempts[1].outcome.kind, Outcome::Kind::kDelivered);
  EXPECT_TRUE(task.attempts[2].publish_start.has_value());
  EXPECT_FALSE(task.attempts[0].publish_start.has_value()) << "not in the slice";
  EXPECT_EQ(observer_.successes, 2);
  EXPECT_EQ(observer_.depth, -2);
  EXPECT_FALSE(stage_->HasBreaker(*destination_));
  EXPECT_EQ(stage_->CircuitState("sink"), "");
}

TEST_F(PublishStageTest, AnOpenBreakerReleasesTheRowsWithoutAPublish) {
  Make(/*breaker=*/true, /*threshold=*/1);
  destination_->set_decider(
      [](const OutboxRow&) { return Outcome::Unavailable("refused", 60000); });
  DeliveryTask task = Task({"{}", "{}", "{}"});
  stage_->Publish(task, 0, 1);
  EXPECT_EQ(task.attempts[0].outcome.kind, Outcome::Kind::kUnavailable);
  EXPECT_EQ(task.attempts[0].release_delay_ms, 60000) << "the Retry-After";
  EXPECT_EQ(stage_->CircuitState("sink"), "open");
  stage_->Publish(task, 1, 3);
  EXPECT_EQ(destination_->count(), 1u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_THAT(task.attempts[i].outcome.error, StartsWith(std::string(kNotPublished)));
    EXPECT_THAT(task.attempts[i].outcome.error, HasSubstr("destination 'sink' is out"));
    EXPECT_EQ(task.attempts[i].release_delay_ms, 60000);
    EXPECT_FALSE(task.attempts[i].publish_start.has_value());
  }
  EXPECT_EQ(observer_.failures, 1);
  EXPECT_EQ(observer_.states, (std::vector<int>{0, 1}));
}

TEST_F(PublishStageTest, TransformsGiveTheBodyOrKeepTheRowBack) {
  options_.transforms = std::make_shared<PayloadTransforms>();
  Make(/*breaker=*/false);
  DeliveryTask task = Task({R"({"n":1})", R"("fail")", R"("dead")"});
  stage_->Publish(task, 0, 3);
  ASSERT_EQ(destination_->count(), 1u);
  EXPECT_EQ(destination_->published()[0].body, R"({"wrapped":{"n":1}})");
  EXPECT_EQ(task.rows[0].payload, R"({"n":1})") << "the row keeps its payload";
  EXPECT_EQ(task.attempts[1].outcome.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(task.attempts[1].outcome.error, "Transform failed");
  EXPECT_EQ(task.attempts[2].outcome.kind, Outcome::Kind::kReject);
  EXPECT_EQ(observer_.transform_failures["fail"], 1);
  EXPECT_EQ(observer_.transform_failures["dead"], 1);
  EXPECT_EQ(observer_.successes, 1);
  EXPECT_EQ(observer_.failures, 0) << "rows a stage kept back were not published";
}

TEST_F(PublishStageTest, ARowWhoseClaimWasLostIsNotPublished) {
  Make(/*breaker=*/false);
  DeliveryTask task = Task({"{}", "{}", "{}"});
  task.cancel[1].store(true);
  stage_->Publish(task, 0, 3);
  ASSERT_EQ(destination_->count(), 2u);
  EXPECT_EQ(destination_->published()[1].id, "id-2");
  EXPECT_EQ(task.attempts[1].outcome.kind, Outcome::Kind::kCancelled);
  EXPECT_FALSE(task.attempts[1].publish_start.has_value());
}

// Reports: nothing for message 0, Cancelled for the others; sets the cancel flag of message 2
// first (its claim is lost during the publish).
class CancellingDestination : public FakeDestination {
 public:
  CancellingDestination() : FakeDestination("sink") {}
  void PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) override {
    const_cast<std::atomic<bool>*>(batch[2].cancel)->store(true);
    for (size_t i = 1; i < batch.size(); ++i) sink.Report(i, Outcome::Cancelled());
  }
};

TEST_F(PublishStageTest, UnreportedAndWronglyCancelledMessagesAreRetries) {
  auto d = std::make_unique<CancellingDestination>();
  destination_ = d.get();
  destinations_.emplace("sink", std::move(d));
  options_.circuit_breakers["sink"].enabled = false;
  stage_ = std::make_unique<PublishStage>(options_, destinations_, &observer_);
  DeliveryTask task = Task({"{}", "{}", "{}"});
  stage_->Publish(task, 0, 3);
  EXPECT_EQ(task.attempts[0].outcome.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(task.attempts[0].outcome.error, "Publish failed: the destination reported no outcome");
  EXPECT_EQ(task.attempts[1].outcome.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(task.attempts[1].outcome.error, "Publish failed: cancelled by the destination");
  EXPECT_EQ(task.attempts[2].outcome.kind, Outcome::Kind::kCancelled);
  EXPECT_EQ(observer_.failures, 2) << "the cancelled publish sent nothing";
}

TEST_F(PublishStageTest, AProbeThatATransformKeptBackIsGivenBack) {
  options_.transforms = std::make_shared<PayloadTransforms>();
  Make(/*breaker=*/true, /*threshold=*/1);
  destination_->set_decider([](const OutboxRow&) { return Outcome::Unavailable("refused"); });
  DeliveryTask opener = Task({"{}"});
  stage_->Publish(opener, 0, 1);
  ASSERT_EQ(stage_->CircuitState("sink"), "open");
  // A row that fails its transform: released while the breaker is open (1 ms), then, half-open,
  // admitted as the probe and kept back by the transform.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool probed = false;
  while (!probed && std::chrono::steady_clock::now() < deadline) {
    DeliveryTask task = Task({R"("fail")"});
    stage_->Publish(task, 0, 1);
    probed = task.attempts[0].outcome.kind == Outcome::Kind::kRetry;
  }
  ASSERT_TRUE(probed) << "the breaker never admitted a probe";
  EXPECT_EQ(stage_->CircuitState("sink"), "half-open");
  // Given back, so the next row is a probe too instead of being released.
  DeliveryTask next = Task({R"("fail")"});
  stage_->Publish(next, 0, 1);
  EXPECT_EQ(next.attempts[0].outcome.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(destination_->count(), 1u) << "only the opener reached the destination";
}

}  // namespace
}  // namespace queuebox
