// The inbox relay (src/core/inbox_relay.h) on SQLite and PostgreSQL, against the real stores, and
// on the in-memory twin (testing/memory_inbox_store.h), all but the lanes (PostgreSQL only):
// QueueBox's InboxRelayTest and InboxRelayClaimLostTest (reference §14.1, §14.3) and the
// scenarios that apply to it (scenarios.md: crash between claim and forward, lost claim, two
// relays on one database).
#include "core/inbox_relay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "inbox_test_support.h"
#include "store/postgres/postgres_inbox_store.h"
#include "testing/join_on_exit.h"
#include "testing/status_matchers.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using testing::InboxUnderTest;
using testing::SqlInboxUnderTest;
using Kind = InboxStoreOutcome::Kind;

class CountingObserver : public InboxRelayObserver {
 public:
  void OnInboxForwarded(int64_t n) override { forwarded += n; }
  void OnInboxRelayError() override { ++errors; }
  void OnInboxClaimsLost(int64_t n) override { claims_lost += n; }
  std::atomic<int64_t> forwarded{0}, errors{0}, claims_lost{0};
};

bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// The real store's claims with hooks where a relay crashes or loses its claim in the scenarios:
// `before_forward` runs just before each two-step forward; `in_forward_due` runs inside each
// one-transaction forward (ForwardDue), before the first row's plan, with the rows claimed and
// locked and nothing written. The relay takes the one-transaction path only with
// `one_transaction` (and a store that has it); otherwise the two-step path.
class HookedClaims : public InboxRelayClaims {
 public:
  explicit HookedClaims(InboxRelayClaims* real) : real_(real) {}
  std::function<void(std::span<const InboxForward>)> before_forward;
  std::function<void()> in_forward_due;
  bool one_transaction = false;
  bool lanes = false;  // with one_transaction: the store's lanes (ForwardDueInLane)

  bool HasForwardDue() const override { return one_transaction && real_->HasForwardDue(); }
  Result<InboxForwardDue> ForwardDue(int limit, const InboxForwardPlanner& plan) override {
    bool first = true;
    return real_->ForwardDue(limit, [&](const ClaimedInboxRow& row) {
      if (first && in_forward_due) in_forward_due();
      first = false;
      return plan(row);
    });
  }
  int ForwardLanes() const override { return lanes ? real_->ForwardLanes() : 1; }
  Result<InboxForwardDue> ForwardDueInLane(int lane, int limit,
                                           const InboxForwardPlanner& plan) override {
    bool first = true;
    return real_->ForwardDueInLane(lane, limit, [&](const ClaimedInboxRow& row) {
      if (first && in_forward_due) in_forward_due();
      first = false;
      return plan(row);
    });
  }

  Result<std::vector<ClaimedInboxRow>> ClaimPush(int limit, int64_t lease_ms) override {
    return real_->ClaimPush(limit, lease_ms);
  }
  Result<std::vector<std::string>> Forward(std::span<const InboxForward> forwards) override {
    if (before_forward) before_forward(forwards);
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
  InboxRelayClaims* real_;
};

class InboxRelayTest : public ::testing::TestWithParam<std::string> {
 protected:
  // A subject per parameter: "sqlite" and "postgresql" (a migrated store), "memory" (the twin).
  void SetUp() override {
    SqlInboxUnderTest* sql = nullptr;
    testing::CreateInboxUnderTest(GetParam(), subject_, &sql);
    if (subject_ == nullptr) return;
    if (sql != nullptr) db_ = &sql->db();
    inbox_ = &subject_->inbox();
  }

  InboxRelayOptions Options() const {
    InboxRelayOptions o;
    o.relay.batch_size = 50;
    o.relay.claim_timeout_ms = 60000;
    o.max_attempts = 7;
    o.topic_templates["stripe"] = "{{ source }}.{{ eventType }}";
    return o;
  }

  std::unique_ptr<InboxRelay> MakeRelay(InboxRelayClaims* claims,
                                        InboxRelayObserver* observer = nullptr) {
    auto relay = InboxRelay::Create(Options(), claims, inbox_, observer);
    EXPECT_TRUE(relay.ok()) << relay.status().ToString();
    return relay.ok() ? std::move(relay).value() : nullptr;
  }

