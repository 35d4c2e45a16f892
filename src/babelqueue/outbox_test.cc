// outbox_test.cc: Outbox writer, OutboxRelay and InMemoryOutboxStore (the Go core's eight outbox
// tests, reference §3.7, plus the store's edge cases), and the idempotency wrapper.
#include "babelqueue/outbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "babelqueue/idempotency.h"

namespace babelqueue {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Records publishes per queue; fails every publish to `fail_queue` with "broker refused".
class FakeTransport final : public Transport {
 public:
  std::string fail_queue;
  std::map<std::string, std::vector<std::string>> published;

  Status Publish(std::string_view queue, std::string_view body) override {
    if (queue == fail_queue) return queuebox::Unavailable("broker refused");
    published[std::string(queue)].emplace_back(body);
    return Status::Ok();
  }
  size_t Size(const std::string& queue) { return published[queue].size(); }
};

// Fails the chosen store operation; forwards the rest to an in-memory store.
class FailingStore final : public OutboxStore {
 public:
  InMemoryOutboxStore inner;
  bool fail_fetch = false, fail_mark_published = false, fail_mark_failed = false;

  Result<std::string> Save(std::string_view e, std::string_view q) override {
    return inner.Save(e, q);
  }
  Result<std::vector<OutboxRecord>> FetchUnpublished(int limit) override {
    if (fail_fetch) return queuebox::Unavailable("fetch down");
    return inner.FetchUnpublished(limit);
  }
  Status MarkPublished(const std::vector<std::string>& ids) override {
    if (fail_mark_published) return queuebox::Unavailable("mark published down");
    return inner.MarkPublished(ids);
  }
  Status MarkFailed(const std::string& id, std::string_view error) override {
    if (fail_mark_failed) return queuebox::Unavailable("mark failed down");
    return inner.MarkFailed(id, error);
  }
};

Envelope NewEnvelope(const std::string& queue) {
  Result<Envelope> env = Make("urn:babel:orders:created", Json{{"order_id", 1042}},
                              {.queue = queue, .trace_id = "trace-keep-me"});
  EXPECT_TRUE(env.ok());
  return *env;
}

RelayOptions NoSleep(std::vector<int64_t>* sleeps = nullptr) {
  RelayOptions options;
  options.sleeper = [sleeps](int64_t ms) {
    if (sleeps) sleeps->push_back(ms);
  };
  return options;
}

TEST(OutboxTest, WriteStoresEncodedBytesVerbatim) {
  InMemoryOutboxStore store;
  Outbox outbox(store);
  const Envelope env = NewEnvelope("orders");
  Result<std::string> id = outbox.Write(env);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, "ob-1");
  Result<std::vector<OutboxRecord>> rows = store.FetchUnpublished(10);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].body, *Encode(env));
  EXPECT_EQ((*rows)[0].queue, "orders");
  EXPECT_EQ((*rows)[0].id, *id);
}

TEST(OutboxTest, WriteDefaultsQueueWhenMetaBlank) {
  InMemoryOutboxStore store;
  Envelope env = NewEnvelope("");
  ASSERT_TRUE(Outbox(store).Write(env).ok());
  EXPECT_EQ((*store.FetchUnpublished(1))[0].queue, "default");
}

TEST(OutboxTest, WriteRefusesAnUnencodableEnvelopeAndSavesNothing) {
  InMemoryOutboxStore store;
  Envelope env = NewEnvelope("orders");
  env.data["bad"] = "\xff";
  Result<std::string> id = Outbox(store).Write(env);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.PendingCount(), 0);
}

TEST(RelayTest, PublishesVerbatimAndMarksPublished) {
  InMemoryOutboxStore store;
  FakeTransport transport;
  const Envelope env = NewEnvelope("orders");
  ASSERT_TRUE(Outbox(store).Write(env).ok());
  RelayResult r = OutboxRelay(transport, store, NoSleep()).Flush();
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.published, 1);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.attempted(), 1);
  EXPECT_EQ(store.PendingCount(), 0);
  ASSERT_EQ(transport.Size("orders"), 1u);
  EXPECT_EQ(transport.published["orders"][0], *Encode(env));
  EXPECT_EQ(Decode(transport.published["orders"][0])->trace_id, "trace-keep-me");
}

