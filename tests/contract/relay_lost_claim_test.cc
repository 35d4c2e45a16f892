// A lost claim stops its publish (docs/guarantees.md §3): the relay (src/core/relay.cc) with a
// real http destination posting to a real loopback receiver, on SQLite and PostgreSQL. The
// "second replica" takes a row the way its claim would: a new claim token and lease written to
// the row. The relay's next lease renewal misses the row; a request not yet written is then never
// sent, one already written cannot be called back; either way the relay writes nothing to the
// row and queuebox_claims_lost_total{component="outbox"} counts it once.
// RelayLostClaimRabbitMqTest: the same with a rabbitmq destination on the shared RabbitMQ, a
// message lost while its batch waits for the channel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "admin/metrics.h"
#include "destinations/http/http_destination.h"
#ifdef QB_WITH_RABBITMQ
#include <unistd.h>

#include "destinations/rabbitmq/rabbitmq_destination.h"
#include "testing/amqp_queue.h"
#include "testing/broker_testing.h"
#include "testing/tcp_forwarder.h"
#endif
#include "queuebox/relay.h"
#include "store_test_support.h"
#include "testing/http_receiver.h"

namespace queuebox {
namespace {

using namespace std::chrono_literals;

// The claim token the second replica writes.
constexpr const char* kOtherToken = "c0ffee00-0000-4000-8000-000000000001";

// Holds the first request it receives until Release(); answers every request 204. (The
// receiver records a request once answered, so the held one is known from here.)
class HoldFirst {
 public:
  testing::ReceiverResponse Respond(const testing::ReceivedRequest& request) {
    std::unique_lock<std::mutex> lock(mu_);
    if (held_) return {};
    held_ = true;
    held_id_ = request.Header("X-Message-Id");
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
    return {};
  }
  // The X-Message-Id of the held request once it arrived; "" after `timeout`.
  std::string WaitHeld(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return held_; });
    return held_id_;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false, released_ = false;
  std::string held_id_;
};

class RelayLostClaimTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string pg_url;
    if (GetParam() == "postgresql") QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
    outbox_ = std::make_unique<testing::SqlOutboxUnderTest>(GetParam());
    outbox_->Create(pg_url);
    if (HasFatalFailure()) return;
    receiver_.SetResponder([this](const testing::ReceivedRequest& r) { return hold_.Respond(r); });
    ASSERT_TRUE(receiver_.Start().ok());
  }
  void TearDown() override {
    hold_.Release();
    relay_.reset();
    receiver_.Stop();
  }

  // One publish slot at the receiver (maxInFlight 1): with concurrency 2 the batch's second
  // request waits in the destination while the first is held; with concurrency 1 it waits in the
  // relay, queued behind the publish. The lease (3 s) is renewed every second.
  void Start(int concurrency = 2) {
    HttpDestinationSettings s;
    s.name = "sink";
    s.base_url = receiver_.BaseUrl();
    s.path = "/hooks";
    s.timeout_ms = 120000;
    s.max_in_flight = 1;
    auto d = HttpDestination::Create(std::move(s));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    StartRelay(std::move(d).value(), /*batch_size=*/2, concurrency);
  }

  // The relay with `d` as destination "sink" for every row.
  void StartRelay(std::unique_ptr<Destination> d, int batch_size, int concurrency) {
    std::map<std::string, std::unique_ptr<Destination>> ds;
    ds.emplace("sink", std::move(d));
    RelayOptions o;
    o.outbox.poll_interval_ms = 10;
    o.outbox.batch_size = batch_size;
    o.outbox.concurrency = concurrency;
    o.outbox.retry_base_delay_ms = 1;
    o.outbox.claim_timeout_ms = 3000;
    o.outbox.shutdown_timeout_ms = 20000;
    o.routes = {{"**", "sink", {}, ""}};
    auto r = Relay::Create(o, &outbox_->claims(), std::move(ds), &metrics_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    relay_ = std::move(r).value();
    ASSERT_TRUE(relay_->Start().ok());
  }

  std::vector<std::string> Ids() {
    std::vector<std::string> ids;
    for (const auto& row : outbox_->db().Query("SELECT id FROM outbox ORDER BY sequence")) {
      ids.push_back(row[0]);
    }
    return ids;
  }

  // What a second replica's claim writes: its own token and lease (the row stays processing).
  void TakeAsAnotherReplica(const std::string& id) {
    outbox_->db().Exec("UPDATE outbox SET claim_token = '" + std::string(kOtherToken) +
                       "', lease_expires_at = " + outbox_->db().NowPlus(600) + " WHERE id = '" +
                       id + "'");
  }

  std::map<std::string, std::string> RowState(const std::string& id) {
    std::map<std::string, std::string> m;
    for (const char* c : {"state", "attempt", "claim_token", "lease_expires_at", "last_error"}) {
      m[c] = outbox_->Field(id, c);
    }
    return m;
  }

  // A sample of the Prometheus text; -1 when absent.
  double Sample(const std::string& series) {
    std::string text = metrics_.Render();
    std::string prefix = "\n" + series + " ";
    size_t at = text.find(prefix);
    if (at == std::string::npos) return -1;
    return std::stod(text.substr(at + prefix.size()));
  }
  double Lost() { return Sample(R"(queuebox_claims_lost_total{component="outbox"})"); }

  // Waits until the relay counted `n` lost claims (its lease keeper runs every second).
  bool WaitForLost(double n) {
    for (int i = 0; i < 3000; ++i) {
      if (Lost() >= n) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  std::unique_ptr<testing::SqlOutboxUnderTest> outbox_;
  testing::HttpReceiver receiver_;
  HoldFirst hold_;
  Metrics metrics_;
  std::unique_ptr<Relay> relay_;
};

TEST_P(RelayLostClaimTest, ARequestNotYetSentIsCancelledAndTheRowIsLeftToItsNewOwner) {
  outbox_->InsertRows(2, [](int) { return std::nullopt; });
  Start();
  const std::string sent = hold_.WaitHeld(30s);
  ASSERT_FALSE(sent.empty());
  std::vector<std::string> ids = Ids();
  ASSERT_EQ(ids.size(), 2u);
  const std::string taken = ids[0] == sent ? ids[1] : ids[0];
  ASSERT_NE(taken, sent);
  // The second request waits in the destination for the receiver's one slot.
  TakeAsAnotherReplica(taken);
  const auto taken_state = RowState(taken);
  ASSERT_TRUE(WaitForLost(1)) << "the lease keeper's renewal misses the taken row";
  hold_.Release();
  ASSERT_TRUE(relay_->WaitIdle(60s).ok());

  ASSERT_EQ(receiver_.RequestCount(), 1u) << "the taken row's request is never sent";
  EXPECT_EQ(receiver_.Requests()[0].Header("X-Message-Id"), sent);
  EXPECT_EQ(outbox_->Field(sent, "state"), "sent");
  EXPECT_EQ(RowState(taken), taken_state) << "the relay writes nothing to the taken row";
  EXPECT_EQ(outbox_->Field(taken, "state"), "processing");
  EXPECT_EQ(outbox_->Field(taken, "claim_token"), kOtherToken);
  EXPECT_EQ(Lost(), 1);
  EXPECT_EQ(Sample(R"(queuebox_outbox_messages_total{status="sent"})"), 1);
  EXPECT_EQ(relay_->Stop(), 0);
}

TEST_P(RelayLostClaimTest, ARowQueuedBehindThePublishesIsNeverPublished) {
  outbox_->InsertRows(2, [](int) { return std::nullopt; });
  Start(/*concurrency=*/1);
  const std::string sent = hold_.WaitHeld(30s);
  ASSERT_FALSE(sent.empty());
  std::vector<std::string> ids = Ids();
  ASSERT_EQ(ids.size(), 2u);
  const std::string taken = ids[0] == sent ? ids[1] : ids[0];
  TakeAsAnotherReplica(taken);
  const auto taken_state = RowState(taken);
  ASSERT_TRUE(WaitForLost(1));
  hold_.Release();
  ASSERT_TRUE(relay_->WaitIdle(60s).ok());

  ASSERT_EQ(receiver_.RequestCount(), 1u) << "the queued row never reaches the destination";
  EXPECT_EQ(outbox_->Field(sent, "state"), "sent");
  EXPECT_EQ(RowState(taken), taken_state);
  EXPECT_EQ(Lost(), 1);
  EXPECT_EQ(relay_->Stop(), 0);
}

TEST_P(RelayLostClaimTest, ARequestAlreadySentFinishesButChangesNothingAndCountsOnce) {
  outbox_->InsertRows(1, [](int) { return std::nullopt; });
  Start();
  ASSERT_FALSE(hold_.WaitHeld(30s).empty());
  const std::string id = Ids().at(0);
  TakeAsAnotherReplica(id);
  const auto taken_state = RowState(id);
  ASSERT_TRUE(WaitForLost(1));
  hold_.Release();  // the receiver answers 204 to a request the relay no longer owns
  ASSERT_TRUE(relay_->WaitIdle(60s).ok());

  EXPECT_EQ(receiver_.RequestCount(), 1u) << "a written request cannot be called back";
  EXPECT_EQ(RowState(id), taken_state) << "the fenced sent write changes nothing";
  EXPECT_EQ(Lost(), 1) << "counted once: by the renewal, not again by the outcome write";
  EXPECT_LE(Sample(R"(queuebox_outbox_messages_total{status="sent"})"), 0);
  EXPECT_EQ(relay_->Stop(), 0);
}

#ifdef QB_WITH_RABBITMQ
// The same with a rabbitmq destination on the shared RabbitMQ, reached through a loopback
// forwarder that can hold back the broker's replies. batchSize 1 and concurrency 2: two batches
// publish at once; while one awaits its confirm (held), the other waits for the channel.
class RelayLostClaimRabbitMqTest : public RelayLostClaimTest {
 protected:
  void SetUp() override {
    QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", amqp_url_);
    RelayLostClaimTest::SetUp();
    if (HasFatalFailure()) return;
    static std::atomic<int> n{0};
    exchange_ = "qb.lostclaim." + std::to_string(::getpid()) + "." + std::to_string(++n);
    amqp_ = std::make_unique<testing::AmqpQueues>(amqp_url_);
    amqp_->Bind(exchange_, exchange_);
    port_ = testing::UnusedLoopbackPort();
    forwarder_ = std::make_unique<testing::TcpForwarder>(port_, amqp_->port());
    ASSERT_TRUE(forwarder_->Start().ok());
  }
  void TearDown() override {
    if (forwarder_) forwarder_->HoldReplies(false);
    RelayLostClaimTest::TearDown();
    forwarder_.reset();
    if (amqp_) amqp_->Delete(exchange_, exchange_);
  }

  // A started rabbitmq destination through the forwarder; routing key: the row's key.
  std::unique_ptr<Destination> RabbitMq() {
    const size_t at = amqp_url_.rfind('@') + 1;
    const size_t vhost = amqp_url_.find('/', at);
    RabbitMqDestinationSettings s;
    s.name = "sink";
    s.url = amqp_url_.substr(0, at) + "127.0.0.1:" + std::to_string(port_) +
            (vhost == std::string::npos ? std::string() : amqp_url_.substr(vhost));
    s.exchange = exchange_;
    s.routing_key_template = "{{ key }}";
    s.confirm_timeout_ms = 60000;
    s.max_batches_awaiting_confirms = 1;  // the other batch waits while one awaits its confirm
    auto d = RabbitMqDestination::Create(std::move(s));
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (!d.ok()) return nullptr;
    Status started = (*d)->Start();
    EXPECT_TRUE(started.ok()) << started.ToString();
    EXPECT_TRUE((*d)->Health().ok()) << (*d)->Health().ToString();
    return std::move(d).value();
  }

  // Rows claimed for the destination and not yet published.
  double Depth() { return Sample(R"(queuebox_outbox_queue_depth{destination="sink"})"); }

  std::string amqp_url_, exchange_;
  int port_ = 0;
  std::unique_ptr<testing::AmqpQueues> amqp_;
  std::unique_ptr<testing::TcpForwarder> forwarder_;
};

TEST_P(RelayLostClaimRabbitMqTest, AMessageWaitingForTheChannelIsCancelledAndNeverPublished) {
  std::unique_ptr<Destination> d = RabbitMq();  // connected, exchange declared
  ASSERT_NE(d, nullptr);
  forwarder_->HoldReplies(true);  // no confirm comes back until released
  outbox_->InsertRows(2, [](int n) { return std::optional<std::string>("k" + std::to_string(n)); });
  StartRelay(std::move(d), /*batch_size=*/1, /*concurrency=*/2);
  // The batch that got the channel published its row and awaits the confirm.
  ASSERT_TRUE(testing::WaitUntil([&] { return amqp_->Messages(exchange_) == 1; }, 30s));
  std::optional<std::pair<std::string, std::string>> first = amqp_->Get(exchange_);
  ASSERT_TRUE(first.has_value());
  const std::string sent =
      outbox_->db().Scalar("SELECT id FROM outbox WHERE key = '" + first->first + "'");
  std::vector<std::string> ids = Ids();
  ASSERT_EQ(ids.size(), 2u);
  const std::string taken = ids[0] == sent ? ids[1] : ids[0];
  ASSERT_NE(taken, sent);
  // The other row is claimed too, and its batch waits for the channel.
  ASSERT_TRUE(testing::WaitUntil([&] { return Depth() == 2; }, 30s)) << Depth();
  TakeAsAnotherReplica(taken);
  const auto taken_state = RowState(taken);
  ASSERT_TRUE(WaitForLost(1)) << "the lease keeper's renewal misses the taken row";
  // Its batch stops waiting: only the publish whose confirm is held is left in flight.
  const bool stopped = testing::WaitUntil([&] { return Depth() == 1; }, 20s);  // confirm: 60 s
  forwarder_->HoldReplies(false);
  EXPECT_TRUE(stopped) << "the cancelled batch still waits for the channel";
  ASSERT_TRUE(relay_->WaitIdle(60s).ok());

  EXPECT_EQ(amqp_->Messages(exchange_), 0u) << "the taken row is never published";
  EXPECT_EQ(outbox_->Field(sent, "state"), "sent");
  EXPECT_EQ(RowState(taken), taken_state) << "the relay writes nothing to the taken row";
  EXPECT_EQ(outbox_->Field(taken, "claim_token"), kOtherToken);
  EXPECT_EQ(Lost(), 1);
  EXPECT_EQ(Sample(R"(queuebox_outbox_messages_total{status="sent"})"), 1);
  EXPECT_EQ(relay_->Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Dialects, RelayLostClaimRabbitMqTest,
                         ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });
#endif  // QB_WITH_RABBITMQ

INSTANTIATE_TEST_SUITE_P(Dialects, RelayLostClaimTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace queuebox