  std::string Add(std::string key, std::optional<std::string> aggregate,
                  std::optional<std::string> event_type = "payment.succeeded",
                  std::string headers = "{}") {
    NewInboxMessage m;
    m.source = "stripe";
    m.idempotency_key = std::move(key);
    m.aggregate_id = std::move(aggregate);
    m.event_type = std::move(event_type);
    m.payload = R"({"key":")" + m.idempotency_key + R"("})";
    m.headers = std::move(headers);
    auto out = inbox_->Store(std::span<const NewInboxMessage>(&m, 1));
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok() || out->size() != 1 || (*out)[0].kind != Kind::kStored) return "";
    return (*out)[0].id;
  }

  // Runs cycles until one forwards nothing; returns the rows forwarded.
  int64_t Drain(InboxRelay& relay) {
    int64_t total = 0;
    for (int i = 0; i < 1000; ++i) {
      auto n = relay.RunCycle();
      EXPECT_TRUE(n.ok()) << n.status().ToString();
      if (!n.ok() || *n == 0) break;
      total += *n;
    }
    return total;
  }

  std::string Count(const std::string& sql) { return db_->Scalar(sql); }  // SQL subjects
  std::string Field(const std::string& id, const std::string& column) {
    return subject_->Field(id, column);
  }
  std::string Rows(const std::string& table, const std::string& column = "",
                   const std::string& value = "") {
    return subject_->Count(table, column, value);
  }
  // The lane of inbox row `id` (PostgreSQL).
  int LaneOfRow(const std::string& id) {
    return std::stoi(Count("SELECT " + store::PostgresInboxStore::LaneOf(db_->config()) +
                           " FROM inbox WHERE id = '" + id + "'"));
  }
  // True once another session of this database waits for an advisory lock (PostgreSQL): a racer
  // has reached the claim's lock, so the race happens.
  bool WaitForAnAdvisoryLockWaiter() {
    return WaitFor([&] {
      return Count(
                 "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                 "AND database = (SELECT oid FROM pg_database WHERE datname = "
                 "current_database())") != "0";
    });
  }
  void ExpireInboxLeases() { subject_->ExpireEveryLease(); }
  bool pg() const { return db_ != nullptr && db_->pg(); }

  std::unique_ptr<InboxUnderTest> subject_;
  testing::StoreDb* db_ = nullptr;  // the SQL subject's database; null for the twin
  InboxStore* inbox_ = nullptr;
};

TEST_P(InboxRelayTest, ForwardsEachPushRowWithItsTopicKeyHeadersAndMaxAttempts) {
  const std::string a1 = Add("evt_1", "cus_1", "payment.succeeded",
                             R"({"h":"v","X-SOURCE":"spoofed","x-inbox-id":"spoofed"})");
  const std::string a2 = Add("evt_2", "cus_1");
  const std::string u = Add("evt_3", std::nullopt);
  subject_->SetCorrelationId(a1, "corr-1");
  CountingObserver observer;
  auto relay = MakeRelay(inbox_, &observer);
  ASSERT_NE(relay, nullptr);

  EXPECT_EQ(Drain(*relay), 3);
  EXPECT_EQ(observer.forwarded.load(), 3);
  EXPECT_EQ(Rows("inbox", "state", "processed"), "3");
  auto rows = subject_->OutboxRows();
  ASSERT_EQ(rows.size(), 3u);
  std::map<std::string, nlohmann::json> by_inbox_id;
  std::vector<std::string> cus_1_order;
  int unkeyed = 0;
  for (const auto& r : rows) {
    EXPECT_EQ(r.topic, "stripe.payment.succeeded");
    EXPECT_EQ(r.max_attempts, "7");
    nlohmann::json h = nlohmann::json::parse(r.headers);
    by_inbox_id[h.value("x-inbox-id", "")] = h;
    if (r.key == "cus_1") cus_1_order.push_back(h.value("x-idempotency-key", ""));
    if (!r.key) ++unkeyed;
    EXPECT_EQ(nlohmann::json::parse(r.payload)["key"], h.value("x-idempotency-key", ""));
  }
  EXPECT_EQ(cus_1_order, (std::vector<std::string>{"evt_1", "evt_2"}));
  ASSERT_EQ(by_inbox_id.size(), 3u);
  const nlohmann::json& h1 = by_inbox_id[a1];
  EXPECT_EQ(h1["h"], "v");
  EXPECT_EQ(h1["x-source"], "stripe");
  EXPECT_FALSE(h1.contains("X-SOURCE"));
  EXPECT_EQ(h1["x-inbox-id"], a1);
  EXPECT_EQ(h1["X-Correlation-Id"], "corr-1");
  EXPECT_FALSE(by_inbox_id[a2].contains("X-Correlation-Id"));
  EXPECT_EQ(unkeyed, 1);
  EXPECT_TRUE(by_inbox_id.count(u));
}

TEST_P(InboxRelayTest, ABlankTopicMakesTheRowDeadWithARelayErrorAndWritesNothing) {
  InboxRelayOptions o = Options();
  o.topic_templates.clear();  // stripe renders the default "{{ eventType }}"
  CountingObserver observer;
  const std::string id = Add("evt_1", "cus_1", std::nullopt);
  auto relay = InboxRelay::Create(o, inbox_, inbox_, &observer);
  ASSERT_TRUE(relay.ok());
  auto n = (*relay)->RunCycle();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(Field(id, "state"), "dead");
  EXPECT_THAT(Field(id, "last_error"), HasSubstr("rendered empty"));
  EXPECT_EQ(observer.errors.load(), 1);
  EXPECT_EQ(Rows("outbox"), "0");
}

// S: the relay dies between its claim and its forward. The rows stay `processing` until their
// lease passes; the next relay reclaims them and forwards each once.
TEST_P(InboxRelayTest, ACrashBetweenClaimAndForwardIsReclaimedAndForwardedOnce) {
  Add("evt_1", "cus_1");
  Add("evt_2", "cus_2");
  Add("evt_3", "cus_1");
  auto crashed = inbox_->ClaimPush(50, 60000);  // the relay that died after claiming
  ASSERT_TRUE(crashed.ok());
  ASSERT_EQ(crashed->size(), 2u);

  auto relay = MakeRelay(inbox_);
  ASSERT_NE(relay, nullptr);
  auto n = relay->RunCycle();  // leases still live: nothing to take
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(Rows("outbox"), "0");

  ExpireInboxLeases();
  auto restarted = MakeRelay(inbox_);  // a new process reclaims on its first cycle
  ASSERT_NE(restarted, nullptr);
  EXPECT_EQ(Drain(*restarted), 3);
  EXPECT_EQ(Rows("outbox"), "3");
  EXPECT_EQ(Rows("inbox", "state", "processed"), "3");
  // The crashed relay's late forward is fenced out.
  std::vector<InboxForward> late;
  for (const auto& r : *crashed) late.push_back({{r.id, r.claim_token}, "late", "{}", 5});
  auto done = inbox_->Forward(late);
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->empty());
  EXPECT_EQ(Rows("outbox"), "3");
}

