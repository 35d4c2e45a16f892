// Relay behaviour against the in-memory store twin (tests/testing/fake_store.h) and a programmable
// destination. The real stores and destinations are covered by tests/contract and tests/e2e.
#include "queuebox/relay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <span>
#include <thread>

#include "testing/fake_destination.h"
#include "testing/fake_store.h"

namespace queuebox {
namespace {

using testing::FakeDestination;
using testing::FakeStore;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

class CountingObserver : public RelayObserver {
 public:
  void OnMessages(std::string_view status, int64_t n) override {
    std::lock_guard<std::mutex> lock(mu);
    messages[std::string(status)] += n;
  }
  void OnClaimsLost(int64_t n) override { lost += n; }
  void OnReclaimed(int64_t n) override { reclaimed += n; }
  void OnPublish(const Destination&, bool, double) override { ++publishes; }
  void OnTransformFailure(std::string_view strategy) override {
    std::lock_guard<std::mutex> lock(mu);
    transform_failures[std::string(strategy)] += 1;
  }
  int64_t TransformFailures(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    return transform_failures[s];
  }
  int64_t Count(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    return messages[s];
  }
  std::mutex mu;
  std::map<std::string, int64_t> messages;
  std::map<std::string, int64_t> transform_failures;
  std::atomic<int64_t> lost{0}, reclaimed{0}, publishes{0};
};

struct Harness {
  explicit Harness(RelayOptions o = Defaults()) : options(std::move(o)) {}

  static RelayOptions Defaults() {
    RelayOptions o;
    o.outbox.poll_interval_ms = 10;
    o.outbox.batch_size = 50;
    o.outbox.concurrency = 16;
    o.outbox.retry_base_delay_ms = 1;
    o.outbox.claim_timeout_ms = 30000;
    o.outbox.shutdown_timeout_ms = 5000;
    o.routes = {{"**", "sink", {}, ""}};
    return o;
  }

  void Start() {
    auto d = std::make_unique<FakeDestination>("sink");
    destination = d.get();
    std::map<std::string, std::unique_ptr<Destination>> ds;
    ds.emplace("sink", std::move(d));
    if (configure) configure(*destination);
    auto r = Relay::Create(options, &store, std::move(ds), &observer);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    relay = std::move(r).value();
    ASSERT_TRUE(relay->Start().ok());
  }

  std::string Insert(std::string topic, std::optional<std::string> key, int max_attempts = 5,
                     std::string payload = R"({"n":1})") {
    NewOutboxRow row;
    row.topic = std::move(topic);
    row.key = std::move(key);
    row.payload = std::move(payload);
    row.max_attempts = max_attempts;
    return store.Insert(row).value();
  }

  void WaitIdle() { ASSERT_TRUE(relay->WaitIdle(20s).ok()); }