TEST(RelayTest, FailingPublishMarksFailedAndContinues) {
  InMemoryOutboxStore store;
  FakeTransport transport;
  transport.fail_queue = "poison";
  Outbox outbox(store);
  ASSERT_TRUE(outbox.Write(NewEnvelope("orders")).ok());
  const std::string poison = *outbox.Write(NewEnvelope("poison"));
  ASSERT_TRUE(outbox.Write(NewEnvelope("orders")).ok());
  std::vector<int64_t> sleeps;
  RelayResult r = OutboxRelay(transport, store, NoSleep(&sleeps)).Flush();
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.published, 2);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(store.PendingCount(), 1);
  EXPECT_EQ(store.AttemptsOf(poison), 1);
  EXPECT_EQ(store.LastErrorOf(poison), "broker refused");
  EXPECT_EQ(store.AttemptsOf("ob-1"), 0);
  EXPECT_EQ(store.AttemptsOf("ob-3"), 0);
  EXPECT_EQ(transport.Size("orders"), 2u);
  EXPECT_THAT(sleeps, ElementsAre(50));  // default step, first failure
}

TEST(RelayTest, DrainLoopsToEmpty) {
  InMemoryOutboxStore store;
  FakeTransport transport;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Outbox(store).Write(NewEnvelope("orders")).ok());
  RelayOptions options = NoSleep();
  options.batch_size = 2;
  RelayResult r = OutboxRelay(transport, store, options).Drain();
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.published, 5);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(store.PendingCount(), 0);
  EXPECT_EQ(transport.Size("orders"), 5u);
}

TEST(RelayTest, DrainStopsWhenOnlyFailingRowsRemain) {
  InMemoryOutboxStore store;
  FakeTransport transport;
  transport.fail_queue = "poison";
  ASSERT_TRUE(Outbox(store).Write(NewEnvelope("poison")).ok());
  RelayResult r = OutboxRelay(transport, store, NoSleep()).Drain();
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.published, 0);
  EXPECT_EQ(r.failed, 1);  // one pass only
  EXPECT_EQ(store.PendingCount(), 1);
}

TEST(RelayTest, DrainHonoursItsCeiling) {
  InMemoryOutboxStore store;
  FakeTransport transport;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Outbox(store).Write(NewEnvelope("orders")).ok());
  RelayOptions options = NoSleep();
  options.batch_size = 1;
  RelayResult r = OutboxRelay(transport, store, options).Drain(3);
  EXPECT_EQ(r.published, 3);
  EXPECT_EQ(store.PendingCount(), 2);
}

TEST(RelayTest, BackoffGrowsLinearlyAndCapsThroughTheInjectedSleeper) {
  InMemoryOutboxStore store;
  FakeTransport transport;
  transport.fail_queue = "poison";
  ASSERT_TRUE(Outbox(store).Write(NewEnvelope("poison")).ok());
  std::vector<int64_t> sleeps;
  RelayOptions options = NoSleep(&sleeps);
  options.backoff_step_ms = 10;
  options.backoff_cap_ms = 35;
  OutboxRelay relay(transport, store, options);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(relay.Flush().status.ok());
  EXPECT_THAT(sleeps, ElementsAre(10, 20, 30, 35, 35));
  EXPECT_EQ(store.AttemptsOf("ob-1"), 5);
}

TEST(RelayTest, EmptyOutboxIsNoOp) {
  InMemoryOutboxStore store;
  FakeTransport transport;
  RelayResult r = OutboxRelay(transport, store, NoSleep()).Flush();
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.attempted(), 0);
  EXPECT_THAT(transport.published, IsEmpty());
}