// InboxRelayClaimLostTest, on the two-step path: another owner takes the rows between the claim
// and the forward; the forward inserts nothing for them and counts claims_lost{component="inbox"}.
TEST_P(InboxRelayTest, ALostClaimInsertsNothingAndIsCounted) {
  Add("evt_1", "cus_1");
  Add("evt_2", "cus_2");
  HookedClaims hooked(inbox_);
  std::vector<ClaimedInboxRow> thief;
  hooked.before_forward = [&](std::span<const InboxForward> forwards) {
    if (!thief.empty()) return;
    ASSERT_EQ(forwards.size(), 2u);
    subject_->ExpireLease(forwards[0].fence.id);
    ASSERT_TRUE(inbox_->ReclaimExpired().ok());
    auto taken = inbox_->ClaimPush(50, 60000);
    ASSERT_TRUE(taken.ok());
    ASSERT_EQ(taken->size(), 1u);
    thief = *taken;
  };
  CountingObserver observer;
  auto relay = MakeRelay(&hooked, &observer);
  ASSERT_NE(relay, nullptr);
  auto n = relay->RunCycle();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(observer.claims_lost.load(), 1);
  ASSERT_EQ(thief.size(), 1u);
  EXPECT_EQ(Rows("outbox"), "1");
  EXPECT_EQ(Field(thief[0].id, "state"), "processing");
  for (const auto& row : subject_->OutboxRows()) {
    EXPECT_EQ(row.headers.find(thief[0].id), std::string::npos) << row.headers;
  }
  // The new owner forwards it: one outbox row per inbox row in the end.
  std::vector<InboxForward> f = {{{thief[0].id, thief[0].claim_token}, "stripe.x", "{}", 5}};
  auto done = inbox_->Forward(f);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->size(), 1u);
  EXPECT_EQ(Rows("outbox"), "2");
}