  RelayOptions options;
  FakeStore store;
  CountingObserver observer;
  FakeDestination* destination = nullptr;
  std::function<void(FakeDestination&)> configure;
  std::unique_ptr<Relay> relay;
};

TEST(RelayTest, DeliversEveryRowAndMarksItSent) {
  Harness h;
  std::vector<std::string> ids;
  for (int i = 0; i < 120; ++i) ids.push_back(h.Insert("order.created", std::nullopt));
  h.Start();
  h.WaitIdle();
  EXPECT_EQ(h.destination->count(), 120u);
  for (const auto& id : ids) EXPECT_EQ(h.store.Get(id).state, "sent") << id;
  EXPECT_EQ(h.observer.Count("sent"), 120);
  EXPECT_EQ(h.relay->Stop(), 0);
}

TEST(RelayTest, KeepsInsertOrderPerKeyWithManyInFlight) {
  Harness h;
  for (int i = 0; i < 40; ++i) {
    for (int k = 0; k < 10; ++k) h.Insert("t", "key-" + std::to_string(k));
  }
  h.Start();
  h.WaitIdle();
  auto published = h.destination->published();
  ASSERT_EQ(published.size(), 400u);
  std::map<std::string, int64_t> last_seq;
  std::map<std::string, int64_t> seq_of;
  for (const auto& r : h.store.All()) seq_of[r.row.id] = r.row.sequence;
  for (const auto& p : published) {
    int64_t s = seq_of[p.id];
    EXPECT_GT(s, last_seq[*p.key]) << "key " << *p.key << " out of order";
    last_seq[*p.key] = s;
  }
  EXPECT_GT(h.destination->max_batch(), 1) << "rows of different keys should share a batch";
}

TEST(RelayTest, RetriesWithBackoffThenDeadAtTheRowCeiling) {
  Harness h;
  h.configure = [](FakeDestination& d) {
    d.set_decider([](const OutboxRow&) { return Outcome::Retry("HTTP 503: Service Unavailable"); });
  };
  std::string id = h.Insert("order.created", "k", /*max_attempts=*/2);
  h.Start();
  ASSERT_TRUE(h.destination->WaitForCount(3, 10s));
  h.WaitIdle();
  auto row = h.store.Get(id);
  EXPECT_EQ(row.state, "dead");
  EXPECT_EQ(row.row.attempt, 2);  // max_attempts + 1 deliveries: attempts 0, 1, 2
  EXPECT_THAT(row.last_error, HasSubstr("HTTP 503"));
  auto published = h.destination->published();
  ASSERT_EQ(published.size(), 3u);
  EXPECT_EQ(published[0].attempt, 0);
  EXPECT_EQ(published[1].attempt, 1);
  EXPECT_EQ(published[2].attempt, 2);
  EXPECT_EQ(h.observer.Count("failed"), 2);
  EXPECT_EQ(h.observer.Count("dead"), 1);
}

TEST(RelayTest, UnroutableRowGoesDeadWithReasonAndOthersFlow) {
  RelayOptions o = Harness::Defaults();
  o.routes = {{"order.*", "sink", {}, ""}};
  Harness h(o);
  std::string bad = h.Insert("invoice.paid", std::nullopt);
  std::string good = h.Insert("order.created", std::nullopt);
  h.Start();
  h.WaitIdle();
  EXPECT_EQ(h.store.Get(bad).state, "dead");
  EXPECT_EQ(h.store.Get(bad).last_error, "No route matches topic 'invoice.paid'");
  EXPECT_EQ(h.store.Get(good).state, "sent");
  ASSERT_EQ(h.destination->count(), 1u);
  EXPECT_EQ(h.destination->published()[0].id, good);
}

TEST(RelayTest, RejectGoesDeadWithoutRetry) {
  Harness h;
  h.configure = [](FakeDestination& d) {
    d.set_decider(
        [](const OutboxRow&) { return Outcome::Reject("headers are not a JSON object"); });
  };
  std::string id = h.Insert("t", std::nullopt);
  h.Start();
  h.WaitIdle();
  EXPECT_EQ(h.store.Get(id).state, "dead");
  EXPECT_EQ(h.store.Get(id).row.attempt, 0);
  EXPECT_EQ(h.destination->count(), 1u);
}

TEST(RelayTest, SecretsInFailureTextNeverReachLastError) {
  Harness h;
  h.configure = [](FakeDestination& d) {
    d.set_decider([](const OutboxRow&) {
      return Outcome::Reject("HTTP 400: Bad Request - {\"password\":\"hunter2\"} Bearer abc.def");
    });
  };
  std::string id = h.Insert("t", std::nullopt);
  h.Start();
  h.WaitIdle();
  auto row = h.store.Get(id);
  EXPECT_THAT(row.last_error, HasSubstr("HTTP 400"));
  EXPECT_THAT(row.last_error, Not(HasSubstr("hunter2")));
  EXPECT_THAT(row.last_error, Not(HasSubstr("abc.def")));
}

TEST(RelayTest, APoisonRowHoldsOnlyItsOwnKey) {
  Harness h;
  h.configure = [](FakeDestination& d) {
    d.set_decider([](const OutboxRow& r) {
      return r.topic == "poison" ? Outcome::Retry("HTTP 400: Bad Request") : Outcome::Delivered();
    });
  };
  h.options.outbox.retry_base_delay_ms = 200;
  std::string poison = h.Insert("poison", "k1", 3);
  std::string behind = h.Insert("ok", "k1");
  std::vector<std::string> others;
  for (int i = 0; i < 50; ++i) others.push_back(h.Insert("ok", "k" + std::to_string(2 + i % 5)));
  h.Start();
  ASSERT_TRUE(h.destination->WaitForCount(51, 10s));
  // A delivery is counted before its outcome is written; idle = every outcome written (the
  // poison row's retry is 200 ms ahead, not yet claimable).
  h.WaitIdle();
  for (const auto& id : others) EXPECT_EQ(h.store.Get(id).state, "sent");
  EXPECT_EQ(h.store.Get(behind).state, "pending") << "k1's next row waits behind the poison row";
  h.WaitIdle();
  ASSERT_TRUE(h.destination->WaitForCount(55, 20s));  // 4 poison deliveries + the row behind it
  h.WaitIdle();
  EXPECT_EQ(h.store.Get(poison).state, "dead");
  EXPECT_EQ(h.store.Get(behind).state, "sent");
}

TEST(RelayTest, RenewsLeasesWhileASlowPublishRuns) {
  RelayOptions o = Harness::Defaults();
  // Renewed every second; the publish outlasts the lease four times over. A lease much shorter
  // than that lost its claim when a sanitizer run stalled the lease keeper for 200 ms.
  o.outbox.claim_timeout_ms = 3000;
  Harness h(o);
  h.configure = [](FakeDestination& d) { d.set_delay(12s); };
  std::string id = h.Insert("t", std::nullopt);
  h.Start();
  h.WaitIdle();
  EXPECT_EQ(h.store.Get(id).state, "sent");
  EXPECT_EQ(h.observer.lost.load(), 0);
  EXPECT_EQ(h.observer.reclaimed.load(), 0);
}

TEST(RelayTest, ALostClaimIsCountedAndChangesNothing) {
  std::atomic<bool> stolen{false};  // before h: the workers h joins read it
  Harness h;
  FakeStore* store = &h.store;
  h.configure = [&](FakeDestination& d) {
    d.set_decider([&, store](const OutboxRow&) {
      if (!stolen.exchange(true)) {
        // Another replica: the lease runs out, the row is reclaimed and claimed again.
        store->AdvanceClock(60000);
        EXPECT_EQ(store->ReclaimExpired().value(), 1);
        EXPECT_EQ(store->Claim(10, 30000).value().size(), 1u);
      }
      return Outcome::Delivered();
    });
  };
  std::string id = h.Insert("t", std::nullopt);
  h.Start();
  ASSERT_TRUE(h.destination->WaitForCount(1, 10s));
  for (int i = 0; i < 2000 && h.observer.lost.load() == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(h.observer.lost.load(), 1);
  EXPECT_EQ(h.store.Get(id).state, "processing") << "the new owner keeps the row";
  EXPECT_EQ(h.observer.Count("sent"), 0);
}

TEST(RelayTest, SurvivesADatabaseOutageWithoutLosingRows) {
  Harness h;
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) ids.push_back(h.Insert("t", "k" + std::to_string(i % 3)));
  h.store.set_down(true);
  h.Start();
  // The relay has met the outage several times (claims and retries refused) and sent nothing.
  ASSERT_TRUE(h.store.WaitForRefused(3, 10s));
  EXPECT_EQ(h.destination->count(), 0u);
  h.store.set_down(false);
  ASSERT_TRUE(h.destination->WaitForCount(30, 20s));
  h.WaitIdle();
  for (const auto& id : ids) EXPECT_EQ(h.store.Get(id).state, "sent");
}

TEST(RelayTest, PassesTheRouteRoutingKeyToTheDestination) {
  RelayOptions o = Harness::Defaults();
  o.routes = {{"**", "sink", std::string("{{ payload.n }}-{{ payload.missing }}"), "none"}};
  Harness h(o);
  h.Insert("t", std::nullopt);
  h.Start();
  h.WaitIdle();
  ASSERT_EQ(h.destination->count(), 1u);
  EXPECT_EQ(h.destination->published()[0].routing_key, std::optional<std::string>("1-none"));
}

TEST(RelayTest, StopAbandonsWhatDoesNotFinishInTime) {
  RelayOptions o = Harness::Defaults();
  o.outbox.shutdown_timeout_ms = 100;
  Harness h(o);
  h.configure = [](FakeDestination& d) { d.set_delay(1500ms); };
  std::string id = h.Insert("t", std::nullopt);
  h.Start();
  ASSERT_TRUE(h.destination->WaitForCount(0, 1s));
  for (int i = 0; i < 2000 && h.relay->InFlight() == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(h.relay->Stop(), 1);
  EXPECT_EQ(h.store.Get(id).state, "processing") << "left to lease expiry";
}

// The transform seam (DeliveryTransforms, QueueBox reference §8) with a programmable twin; the
// JSONata stages themselves are tested in src/transform and end to end in tests/e2e.
class FakeTransforms : public DeliveryTransforms {
 public:
  using Fn = std::function<Result(const OutboxRow&)>;
  FakeTransforms(std::set<std::size_t> routes, Fn fn) : routes_(std::move(routes)), fn_(fn) {}
  bool Applies(std::size_t route) const override { return routes_.count(route) > 0; }
  void Apply(std::span<const Message> messages, std::span<Result> results) const override {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      EXPECT_TRUE(Applies(messages[i].route));
      results[i] = fn_(*messages[i].row);
    }
    applied += static_cast<int64_t>(messages.size());
  }
  mutable std::atomic<int64_t> applied{0};

 private:
  std::set<std::size_t> routes_;
  Fn fn_;
};

using Kind = DeliveryTransforms::Result::Kind;

// Deliver/Fail/Dead/Skip by a field of the payload, as a stage with that onError would.
DeliveryTransforms::Result ByPayload(const OutboxRow& row) {
  DeliveryTransforms::Result r;
  if (row.payload.find("fail") != std::string::npos) {
    r.kind = Kind::kRetry;
    r.error =
        "Transform failed: T2001 at position 3: The left side of the \"+\" operator must "
        "evaluate to a number";
    r.failed_strategy = "fail";
  } else if (row.payload.find("dead") != std::string::npos) {
    r.kind = Kind::kDead;
    r.error =
        "Transform dead-lettered the message: D1012: The evaluation ran longer than 100 ms "
        "and was stopped";
    r.failed_strategy = "dead";
  } else if (row.payload.find("skip") != std::string::npos) {
    r.failed_strategy = "skip";  // delivers the row's payload
  } else {
    r.body = "{\"transformed\":" + row.payload + "}";
  }
  return r;
}

TEST(RelayTransformTest, DeliversTheTransformedBodyAndKeepsThePayload) {
  Harness h;
  auto t = std::make_shared<FakeTransforms>(std::set<std::size_t>{0}, ByPayload);
  h.options.transforms = t;
  std::string id = h.Insert("order.created", "k", 5, R"({"n":7})");
  h.Start();
  h.WaitIdle();
  ASSERT_EQ(h.destination->count(), 1u);
  EXPECT_EQ(h.destination->published()[0].body, R"({"transformed":{"n":7}})");
  auto row = h.store.Get(id);
  EXPECT_EQ(row.state, "sent");
  EXPECT_EQ(row.row.payload, R"({"n":7})");  // the row keeps its payload
  EXPECT_EQ(t->applied, 1);
  EXPECT_EQ(h.observer.TransformFailures("fail") + h.observer.TransformFailures("skip") +
                h.observer.TransformFailures("dead"),
            0);
}

TEST(RelayTransformTest, FailRetriesCountingAnAttemptAndEndsDeadAtTheCeiling) {
  Harness h;
  h.options.transforms = std::make_shared<FakeTransforms>(std::set<std::size_t>{0}, ByPayload);
  std::string id = h.Insert("order.created", "k", /*max_attempts=*/2, R"({"fail":1})");
  std::string other = h.Insert("order.created", "other", 5, R"({"n":2})");
  h.Start();
  // WaitIdle returns while a retry is scheduled (not yet claimable): run cycles until the row's
  // retries are spent.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  do {
    h.WaitIdle();
  } while (h.store.Get(id).state != "dead" && std::chrono::steady_clock::now() < deadline);
  auto row = h.store.Get(id);
  EXPECT_EQ(row.state, "dead");
  EXPECT_EQ(row.row.attempt, 2);  // evaluated on attempts 0, 1 and 2, as a failed delivery
  EXPECT_EQ(row.last_error,
            "Transform failed: T2001 at position 3: The left side of the \"+\" operator must "
            "evaluate to a number");
  EXPECT_EQ(row.row.payload, R"({"fail":1})");
  EXPECT_EQ(h.observer.TransformFailures("fail"), 3);
  EXPECT_EQ(h.observer.Count("failed"), 2);
  EXPECT_EQ(h.observer.Count("dead"), 1);
  // The failing row never reached the destination; the other one did.
  ASSERT_EQ(h.destination->count(), 1u);
  EXPECT_EQ(h.destination->published()[0].id, other);
  EXPECT_EQ(h.observer.publishes, 1);
  EXPECT_EQ(h.store.Get(other).state, "sent");
}

TEST(RelayTransformTest, DeadIsDeadAtOnceWithoutAnAttempt) {
  Harness h;
  h.options.transforms = std::make_shared<FakeTransforms>(std::set<std::size_t>{0}, ByPayload);
  std::string id = h.Insert("order.created", "k", 5, R"({"dead":1})");
  h.Start();
  h.WaitIdle();
  auto row = h.store.Get(id);
  EXPECT_EQ(row.state, "dead");
  EXPECT_EQ(row.row.attempt, 0);
  EXPECT_EQ(row.last_error,
            "Transform dead-lettered the message: D1012: The evaluation ran longer than 100 ms and "
            "was stopped");
  EXPECT_EQ(h.destination->count(), 0u);
  EXPECT_EQ(h.observer.TransformFailures("dead"), 1);
  EXPECT_EQ(h.observer.Count("dead"), 1);
}

TEST(RelayTransformTest, SkipDeliversThePayloadAndCountsTheFailure) {
  Harness h;
  h.options.transforms = std::make_shared<FakeTransforms>(std::set<std::size_t>{0}, ByPayload);
  std::string id = h.Insert("order.created", "k", 5, R"({"skip":1})");
  h.Start();
  h.WaitIdle();
  EXPECT_EQ(h.store.Get(id).state, "sent");
  ASSERT_EQ(h.destination->count(), 1u);
  EXPECT_EQ(h.destination->published()[0].body, R"({"skip":1})");
  EXPECT_EQ(h.observer.TransformFailures("skip"), 1);
}

TEST(RelayTransformTest, RoutesWithoutAStageAreNotHandedToTheStages) {
  RelayOptions o = Harness::Defaults();
  o.routes = {{"order.*", "sink", {}, ""}, {"**", "sink", {}, ""}};
  Harness h(o);
  auto t = std::make_shared<FakeTransforms>(std::set<std::size_t>{0}, ByPayload);
  h.options.transforms = t;
  h.Insert("invoice.paid", std::nullopt, 5, R"({"n":1})");
  h.Start();
  h.WaitIdle();
  ASSERT_EQ(h.destination->count(), 1u);
  EXPECT_EQ(h.destination->published()[0].body, R"({"n":1})");
  EXPECT_EQ(t->applied, 0);
}

// Capture mode (QueueBox reference §13.8): nothing but a wake or the store's next due time ends
// the poller's wait. Both intervals are an hour, so every delivery below came from one of them.
RelayOptions CaptureMode() {
  RelayOptions o = Harness::Defaults();
  o.outbox.poll_interval_ms = 3600000;
  o.outbox.capture.mode = "postgres-logical";
  o.outbox.capture.reconciliation_interval_ms = 3600000;
  return o;
}

TEST(RelayTest, InCaptureModeAWakeDeliversANewRow) {
  Harness h(CaptureMode());
  h.Start();
  std::string id = h.Insert("t", std::nullopt);
  h.relay->Wake();  // what change capture does for the insert
  ASSERT_TRUE(h.destination->WaitForCount(1, 20s));
  EXPECT_EQ(h.destination->published()[0].id, id);
}

TEST(RelayTest, InCaptureModeTheWaitEndsAtTheNextDueTime) {
  Harness h(CaptureMode());
  std::string id = h.Insert("t", std::nullopt);
  ASSERT_TRUE(h.store.Update(id, [&](FakeStore::Row& r) { r.scheduled_at_ms += 200; }));
  h.Start();  // its first cycle finds nothing due; no wake follows
  ASSERT_TRUE(h.destination->WaitForCount(1, 20s));
  EXPECT_EQ(h.destination->published()[0].id, id);
}

TEST(RelayTest, InCaptureModeARetryIsDeliveredAtItsDueTime) {
  RelayOptions o = CaptureMode();
  o.outbox.retry_base_delay_ms = 100;
  std::atomic<int> calls{0};  // before h: the workers h joins read it
  Harness h(o);
  h.configure = [&](FakeDestination& d) {
    d.set_decider([&](const OutboxRow&) {
      return calls.fetch_add(1) == 0 ? Outcome::Retry("HTTP 503: Service Unavailable")
                                     : Outcome::Delivered();
    });
  };
  std::string id = h.Insert("t", std::nullopt);
  h.Start();
  ASSERT_TRUE(h.destination->WaitForCount(2, 20s));
  auto published = h.destination->published();
  EXPECT_EQ(published[1].attempt, 1);
  for (int i = 0; i < 4000 && h.store.Get(id).state != "sent"; ++i)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(h.store.Get(id).state, "sent");
}

TEST(RelayTest, CreateRefusesANonPositiveReconciliationInterval) {
  RelayOptions o = CaptureMode();
  o.outbox.capture.reconciliation_interval_ms = 0;
  FakeStore store;
  std::map<std::string, std::unique_ptr<Destination>> ds;
  ds.emplace("sink", std::make_unique<FakeDestination>("sink"));
  auto r = Relay::Create(o, &store, std::move(ds));
  EXPECT_THAT(r.status().message(), HasSubstr("reconciliationIntervalMs"));
}

TEST(RelayTest, CreateRefusesARouteToAMissingDestination) {
  RelayOptions o = Harness::Defaults();
  o.routes = {{"**", "nowhere", {}, ""}};
  FakeStore store;
  auto r = Relay::Create(o, &store, {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("routes[0].destination"));
}

}  // namespace
}  // namespace queuebox
