// The inbox relay through a PostgreSQL outage (scenarios.md S6, for the inbox), on both of its
// paths: the default one-transaction forward (ForwardDue: the server stops while the transaction
// holds the claimed rows, before it writes them) and the two-step one (the server stops while the
// relay holds leased claims and is about to forward). The forward fails, is retried with capped
// backoff, and once the server is back every inbox row is forwarded exactly once, nothing half
// written, each aggregate in its arrival order. A private server (testing/pg_server.h), so the
// shared one is never stopped; the restart follows the relay's first failed cycle, not a timer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/inbox_relay.h"
#include "store/open_store.h"
#include "store/postgres/pg_connection.h"
#include "testing/pg_server.h"

namespace queuebox {
namespace {

using namespace std::chrono_literals;

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout = 60s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return done();
}

class CountingObserver : public InboxRelayObserver {
 public:
  void OnInboxForwarded(int64_t n) override { forwarded += n; }
  void OnInboxRelayError() override { ++errors; }
  std::atomic<int64_t> forwarded{0}, errors{0};
};

// The real claims; the first forward stops the server first (the outage hits mid-forward). With
// `one_transaction` the relay takes the store's ForwardDue path and the server stops inside its
// transaction, at the first row's plan (rows claimed and locked, nothing written yet); without it
// the relay takes the two-step path (ClaimPush, then Forward).
class OutageClaims : public InboxRelayClaims {
 public:
  OutageClaims(InboxRelayClaims* real, testing::PrivatePostgres* pg, bool one_transaction)
      : real_(real), pg_(pg), one_transaction_(one_transaction) {}
  std::atomic<bool> stopped{false};
  std::atomic<int> forward_due_calls{0}, forward_calls{0};

  bool HasForwardDue() const override { return one_transaction_ && real_->HasForwardDue(); }
  Result<InboxForwardDue> ForwardDue(int limit, const InboxForwardPlanner& plan) override {
    ++forward_due_calls;
    return real_->ForwardDue(limit, [&](const ClaimedInboxRow& row) {
      StopOnce();
      return plan(row);
    });
  }
  Result<std::vector<ClaimedInboxRow>> ClaimPush(int limit, int64_t lease_ms) override {
    return real_->ClaimPush(limit, lease_ms);
  }
  Result<std::vector<std::string>> Forward(std::span<const InboxForward> forwards) override {
    ++forward_calls;
    StopOnce();
    return real_->Forward(forwards);
  }
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) override {
    return real_->MarkDead(orders);
  }
  Result<std::vector<std::string>> Renew(std::span<const Fence> fences, int64_t lease_ms) override {
    return real_->Renew(fences, lease_ms);
  }
  Result<int64_t> ReclaimExpired() override { return real_->ReclaimExpired(); }

 private:
  void StopOnce() {
    if (!stopped.exchange(true)) {
      EXPECT_TRUE(pg_->Stop().ok());
    }
  }

  InboxRelayClaims* real_;
  testing::PrivatePostgres* pg_;
  const bool one_transaction_;
};

// The parameter: "forward_due" (the default path) or "two_step".
class InboxRelayOutageTest : public ::testing::TestWithParam<std::string> {};

TEST_P(InboxRelayOutageTest, AnOutageMidForwardForwardsEveryRowOnceInAggregateOrder) {
  const bool one_transaction = GetParam() == "forward_due";
  testing::PrivatePostgres pg;
  Status init = pg.Init();
  ASSERT_TRUE(init.ok()) << init.ToString();
  DatabaseConfig config;
  config.type = "postgresql";
  config.url = pg.url();
  config.pool_size = 4;
  config.connection_timeout_ms = 2000;
  auto store = OpenStore(config);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Migrate(std::nullopt).ok());
  InboxStore* inbox = (*store)->inbox();
  ASSERT_NE(inbox, nullptr);

  constexpr int kAggregates = 4, kPerAggregate = 10, kRows = kAggregates * kPerAggregate;
  std::vector<NewInboxMessage> batch;
  for (int i = 0; i < kPerAggregate; ++i) {
    for (int a = 0; a < kAggregates; ++a) {
      NewInboxMessage m;
      m.source = "stripe";
      m.idempotency_key = "evt_" + std::to_string(a) + "_" + std::to_string(i);
      m.aggregate_id = "cus_" + std::to_string(a);
      m.event_type = "payment.succeeded";
      m.payload = R"({"n":)" + std::to_string(i) + "}";
      batch.push_back(std::move(m));
    }
  }
  ASSERT_TRUE(inbox->Store(batch).ok());

  ASSERT_TRUE(inbox->HasForwardDue());
  OutageClaims claims(inbox, &pg, one_transaction);
  CountingObserver observer;
  InboxRelayOptions options;
  options.relay.batch_size = 10;
  options.relay.poll_interval_ms = 50;
  options.relay.claim_timeout_ms = 120000;  // the claims outlive the outage
  options.topic_templates["stripe"] = "{{ source }}.{{ eventType }}";
  auto relay = InboxRelay::Create(options, &claims, inbox, &observer);
  ASSERT_TRUE(relay.ok()) << relay.status().ToString();
  ASSERT_TRUE((*relay)->Start().ok());

  // Down until the relay has seen the outage; then back.
  ASSERT_TRUE(WaitUntil([&] { return claims.stopped.load(); }));
  ASSERT_TRUE(WaitUntil([&] { return observer.errors.load() > 0; }))
      << "a forward against a stopped server fails and is counted";
  EXPECT_EQ(observer.forwarded.load(), 0);
  ASSERT_TRUE(pg.Start().ok());
  EXPECT_TRUE(WaitUntil([&] { return observer.forwarded.load() == kRows; }))
      << observer.forwarded.load() << " of " << kRows << " forwarded";
  (*relay)->Stop();
  if (one_transaction) {
    // The outage is transient: the relay retried the one-transaction path, never the fallback.
    EXPECT_GT(claims.forward_due_calls.load(), 1);
    EXPECT_EQ(claims.forward_calls.load(), 0);
  } else {
    EXPECT_EQ(claims.forward_due_calls.load(), 0);
    EXPECT_GT(claims.forward_calls.load(), 1);
  }

  store::PgSettings settings;
  settings.url = pg.url();
  auto conn = store::PgConnection::Connect(settings);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto states = (*conn)->Query("SELECT state, COUNT(*) FROM inbox GROUP BY state", {});
  ASSERT_TRUE(states.ok());
  ASSERT_EQ(states->size(), 1u);
  EXPECT_EQ((*states)[0][0].value_or(""), "processed");
  EXPECT_EQ((*states)[0][1].value_or(""), std::to_string(kRows));
  auto rows = (*conn)->Query("SELECT key, headers, payload FROM outbox ORDER BY sequence", {});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), static_cast<size_t>(kRows)) << "one outbox row per inbox row";
  std::set<std::string> inbox_ids;
  std::map<std::string, int> last_n;
  for (const auto& r : *rows) {
    inbox_ids.insert(nlohmann::json::parse(*r[1])["x-inbox-id"].get<std::string>());
    const int n = nlohmann::json::parse(*r[2])["n"].get<int>();
    auto [it, first] = last_n.emplace(*r[0], n);
    if (!first) {
      EXPECT_EQ(n, it->second + 1) << "aggregate " << *r[0] << " out of order";
      it->second = n;
    }
  }
  EXPECT_EQ(inbox_ids.size(), static_cast<size_t>(kRows)) << "no inbox row forwarded twice";
}

INSTANTIATE_TEST_SUITE_P(Paths, InboxRelayOutageTest, ::testing::Values("forward_due", "two_step"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace queuebox