// The lost claim on the default (one-transaction) path: another claimer (a second relay or a
// QueueBox replica) runs while a ForwardDue holds its rows. It cannot take them, so there is no
// claim to lose: on PostgreSQL it waits for the claim's advisory lock, on SQLite for the write
// transaction, then sees them `processed` and takes only the next head of an aggregate.
TEST_P(InboxRelayTest, AClaimerRacingTheOneTransactionForwardTakesNoneOfItsRows) {
  const std::string a = Add("evt_1", "cus_1");
  const std::string b = Add("evt_2", "cus_2");
  const std::string c = Add("evt_3", "cus_1");
  auto other = subject_->OpenAnother();
  ASSERT_NE(other, nullptr);
  HookedClaims hooked(inbox_);
  hooked.one_transaction = true;
  std::thread racer;
  Result<std::vector<ClaimedInboxRow>> raced = Internal("the racing claim did not run");
  std::string a_when_raced;
  queuebox::testing::JoinOnExit join_racer(racer);  // after what the racer writes
  hooked.in_forward_due = [&] {
    if (racer.joinable()) return;
    racer = std::thread([&] {
      raced = other->ClaimPush(50, 60000);
      a_when_raced = Field(a, "state");
    });
    // The transaction goes on only once the racer waits for its lock: the race happens.
    if (pg()) {
      EXPECT_TRUE(WaitForAnAdvisoryLockWaiter());
    }
  };
  CountingObserver observer;
  auto relay = MakeRelay(&hooked, &observer);
  ASSERT_NE(relay, nullptr);
  auto n = relay->RunCycle();
  ASSERT_TRUE(racer.joinable());
  racer.join();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(observer.claims_lost.load(), 0);
  EXPECT_EQ(observer.errors.load(), 0);
  ASSERT_TRUE(raced.ok()) << raced.status().ToString();
  ASSERT_EQ(raced->size(), 1u) << "the racer takes only cus_1's next head";
  EXPECT_EQ((*raced)[0].id, c);
  EXPECT_EQ(a_when_raced, "processed") << "the racing claim ended only after the commit";
  EXPECT_EQ(Field(a, "state"), "processed");
  EXPECT_EQ(Field(b, "state"), "processed");
  EXPECT_EQ(Rows("outbox"), "2");
  // The racer forwards its row: one outbox row per inbox row, cus_1 in arrival order.
  std::vector<InboxForward> f = {{{c, (*raced)[0].claim_token}, "stripe.x", "{}", 5}};
  auto done = other->Forward(f);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_THAT(*done, ::testing::ElementsAre(c));
  std::vector<std::string> rows;  // headers of cus_1's outbox rows, in sequence order
  for (const auto& row : subject_->OutboxRows()) {
    if (row.key == "cus_1") rows.push_back(row.headers);
  }
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(rows[0]).value("x-inbox-id", ""), a);
  EXPECT_EQ(Rows("outbox"), "3");
}