TEST(RelayTest, StoreErrorsEndThePass) {
  FailingStore store;
  FakeTransport transport;
  ASSERT_TRUE(Outbox(store).Write(NewEnvelope("orders")).ok());
  store.fail_fetch = true;
  RelayResult fetch = OutboxRelay(transport, store, NoSleep()).Flush();
  EXPECT_EQ(fetch.status.message(), "fetch down");
  EXPECT_EQ(fetch.attempted(), 0);

  store.fail_fetch = false;
  store.fail_mark_published = true;
  RelayResult mark = OutboxRelay(transport, store, NoSleep()).Drain();
  EXPECT_EQ(mark.status.message(), "mark published down");
  EXPECT_EQ(mark.published, 0);
  EXPECT_EQ(store.inner.PendingCount(), 1);  // published but still pending: republished later

  store.fail_mark_published = false;
  store.fail_mark_failed = true;
  transport.fail_queue = "orders";
  RelayResult failed = OutboxRelay(transport, store, NoSleep()).Flush();
  EXPECT_EQ(failed.status.message(), "mark failed down");
}

TEST(InMemoryOutboxStoreTest, OldestFirstLimitedAndUnknownIdsIgnored) {
  InMemoryOutboxStore store;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store.Save("body" + std::to_string(i), "q").ok());
  EXPECT_THAT(*store.FetchUnpublished(0), IsEmpty());
  Result<std::vector<OutboxRecord>> two = store.FetchUnpublished(2);
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].body, "body0");
  EXPECT_EQ((*two)[1].body, "body1");
  ASSERT_TRUE(store.MarkPublished({"ob-1", "nope"}).ok());
  ASSERT_TRUE(store.MarkFailed("nope", "x").ok());
  ASSERT_TRUE(store.MarkFailed("ob-2", "first").ok());
  ASSERT_TRUE(store.MarkFailed("ob-2", "second").ok());
  EXPECT_EQ(store.AttemptsOf("ob-2"), 2);
  EXPECT_EQ(store.LastErrorOf("ob-2"), "second");
  EXPECT_EQ(store.PendingCount(), 2);
  EXPECT_EQ((*store.FetchUnpublished(5))[0].id, "ob-2");
}

// ---- idempotency (reference §5.3) ----

class FlakySeenStore final : public SeenStore {
 public:
  bool fail_seen = false, fail_remember = false;
  InMemorySeenStore inner;
  Result<bool> Seen(const std::string& id) override {
    if (fail_seen) return queuebox::Unavailable("seen down");
    return inner.Seen(id);
  }
  Status Remember(const std::string& id) override {
    if (fail_remember) return queuebox::Unavailable("remember down");
    return inner.Remember(id);
  }
  Status Forget(const std::string& id) override { return inner.Forget(id); }
};

TEST(IdempotencyTest, SeenErrorPropagatesAndHandlerDoesNotRun) {
  FlakySeenStore store;
  store.fail_seen = true;
  int runs = 0;
  Handler h = Wrap([&](const Envelope&) { return ++runs, Status::Ok(); }, store);
  Status s = h(NewEnvelope("q"));
  EXPECT_EQ(s.message(), "seen down");
  EXPECT_EQ(runs, 0);
}

TEST(IdempotencyTest, RememberErrorStillAcks) {
  FlakySeenStore store;
  store.fail_remember = true;
  int runs = 0;
  Handler h = Wrap([&](const Envelope&) { return ++runs, Status::Ok(); }, store);
  EXPECT_TRUE(h(NewEnvelope("q")).ok());
  EXPECT_EQ(runs, 1);
}

TEST(IdempotencyTest, HandlerErrorLeavesIdUnmarked) {
  InMemorySeenStore store;
  Handler h = Wrap([](const Envelope&) { return queuebox::Internal("boom"); }, store);
  const Envelope env = NewEnvelope("q");
  EXPECT_EQ(h(env).message(), "boom");
  EXPECT_FALSE(*store.Seen(env.meta.id));
}

}  // namespace
}  // namespace babelqueue