// The store's one-transaction forward: each row goes from `pending` straight to `processed` (or
// `dead`) with its outbox row, in claim order, and is written once (no `processing` step, no
// lease).
TEST_P(InboxRelayTest, ForwardDueWritesEachRowOnceInClaimOrder) {
  ASSERT_TRUE(inbox_->HasForwardDue());
  const std::string a = Add("evt_1", "cus_1");
  const std::string b = Add("evt_2", "cus_2");
  const std::string c = Add("evt_3", "cus_1");  // behind evt_1: not in this claim
  const std::string d = Add("evt_4", "cus_3");
  std::vector<std::string> planned;
  auto due = inbox_->ForwardDue(50, [&](const ClaimedInboxRow& row) {
    planned.push_back(row.id);
    EXPECT_TRUE(row.claim_token.empty());
    InboxForwardPlan p;
    if (row.id == d) {
      p.dead_error = "The topic template of source 'stripe' rendered empty";
      return p;
    }
    p.forward = {{}, "t." + row.idempotency_key, R"({"x-inbox-id":")" + row.id + R"("})", 4};
    return p;
  });
  ASSERT_TRUE(due.ok()) << due.status().ToString();
  EXPECT_EQ(due->claimed, 3u);
  EXPECT_THAT(planned, ::testing::ElementsAre(a, b, d));
  EXPECT_THAT(due->forwarded, ::testing::UnorderedElementsAre(a, b));
  EXPECT_THAT(due->dead, ::testing::ElementsAre(d));
  EXPECT_EQ(Field(a, "state"), "processed");
  EXPECT_EQ(Field(c, "state"), "pending");
  EXPECT_EQ(Field(d, "last_error"), "The topic template of source 'stripe' rendered empty");
  for (const std::string& id : {a, b, c, d}) {  // every row: no claim, no lease
    EXPECT_EQ(Field(id, "claim_token"), "<null>") << id;
    EXPECT_EQ(Field(id, "lease_expires_at"), "<null>") << id;
    if (Field(id, "state") == "processed") {
      EXPECT_NE(Field(id, "processed_at"), "<null>") << id;
      EXPECT_NE(Field(id, "claimed_at"), "<null>") << id;
    }
  }
  auto rows = subject_->OutboxRows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].topic, "t.evt_1");
  EXPECT_EQ(rows[0].key.value_or("<null>"), "cus_1");
  EXPECT_EQ(rows[0].max_attempts, "4");
  EXPECT_EQ(rows[1].topic, "t.evt_2");
  // The next call takes evt_3, now the head of cus_1.
  auto next = inbox_->ForwardDue(50, [&](const ClaimedInboxRow& row) {
    InboxForwardPlan p;
    p.forward = {{}, "t." + row.idempotency_key, "{}", 4};
    return p;
  });
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_THAT(next->forwarded, ::testing::ElementsAre(c));
}

// A one-transaction forward the outbox refuses (here a trigger refuses one topic) writes nothing:
// every row of the batch stays `pending`. The relay then forwards the batch the two-step way,
// whose row-by-row retry delivers the others; the refused row waits for its lease.
TEST_P(InboxRelayTest, ARefusedForwardDueWritesNothingAndTheOtherRowsStillGo) {
  Add("evt_1", "cus_1", "ok");
  const std::string bad = Add("evt_2", "cus_2", "poison");
  Add("evt_3", "cus_3", "ok");
  subject_->RefuseOutboxTopic("stripe.poison");
  auto plan = [](const ClaimedInboxRow& row) {
    InboxForwardPlan p;
    p.forward = {{}, "stripe." + row.event_type.value_or(""), "{}", 5};
    return p;
  };
  auto due = inbox_->ForwardDue(50, plan);
  ASSERT_FALSE(due.ok());
  EXPECT_FALSE(IsTransient(due.status().code())) << due.status().ToString();
  EXPECT_EQ(Rows("inbox", "state", "pending"), "3");
  EXPECT_EQ(Rows("outbox"), "0");

  CountingObserver observer;
  auto relay = MakeRelay(inbox_, &observer);
  ASSERT_NE(relay, nullptr);
  auto n = relay->RunCycle();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 2);
  EXPECT_EQ(Rows("outbox"), "2");
  EXPECT_EQ(Field(bad, "state"), "processing");
  EXPECT_GE(observer.errors.load(), 2);  // the refused batch, then the refused row
}

// Two relays on one database: every row forwarded exactly once, and each aggregate's rows reach
// the outbox in their arrival order (the outbox key order carries it on to the destination).
TEST_P(InboxRelayTest, TwoRelaysForwardEachRowOnceAndKeepEachAggregatesOrder) {
  constexpr int kAggregates = 8, kPerAggregate = 15;
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
  ASSERT_TRUE(inbox_->Store(batch).ok());
  auto second_store = subject_->OpenAnother();
  ASSERT_NE(second_store, nullptr);
  InboxRelayOptions o = Options();
  o.relay.batch_size = 5;
  auto r1 = InboxRelay::Create(o, inbox_, inbox_);
  auto r2 = InboxRelay::Create(o, second_store.get(), second_store.get());
  ASSERT_TRUE(r1.ok() && r2.ok());
  std::atomic<int64_t> total{0};
  const int kRows = kAggregates * kPerAggregate;
  auto run = [&](InboxRelay* relay) {
    for (int i = 0; i < 5000 && total.load() < kRows; ++i) {
      auto n = relay->RunCycle();
      if (n.ok()) total += *n;  // an error (SQLite busy): the next cycle retries
    }
  };
  std::thread t1(run, r1->get());
  std::thread t2(run, r2->get());
  t1.join();
  t2.join();
  EXPECT_EQ(total.load(), kRows);
  EXPECT_EQ(Rows("outbox"), std::to_string(kRows));
  auto rows = subject_->OutboxRows();
  std::set<std::string> inbox_ids;
  std::map<std::string, int> last_n;
  for (const auto& r : rows) {
    inbox_ids.insert(nlohmann::json::parse(r.headers).value("x-inbox-id", ""));
    int n = nlohmann::json::parse(r.payload)["n"].get<int>();
    const std::string key = r.key.value_or("<null>");
    auto it = last_n.find(key);
    if (it != last_n.end()) {
      EXPECT_EQ(n, it->second + 1) << "aggregate " << key;
    }
    last_n[key] = n;
  }
  EXPECT_EQ(inbox_ids.size(), static_cast<size_t>(kRows));
}

// Lanes exist on PostgreSQL only (SQLite has one writer): these run there alone.
class InboxRelayLanesTest : public InboxRelayTest {};

// Lanes (PostgreSQL): a lane's forward takes only rows of its lane (an aggregate's and an
// unkeyed row's lane are fixed by their ids), a lane held by another transaction is skipped at
// once, and another lane forwards meanwhile, side by side.
TEST_P(InboxRelayLanesTest, ALaneForwardsOnlyItsRowsSkipsAHeldLaneAndRunsBesideAnother) {
  const int lanes = inbox_->ForwardLanes();
  ASSERT_EQ(lanes, 4);
  std::map<std::string, int> lane_of;  // inbox id -> lane
  std::vector<std::string> ids;
  for (int a = 0; a < 16; ++a)
    ids.push_back(Add("evt_k" + std::to_string(a), "cus_" + std::to_string(a)));
  for (int u = 0; u < 8; ++u) ids.push_back(Add("evt_u" + std::to_string(u), std::nullopt));
  std::set<int> used;
  for (const std::string& id : ids) used.insert(lane_of[id] = LaneOfRow(id));
  ASSERT_EQ(used.size(), 4u) << "the rows fill every lane";
  // An aggregate's rows share its lane; an unkeyed row's lane is its id's.
  const std::string again = Add("evt_k0_2", "cus_0");
  EXPECT_EQ(LaneOfRow(again), lane_of[ids[0]]);

  auto other = db_->Open();
  ASSERT_NE(other, nullptr);
  auto plan = [](const ClaimedInboxRow& row) {
    InboxForwardPlan p;
    p.forward = {{}, "t." + row.idempotency_key, "{}", 4};
    return p;
  };
  const int held = lane_of[ids[0]];
  const int beside = (held + 1) % lanes;
  Result<InboxForwardDue> busy = Internal("not run"), side = Internal("not run");
  std::vector<std::string> planned;
  auto due = inbox_->ForwardDueInLane(held, 50, [&](const ClaimedInboxRow& row) {
    if (planned.empty()) {  // inside the held lane's transaction
      busy = other->inbox()->ForwardDueInLane(held, 50, plan);
      side = other->inbox()->ForwardDueInLane(beside, 50, plan);
    }
    planned.push_back(row.id);
    return plan(row);
  });
  ASSERT_TRUE(due.ok()) << due.status().ToString();
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  EXPECT_TRUE(busy->lane_busy);
  EXPECT_EQ(busy->claimed, 0u);
  ASSERT_TRUE(side.ok()) << side.status().ToString();
  EXPECT_FALSE(side->lane_busy);
  EXPECT_GT(side->forwarded.size(), 0u);
  for (const std::string& id : side->forwarded) EXPECT_EQ(lane_of[id], beside) << id;
  EXPECT_FALSE(due->lane_busy);
  EXPECT_GT(due->forwarded.size(), 0u);
  for (const std::string& id : due->forwarded) EXPECT_EQ(lane_of[id], held) << id;
  EXPECT_EQ(std::count(due->forwarded.begin(), due->forwarded.end(), again), 0)
      << "cus_0's second row waits behind its first";
  // Every lane once more, twice: every row forwarded once, cus_0 in order.
  for (int round = 0; round < 2; ++round) {
    for (int lane = 0; lane < lanes; ++lane) {
      auto r = inbox_->ForwardDueInLane(lane, 50, plan);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      for (const std::string& id : r->forwarded) EXPECT_EQ(LaneOfRow(id), lane) << id;
    }
  }
  EXPECT_EQ(Count("SELECT COUNT(*) FROM inbox WHERE state <> 'processed'"), "0");
  EXPECT_EQ(Rows("outbox"), std::to_string(ids.size() + 1));
  EXPECT_EQ(Count("SELECT COUNT(DISTINCT headers) FROM outbox"), "1");  // all "{}"
  EXPECT_EQ(Count("SELECT COUNT(DISTINCT topic) FROM outbox"), std::to_string(ids.size() + 1));
  auto cus_0 = db_->Query("SELECT topic FROM outbox WHERE key = 'cus_0' ORDER BY sequence");
  ASSERT_EQ(cus_0.size(), 2u);
  EXPECT_EQ(cus_0[0][0], "t.evt_k0");
  EXPECT_EQ(cus_0[1][0], "t.evt_k0_2");
  auto out_of_range = inbox_->ForwardDueInLane(lanes, 50, plan);
  EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument);
}

// DueLanes: the lanes of the first due rows, exactly while there are fewer than the probe, every
// lane (probe_full) at the probe or more; none when nothing is due. The relay probes one batch:
// fewer due rows go in one ForwardDue, more in the lanes.
TEST_P(InboxRelayLanesTest, DueLanesNamesTheLanesOfTheFirstDueRows) {
  auto none = inbox_->DueLanes(4);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->lanes.empty());
  EXPECT_FALSE(none->probe_full);
  const std::string a = Add("evt_1", "cus_1");
  auto one = inbox_->DueLanes(4);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_THAT(one->lanes, ::testing::ElementsAre(LaneOfRow(a)));
  EXPECT_FALSE(one->probe_full);
  std::set<int> lanes = {LaneOfRow(a)};
  for (int i = 2; lanes.size() < 2; ++i) {
    lanes.insert(LaneOfRow(Add("evt_" + std::to_string(i), "cus_" + std::to_string(i))));
  }
  const int rows = std::stoi(Count("SELECT COUNT(*) FROM inbox"));
  auto exact = inbox_->DueLanes(rows + 1);
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(std::set<int>(exact->lanes.begin(), exact->lanes.end()), lanes);
  EXPECT_FALSE(exact->probe_full);
  auto all = inbox_->DueLanes(rows);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_THAT(all->lanes, ::testing::ElementsAre(0, 1, 2, 3));
  EXPECT_TRUE(all->probe_full);
  db_->Exec("UPDATE inbox SET scheduled_at = " + db_->NowPlus(3600));
  auto later = inbox_->DueLanes(4);
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  EXPECT_TRUE(later->lanes.empty()) << "rows not yet due are in no lane's claim";
}

// The two-step claim (ClaimPush, the path of a refused batch and of claimers without lanes)
// racing a lane's forward: it waits for the lane's transaction (the table's key exclusive against
// the lane's shared) and then sees its rows `processed`, so it takes only the next head of their
// aggregate, never a second row of one in flight.
TEST_P(InboxRelayLanesTest, AClaimPushRacingALaneForwardWaitsAndTakesNoneOfItsRows) {
  const std::string a = Add("evt_1", "cus_1");
  const std::string c = Add("evt_2", "cus_1");
  auto other = db_->Open();
  ASSERT_NE(other, nullptr);
  HookedClaims hooked(inbox_);
  hooked.one_transaction = true;
  hooked.lanes = true;
  std::thread racer;
  Result<std::vector<ClaimedInboxRow>> raced = Internal("the racing claim did not run");
  std::string a_when_raced;
  queuebox::testing::JoinOnExit join_racer(racer);  // after what the racer writes
  hooked.in_forward_due = [&] {
    if (racer.joinable()) return;
    racer = std::thread([&] {
      raced = other->inbox()->ClaimPush(50, 60000);
      a_when_raced = Field(a, "state");
    });
    EXPECT_TRUE(WaitForAnAdvisoryLockWaiter());
  };
  CountingObserver observer;
  InboxRelayOptions o = Options();
  o.relay.batch_size = 1;  // the two due rows fill the probe of one batch: the relay uses lanes
  auto created = InboxRelay::Create(o, &hooked, inbox_, &observer);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto relay = std::move(created).value();
  auto n = relay->RunCycle();
  ASSERT_TRUE(racer.joinable());
  racer.join();
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 1);
  ASSERT_TRUE(raced.ok()) << raced.status().ToString();
  ASSERT_EQ(raced->size(), 1u) << "the racer takes only cus_1's next head";
  EXPECT_EQ((*raced)[0].id, c);
  EXPECT_EQ(a_when_raced, "processed") << "the racing claim ended only after the commit";
  EXPECT_EQ(observer.claims_lost.load(), 0);
  // A lane forward meanwhile finds cus_1 busy (its row is `processing`): nothing to take.
  auto plan = [](const ClaimedInboxRow& row) {
    InboxForwardPlan p;
    p.forward = {{}, "t." + row.idempotency_key, "{}", 4};
    return p;
  };
  auto lane = inbox_->ForwardDueInLane(LaneOfRow(c), 50, plan);
  ASSERT_TRUE(lane.ok()) << lane.status().ToString();
  EXPECT_EQ(lane->claimed, 0u);
  EXPECT_EQ(Rows("outbox"), "1");
}

// Lanes under load: two replicas, each with 4 workers, on many aggregates and unkeyed rows:
// every row forwarded exactly once and each aggregate's rows in the outbox in arrival order.
TEST_P(InboxRelayTest, LanedWorkersOfTwoReplicasForwardEachRowOnceInEachAggregatesOrder) {
  constexpr int kAggregates = 48, kPerAggregate = 12, kUnkeyed = 40;
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
    for (int u = i; u < kUnkeyed; u += kPerAggregate) {
      NewInboxMessage m;
      m.source = "stripe";
      m.idempotency_key = "evt_u_" + std::to_string(u);
      m.event_type = "payment.succeeded";
      m.payload = R"({"n":0})";
      batch.push_back(std::move(m));
    }
  }
  ASSERT_TRUE(inbox_->Store(batch).ok());
  const int kRows = kAggregates * kPerAggregate + kUnkeyed;
  auto second_store = subject_->OpenAnother();
  ASSERT_NE(second_store, nullptr);
  InboxRelayOptions o = Options();
  o.relay.batch_size = 7;
  o.relay.workers = 4;
  o.relay.poll_interval_ms = 5;
  CountingObserver o1, o2;
  auto r1 = InboxRelay::Create(o, inbox_, inbox_, &o1);
  auto r2 = InboxRelay::Create(o, second_store.get(), second_store.get(), &o2);
  ASSERT_TRUE(r1.ok() && r2.ok());
  ASSERT_TRUE((*r1)->Start().ok());
  ASSERT_TRUE((*r2)->Start().ok());
  EXPECT_TRUE(WaitFor([&] { return o1.forwarded.load() + o2.forwarded.load() >= kRows; }));
  ASSERT_TRUE((*r1)->WaitIdle(std::chrono::seconds(30)).ok());
  (*r1)->Stop();
  (*r2)->Stop();
  EXPECT_EQ(o1.forwarded.load() + o2.forwarded.load(), kRows);
  EXPECT_EQ(o1.claims_lost.load() + o2.claims_lost.load(), 0);
  EXPECT_EQ(Rows("inbox", "state", "processed"), Rows("inbox")) << "every row processed";
  EXPECT_EQ(Rows("outbox"), std::to_string(kRows));
  auto rows = subject_->OutboxRows();
  std::set<std::string> inbox_ids;
  std::map<std::string, int> last_n;
  for (const auto& r : rows) {
    inbox_ids.insert(nlohmann::json::parse(r.headers).value("x-inbox-id", ""));
    if (!r.key) continue;  // unkeyed: no order
    int n = nlohmann::json::parse(r.payload)["n"].get<int>();
    auto it = last_n.find(*r.key);
    EXPECT_EQ(n, it == last_n.end() ? 0 : it->second + 1) << "aggregate " << *r.key;
    last_n[*r.key] = n;
  }
  EXPECT_EQ(inbox_ids.size(), static_cast<size_t>(kRows));
  EXPECT_EQ(last_n.size(), static_cast<size_t>(kAggregates));
  if (pg()) {
    EXPECT_EQ(Count("SELECT COUNT(DISTINCT " + store::PostgresInboxStore::LaneOf(db_->config()) +
                    ") FROM inbox"),
              "4");
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, InboxRelayTest,
                         ::testing::Values("sqlite", "postgresql", "memory"),
                         [](const auto& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(PostgreSQL, InboxRelayLanesTest, ::testing::Values("postgresql"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace queuebox
