// The store contracts (include/queuebox/store.h), one suite per interface:
// - OutboxClaimsContractTest: the relay's side (OutboxClaims) of SQLite, PostgreSQL and the
//   in-memory twin (testing/fake_store.h). Mirrors QueueBox's OutboxKeyOrderTest,
//   ClaimFenceTest and ReclaimStaleTest (reference §14.3).
// - OutboxStoreContractTest and ReplayTest: operations (OutboxOperations), inserts and schema of
//   SQLite and PostgreSQL. Mirrors RetentionSemanticsTest (§14.3) plus replay (§5.4), stats and
//   insert defaults.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "store_test_support.h"
#include "testing/status_matchers.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using testing::StatusIs;
using testing::StoreDb;
using ::testing::UnorderedElementsAre;

constexpr int64_t kLease = 60000;

// A subject per parameter: "sqlite" and "postgresql" (a migrated store), "memory" (FakeStore).
class StoreContractFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      outbox_ = std::make_unique<testing::MemoryOutboxUnderTest>();
      return;
    }
    std::string pg_url;
    if (GetParam() == "postgresql") QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
    auto sql = std::make_unique<testing::SqlOutboxUnderTest>(GetParam());
    sql_ = sql.get();
    outbox_ = std::move(sql);
    sql_->Create(pg_url);
  }

  OutboxClaims& claims() { return outbox_->claims(); }

  std::string Add(std::optional<std::string> key, std::string topic = "orders.created") {
    NewOutboxRow row;
    row.topic = std::move(topic);
    row.key = std::move(key);
    row.payload = R"({"n":1})";
    auto id = outbox_->Insert(row);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : "";
  }

  std::vector<OutboxRow> Claim(int limit = 100, int64_t lease = kLease) {
    auto rows = claims().Claim(limit, lease);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? *rows : std::vector<OutboxRow>{};
  }

  static std::vector<std::string> Ids(const std::vector<OutboxRow>& rows) {
    std::vector<std::string> ids;
    for (const auto& r : rows) ids.push_back(r.id);
    return ids;
  }

  std::vector<std::string> Sent(const OutboxRow& row) {
    Fence f{row.id, row.claim_token};
    auto ids = claims().MarkSent(std::span<const Fence>(&f, 1));
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? *ids : std::vector<std::string>{};
  }
  std::vector<std::string> Retry(const OutboxRow& row, int64_t delay_ms,
                                 std::string error = "HTTP 503") {
    RetryOrder o{{row.id, row.claim_token}, delay_ms, std::move(error)};
    auto ids = claims().ScheduleRetry(std::span<const RetryOrder>(&o, 1));
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? *ids : std::vector<std::string>{};
  }
  std::vector<std::string> Release(const OutboxRow& row, int64_t delay_ms,
                                   std::string error = "Connection refused") {
    ReleaseOrder o{{row.id, row.claim_token}, delay_ms, std::move(error)};
    auto ids = claims().Release(std::span<const ReleaseOrder>(&o, 1));
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? *ids : std::vector<std::string>{};
  }
  std::vector<std::string> Dead(const OutboxRow& row, std::string error = "HTTP 400") {
    DeadOrder o{{row.id, row.claim_token}, std::move(error)};
    auto ids = claims().MarkDead(std::span<const DeadOrder>(&o, 1));
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? *ids : std::vector<std::string>{};
  }

  std::unique_ptr<testing::OutboxUnderTest> outbox_;
  testing::SqlOutboxUnderTest* sql_ = nullptr;  // the SQL subject; nullptr for "memory"
};

// The relay's side, every store and the in-memory twin.
class OutboxClaimsContractTest : public StoreContractFixture {};

// Operations, inserts and schema: the SQL stores, with raw SQL access to their database.
class OutboxStoreContractTest : public StoreContractFixture {
 protected:
  void SetUp() override {
    StoreContractFixture::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    ASSERT_NE(sql_, nullptr) << "OutboxStoreContractTest runs on the SQL stores only";
    db_ = &sql_->db();
    store_ = &sql_->store();
  }

  StoreDb* db_ = nullptr;
  OutboxStore* store_ = nullptr;
};

// --- per-key ordering (OutboxKeyOrderTest) ---

TEST_P(OutboxClaimsContractTest, ClaimTakesOnlyTheHeadRowOfEachKey) {
  std::string k1a = Add("k1"), k1b = Add("k1"), k2 = Add("k2"), n1 = Add(std::nullopt),
              n2 = Add(std::nullopt);
  auto rows = Claim();
  EXPECT_THAT(Ids(rows), ElementsAre(k1a, k2, n1, n2));
  for (const auto& r : rows) {
    EXPECT_EQ(outbox_->Field(r.id, "state"), "processing");
    EXPECT_FALSE(r.claim_token.empty());
  }
  EXPECT_EQ(outbox_->Field(k1b, "state"), "pending");
}

TEST_P(OutboxClaimsContractTest, SequenceDecidesTheHeadNotCreatedAt) {
  std::string first = Add("k1"), second = Add("k1");
  // The first row looks younger by created_at; its lower sequence still makes it the head.
  outbox_->SetCreatedAt(first, 60);
  outbox_->SetCreatedAt(second, -60);
  EXPECT_THAT(Ids(Claim()), ElementsAre(first));
}

TEST_P(OutboxClaimsContractTest, ARowInFlightHoldsBackItsKeyUntilItIsSent) {
  std::string a = Add("k1"), b = Add("k1");
  auto first = Claim();
  ASSERT_THAT(Ids(first), ElementsAre(a));
  EXPECT_THAT(Claim(), IsEmpty());
  EXPECT_THAT(Sent(first[0]), ElementsAre(a));
  EXPECT_THAT(Ids(Claim()), ElementsAre(b));
}

TEST_P(OutboxClaimsContractTest, ARowInRetryBackoffHoldsBackItsKey) {
  std::string a = Add("k1");
  Add("k1");
  auto first = Claim();
  ASSERT_THAT(Ids(first), ElementsAre(a));
  EXPECT_THAT(Retry(first[0], 3600000), ElementsAre(a));
  EXPECT_THAT(Claim(), IsEmpty());
}

TEST_P(OutboxClaimsContractTest, ADeadRowReleasesItsKey) {
  std::string a = Add("k1"), b = Add("k1");
  auto first = Claim();
  ASSERT_THAT(Ids(first), ElementsAre(a));
  EXPECT_THAT(Dead(first[0]), ElementsAre(a));
  EXPECT_THAT(Ids(Claim()), ElementsAre(b));
}

TEST_P(OutboxClaimsContractTest, RowsWithAnEmptyKeyAreClaimedTogether) {
  std::string a = Add(""), b = Add(""), c = Add("");
  EXPECT_THAT(Ids(Claim()), ElementsAre(a, b, c));
}

TEST_P(OutboxClaimsContractTest, RowsNotYetDueAreNotClaimed) {
  NewOutboxRow later;
  later.topic = "t";
  later.payload = "{}";
  later.delay_ms = 3600000;
  auto delayed = outbox_->Insert(later);
  ASSERT_TRUE(delayed.ok()) << delayed.status().ToString();
  std::string due = Add(std::nullopt);
  EXPECT_THAT(Ids(Claim()), ElementsAre(due));
  EXPECT_EQ(outbox_->Field(*delayed, "state"), "pending");
}

TEST_P(OutboxClaimsContractTest, TheLimitCapsTheBatchInScheduleOrder) {
  std::string a = Add(std::nullopt), b = Add(std::nullopt);
  Add(std::nullopt);
  EXPECT_THAT(Ids(Claim(2)), ElementsAre(a, b));
}

// Four claimers, each with its own store, claim `limit` rows at a time and mark them sent until
// `total` rows are delivered. Checks that every row is delivered once, that no key ever has two
// rows in flight (a key leaves the in-flight set before its row is marked sent, so the next row
// of the key can only be claimed after that) and returns the sequences delivered per key in
// delivery order (unkeyed rows under "").
std::map<std::string, std::vector<int64_t>> DrainConcurrently(testing::OutboxUnderTest& outbox,
                                                              int total, int limit) {
  std::mutex mu;
  std::map<std::string, std::vector<int64_t>> by_key;
  std::map<std::string, int> deliveries;
  std::set<std::string> in_flight;
  std::atomic<int> delivered{0};
  std::atomic<bool> failed{false};
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::shared_ptr<OutboxClaims> own = outbox.OpenAnother();  // one store per claimer
      if (!own) {
        failed = true;
        return;
      }
      while (delivered.load() < total && std::chrono::steady_clock::now() < deadline) {
        auto rows = own->Claim(limit, kLease);
        if (!rows.ok()) {
          failed = true;
          return;
        }
        std::vector<Fence> fences;
        {
          std::lock_guard<std::mutex> lock(mu);
          for (const auto& r : *rows) {
            std::string key = r.key.value_or("");
            if (!key.empty() && !in_flight.insert(key).second) {
              ADD_FAILURE() << "two rows of key " << key << " in flight";
              failed = true;
            }
            by_key[key].push_back(r.sequence);
            ++deliveries[r.id];
            fences.push_back({r.id, r.claim_token});
          }
          for (const auto& r : *rows) in_flight.erase(r.key.value_or(""));
        }
        auto sent = own->MarkSent(fences);
        if (!sent.ok() || sent->size() != fences.size()) {
          failed = true;
          return;
        }
        delivered += static_cast<int>(fences.size());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(failed.load());
  EXPECT_EQ(delivered.load(), total);
  EXPECT_EQ(deliveries.size(), static_cast<size_t>(total));
  for (const auto& [id, n] : deliveries) EXPECT_EQ(n, 1) << id;
  return by_key;
}

TEST_P(OutboxClaimsContractTest, ConcurrentClaimersDeliverEveryRowOnceAndEachKeyInInsertOrder) {
  constexpr int kKeys = 10, kPerKey = 200, kTotal = kKeys * kPerKey;
  outbox_->InsertRows(kTotal, [](int n) { return "k" + std::to_string(n % 10); });
  auto by_key = DrainConcurrently(*outbox_, kTotal, 20);
  ASSERT_EQ(by_key.size(), static_cast<size_t>(kKeys));
  for (const auto& [key, seqs] : by_key) {
    EXPECT_EQ(seqs.size(), static_cast<size_t>(kPerKey)) << key;
    EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end())) << key << " out of insert order";
  }
}

// --- skewed backlog: one key with a long run of rows ahead of the others ---

TEST_P(OutboxClaimsContractTest, AHotKeyAheadDoesNotHoldBackTheHeadsOfOtherKeys) {
  // 100 rows of "hot" first: the first rows in claim order are all blocked behind hot's head.
  outbox_->InsertRows(100, [](int) { return "hot"; });
  std::string a1 = Add("a"), a2 = Add("a"), b1 = Add("b"), n1 = Add(std::nullopt), e1 = Add(""),
              c1 = Add("c");
  auto rows = Claim(10);
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].key, "hot");
  EXPECT_EQ(outbox_->Field(rows[0].id, "sequence"), outbox_->MinSequence());
  std::vector<std::string> ids = Ids(rows);
  EXPECT_THAT(std::vector<std::string>(ids.begin() + 1, ids.end()),
              ElementsAre(a1, b1, n1, e1, c1));
  EXPECT_EQ(outbox_->Field(a2, "state"), "pending");
  EXPECT_THAT(Claim(10), IsEmpty());  // every head is in flight
  // With hot's head still in flight, a's second row is claimed once a's first is sent.
  ASSERT_EQ(Sent(rows[1]).size(), 1u);
  EXPECT_THAT(Ids(Claim(10)), ElementsAre(a2));
  ASSERT_EQ(Sent(rows[0]).size(), 1u);
  auto next = Claim(10);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].key, "hot");
  EXPECT_EQ(next[0].sequence, rows[0].sequence + 1);
}

TEST_P(OutboxClaimsContractTest, BehindAHotKeyTheLimitKeepsScheduleOrderAndOnlyDueHeads) {
  outbox_->InsertRows(60, [](int) { return "hot"; });
  NewOutboxRow later;
  later.topic = "t";
  later.key = "late";
  later.payload = "{}";
  later.delay_ms = 3600000;
  ASSERT_TRUE(outbox_->Insert(later).ok());
  std::string late2 = Add("late");  // due, but behind late's first row, which is not due
  std::string a = Add("a"), n1 = Add(std::nullopt), b = Add("b"), n2 = Add(std::nullopt);
  auto rows = Claim(3);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].key, "hot");
  EXPECT_EQ(rows[1].id, a);
  EXPECT_EQ(rows[2].id, n1);
  EXPECT_THAT(Ids(Claim(5)), ElementsAre(b, n2));
  EXPECT_EQ(outbox_->Field(late2, "state"), "pending");
}

TEST_P(OutboxClaimsContractTest, ConcurrentClaimersBehindAHotKeyDeliverEveryRowOnceInKeyOrder) {
  // 400 rows of one key ahead of 20 keys x 20 rows and 40 unkeyed rows.
  outbox_->InsertRows(400, [](int) { return "hot"; });
  outbox_->InsertRows(440, [](int n) -> std::optional<std::string> {
    if (n % 11 == 10) return std::nullopt;
    return "k" + std::to_string(n % 20);
  });
  auto by_key = DrainConcurrently(*outbox_, 840, 20);
  EXPECT_EQ(by_key["hot"].size(), 400u);
  EXPECT_EQ(by_key[""].size(), 40u);
  for (const auto& [key, seqs] : by_key) {
    if (!key.empty()) {
      EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end())) << key << " out of insert order";
    }
  }
}

// --- claim fence (ClaimFenceTest) ---

TEST_P(OutboxClaimsContractTest, AStaleOwnerCannotCompleteARowReclaimedAndClaimedAgain) {
  std::string id = Add("k1");
  auto stale = Claim();
  ASSERT_EQ(stale.size(), 1u);
  outbox_->ExpireLease(id);
  auto moved = claims().ReclaimExpired();
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(*moved, 1);
  auto fresh = Claim();
  ASSERT_THAT(Ids(fresh), ElementsAre(id));
  ASSERT_NE(fresh[0].claim_token, stale[0].claim_token);

  EXPECT_THAT(Sent(stale[0]), IsEmpty());
  EXPECT_THAT(Retry(stale[0], 0), IsEmpty());
  EXPECT_THAT(Dead(stale[0]), IsEmpty());
  EXPECT_EQ(outbox_->Field(id, "state"), "processing");
  EXPECT_EQ(outbox_->Field(id, "attempt"), "0");
  EXPECT_EQ(outbox_->Field(id, "claim_token"), fresh[0].claim_token);

  EXPECT_THAT(Sent(fresh[0]), ElementsAre(id));  // the owner still wins
  EXPECT_EQ(outbox_->Field(id, "state"), "sent");
}

TEST_P(OutboxClaimsContractTest, AStaleOwnerCannotMarkSentWhileTheRowWaitsInPending) {
  std::string id = Add(std::nullopt);
  auto stale = Claim();
  outbox_->ExpireLease(id);
  ASSERT_TRUE(claims().ReclaimExpired().ok());
  EXPECT_THAT(Sent(stale[0]), IsEmpty());
  EXPECT_EQ(outbox_->Field(id, "state"), "pending");
}

TEST_P(OutboxClaimsContractTest, AnExpiredLeaseCannotCompleteEvenBeforeReclaim) {
  std::string id = Add(std::nullopt);
  auto rows = Claim();
  outbox_->ExpireLease(id);
  EXPECT_THAT(Sent(rows[0]), IsEmpty());
  EXPECT_THAT(Dead(rows[0]), IsEmpty());
  EXPECT_EQ(outbox_->Field(id, "state"), "processing");
}

TEST_P(OutboxClaimsContractTest, TheOwnerWithALiveLeaseMarksSentAndTheClaimIsCleared) {
  std::string id = Add(std::nullopt);
  auto rows = Claim();
  EXPECT_THAT(Sent(rows[0]), ElementsAre(id));
  EXPECT_EQ(outbox_->Field(id, "state"), "sent");
  EXPECT_EQ(outbox_->Field(id, "claim_token"), "<null>");
  EXPECT_EQ(outbox_->Field(id, "lease_expires_at"), "<null>");
}

TEST_P(OutboxClaimsContractTest, FencedWritesTakeTheWholeBatchAndReturnOnlyOwnedIds) {
  std::string a = Add(std::nullopt), b = Add(std::nullopt), c = Add(std::nullopt);
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 3u);
  std::vector<Fence> fences{{a, rows[0].claim_token},
                            {b, "00000000-0000-4000-8000-000000000000"},  // wrong token
                            {c, rows[2].claim_token},
                            {"not-a-uuid", "nor-this"}};
  auto sent = claims().MarkSent(fences);
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_THAT(*sent, UnorderedElementsAre(a, c));
  EXPECT_EQ(outbox_->Field(b, "state"), "processing");
}

TEST_P(OutboxClaimsContractTest, AnEmptyBatchChangesNothing) {
  EXPECT_THAT(*claims().MarkSent({}), IsEmpty());
  EXPECT_THAT(*claims().ScheduleRetry({}), IsEmpty());
  EXPECT_THAT(*claims().MarkDead({}), IsEmpty());
  EXPECT_THAT(*claims().Release({}), IsEmpty());
  EXPECT_THAT(*claims().Renew({}, kLease), IsEmpty());
}

// --- renewal ---

TEST_P(OutboxClaimsContractTest, RenewalExtendsTheLeaseAndALostClaimIsNotRenewed) {
  std::string id = Add(std::nullopt), other = Add(std::nullopt);
  auto rows = Claim(10, 1000);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_FALSE(outbox_->IsLaterThanNowPlus(id, "lease_expires_at", 1800));
  Fence mine{rows[0].id, rows[0].claim_token};
  auto renewed = claims().Renew(std::span<const Fence>(&mine, 1), 3600000);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_THAT(*renewed, ElementsAre(id));
  EXPECT_TRUE(outbox_->IsLaterThanNowPlus(id, "lease_expires_at", 1800));

  outbox_->ExpireLease(other);
  Fence lost{rows[1].id, rows[1].claim_token};
  auto not_renewed = claims().Renew(std::span<const Fence>(&lost, 1), 3600000);
  ASSERT_TRUE(not_renewed.ok());
  EXPECT_THAT(*not_renewed, IsEmpty());
  Fence wrong{id, rows[1].claim_token};
  EXPECT_THAT(*claims().Renew(std::span<const Fence>(&wrong, 1), 3600000), IsEmpty());
}

// --- reclaim (ReclaimStaleTest) ---

TEST_P(OutboxClaimsContractTest, ReclaimReturnsExpiredClaimsWithAttemptKeptAndLeavesLiveOnes) {
  std::string stale = Add(std::nullopt), live = Add(std::nullopt);
  auto first = Claim(1);
  ASSERT_THAT(Ids(first), ElementsAre(stale));
  ASSERT_THAT(Retry(first[0], 0), ElementsAre(stale));  // attempt 1
  auto rows = Claim();
  ASSERT_THAT(Ids(rows), UnorderedElementsAre(stale, live));
  outbox_->ExpireLease(stale);
  auto moved = claims().ReclaimExpired();
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(*moved, 1);
  EXPECT_EQ(outbox_->Field(stale, "state"), "pending");
  EXPECT_EQ(outbox_->Field(stale, "attempt"), "1");
  EXPECT_EQ(outbox_->Field(stale, "claimed_at"), "<null>");
  EXPECT_EQ(outbox_->Field(live, "state"), "processing");
  EXPECT_NE(outbox_->Field(live, "claimed_at"), "<null>");
}

TEST_P(OutboxClaimsContractTest, ReclaimTakesProcessingRowsWithoutALease) {
  std::string id = Add(std::nullopt);
  Claim();
  outbox_->ClearLease(id);
  EXPECT_EQ(*claims().ReclaimExpired(), 1);
  EXPECT_EQ(outbox_->Field(id, "state"), "pending");
}

// --- retry and dead ---

TEST_P(OutboxClaimsContractTest, RetryIncrementsAttemptAndSchedulesInTheFutureOnTheDatabaseClock) {
  std::string id = Add("k1");
  auto rows = Claim();
  EXPECT_THAT(Retry(rows[0], 3600000, "HTTP 503: busy"), ElementsAre(id));
  EXPECT_EQ(outbox_->Field(id, "state"), "pending");
  EXPECT_EQ(outbox_->Field(id, "attempt"), "1");
  EXPECT_EQ(outbox_->Field(id, "last_error"), "HTTP 503: busy");
  EXPECT_EQ(outbox_->Field(id, "claimed_at"), "<null>");
  EXPECT_TRUE(outbox_->IsLaterThanNowPlus(id, "scheduled_at", 3500));
  EXPECT_TRUE(outbox_->IsEarlierThanNowPlus(id, "scheduled_at", 3700));
}

// --- release (a destination outage spends no attempt) ---

TEST_P(OutboxClaimsContractTest, ReleaseKeepsAttemptAndSchedulesInTheFutureOnTheDatabaseClock) {
  std::string id = Add("k1");
  auto rows = Claim();
  ASSERT_THAT(Retry(rows[0], 0), ElementsAre(id));
  rows = Claim();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_THAT(Release(rows[0], 3600000, "Publish failed: Connection refused"), ElementsAre(id));
  EXPECT_EQ(outbox_->Field(id, "state"), "pending");
  EXPECT_EQ(outbox_->Field(id, "attempt"), "1");
  EXPECT_EQ(outbox_->Field(id, "last_error"), "Publish failed: Connection refused");
  EXPECT_EQ(outbox_->Field(id, "claimed_at"), "<null>");
  EXPECT_EQ(outbox_->Field(id, "claim_token"), "<null>");
  EXPECT_EQ(outbox_->Field(id, "lease_expires_at"), "<null>");
  EXPECT_TRUE(outbox_->IsLaterThanNowPlus(id, "scheduled_at", 3500));
  EXPECT_TRUE(outbox_->IsEarlierThanNowPlus(id, "scheduled_at", 3700));
  EXPECT_THAT(Claim(), IsEmpty()) << "not due before its delay";
}

TEST_P(OutboxClaimsContractTest, AReleasedRowHoldsBackItsKeyAndIsClaimedAgainWhenDue) {
  std::string head = Add("k1");
  Add("k1");
  auto rows = Claim();
  ASSERT_THAT(Ids(rows), ElementsAre(head));
  ASSERT_THAT(Release(rows[0], 0), ElementsAre(head));
  rows = Claim();
  ASSERT_THAT(Ids(rows), ElementsAre(head));
  EXPECT_EQ(rows[0].attempt, 0);
}

TEST_P(OutboxClaimsContractTest, ReleaseIsFencedByTokenAndLease) {
  std::string a = Add(std::nullopt), b = Add(std::nullopt), c = Add(std::nullopt);
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 3u);
  outbox_->ExpireLease(c);
  std::vector<ReleaseOrder> orders{{{a, rows[0].claim_token}, 0, "down"},
                                   {{b, "00000000-0000-4000-8000-000000000000"}, 0, "down"},
                                   {{c, rows[2].claim_token}, 0, "down"}};
  auto released = claims().Release(orders);
  ASSERT_TRUE(released.ok()) << released.status().ToString();
  EXPECT_THAT(*released, ElementsAre(a));
  EXPECT_EQ(outbox_->Field(a, "state"), "pending");
  EXPECT_EQ(outbox_->Field(b, "state"), "processing");
  EXPECT_EQ(outbox_->Field(c, "state"), "processing");
}

TEST_P(OutboxClaimsContractTest, DeadKeepsAttemptAndStoresTheError) {
  std::string id = Add(std::nullopt);
  auto rows = Claim();
  ASSERT_THAT(Retry(rows[0], 0), ElementsAre(id));
  rows = Claim();
  EXPECT_EQ(rows[0].attempt, 1);
  EXPECT_THAT(Dead(rows[0], "no route for topic"), ElementsAre(id));
  EXPECT_EQ(outbox_->Field(id, "state"), "dead");
  EXPECT_EQ(outbox_->Field(id, "attempt"), "1");
  EXPECT_EQ(outbox_->Field(id, "last_error"), "no route for topic");
  EXPECT_EQ(outbox_->Field(id, "claimed_at"), "<null>");
}

TEST_P(OutboxClaimsContractTest, ClaimRejectsABadLimitOrLease) {
  EXPECT_THAT(claims().Claim(0, kLease),
              StatusIs(StatusCode::kInvalidArgument, "The claim limit must be above 0, got 0."));
  EXPECT_THAT(claims().Claim(10, 0),
              StatusIs(StatusCode::kInvalidArgument, "The lease must be 1..2147483647 ms, got 0."));
}

// --- replay (reference §5.4) ---

class ReplayTest : public OutboxStoreContractTest {
 protected:
  // sent_ (topic a), dead_ (topic b), pending_ and processing_ (topic a).
  void SetUp() override {
    OutboxStoreContractTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    sent_ = Add(std::nullopt, "a");
    dead_ = Add(std::nullopt, "b");
    auto rows = Claim();
    ASSERT_EQ(rows.size(), 2u);
    ASSERT_THAT(Sent(rows[0]), ElementsAre(sent_));
    ASSERT_THAT(Dead(rows[1], "boom"), ElementsAre(dead_));
    processing_ = Add(std::nullopt, "a");
    ASSERT_EQ(Claim().size(), 1u);
    pending_ = Add(std::nullopt, "a");
    dead_sequence_ = db_->Field(dead_, "sequence");
  }
  int64_t Replay(const ReplayFilter& f) {
    auto n = store_->Replay(f);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? *n : -1;
  }
  static ReplayFilter WithIds(std::vector<std::string> ids) {
    ReplayFilter f;
    f.ids = std::move(ids);
    return f;
  }
  static ReplayFilter WithTopics(std::vector<std::string> topics) {
    ReplayFilter f;
    f.topics = std::move(topics);
    return f;
  }
  static ReplayFilter Created(std::optional<std::string> after, std::optional<std::string> before) {
    ReplayFilter f;
    f.created_after = std::move(after);
    f.created_before = std::move(before);
    return f;
  }
  std::string sent_, dead_, processing_, pending_, dead_sequence_;
};

TEST_P(ReplayTest, ReplayMovesSentAndDeadRowsAndNeverTouchesActiveOnes) {
  std::string processing_token = db_->Field(processing_, "claim_token");
  EXPECT_EQ(Replay(ReplayFilter{}), 2);
  for (const auto& id : {sent_, dead_}) {
    EXPECT_EQ(db_->Field(id, "state"), "pending");
    EXPECT_EQ(db_->Field(id, "attempt"), "0");
    EXPECT_EQ(db_->Field(id, "last_error"), "<null>");
    EXPECT_EQ(db_->Field(id, "claim_token"), "<null>");
    EXPECT_EQ(db_->Field(id, "lease_expires_at"), "<null>");
    EXPECT_EQ(db_->Field(id, "claimed_at"), "<null>");
  }
  EXPECT_EQ(db_->Field(dead_, "sequence"), dead_sequence_);
  EXPECT_EQ(db_->Field(processing_, "state"), "processing");
  EXPECT_EQ(db_->Field(processing_, "claim_token"), processing_token);
  EXPECT_EQ(db_->Field(pending_, "state"), "pending");
}

TEST_P(ReplayTest, ReplayFiltersByIds) {
  EXPECT_EQ(Replay(WithIds({dead_, processing_})), 1);
  EXPECT_EQ(db_->Field(dead_, "state"), "pending");
  EXPECT_EQ(db_->Field(sent_, "state"), "sent");
}

TEST_P(ReplayTest, AnEmptyListMatchesNothing) {
  EXPECT_EQ(Replay(WithIds({})), 0);
  EXPECT_EQ(Replay(WithTopics({})), 0);
  EXPECT_EQ(db_->Field(dead_, "state"), "dead");
}

TEST_P(ReplayTest, ReplayFiltersByTopics) {
  EXPECT_EQ(Replay(WithTopics({"b"})), 1);
  EXPECT_EQ(db_->Field(dead_, "state"), "pending");
  EXPECT_EQ(db_->Field(sent_, "state"), "sent");
}

TEST_P(ReplayTest, ReplayFiltersByCreatedTimeStrictly) {
  db_->Exec("UPDATE outbox SET created_at = '2024-01-01T00:00:00.000Z' WHERE id = '" + sent_ + "'");
  db_->Exec("UPDATE outbox SET created_at = '2024-01-03T00:00:00.000Z' WHERE id = '" + dead_ + "'");
  // Strict bounds: a row created exactly at the bound is not moved.
  EXPECT_EQ(Replay(Created("2024-01-03T00:00:00Z", std::nullopt)), 0);
  EXPECT_EQ(Replay(Created(std::nullopt, "2024-01-01T00:00:00Z")), 0);
  EXPECT_EQ(Replay(Created("2024-01-02T00:00:00Z", "2024-01-04T00:00:00+00:00")), 1);
  EXPECT_EQ(db_->Field(dead_, "state"), "pending");
  EXPECT_EQ(db_->Field(sent_, "state"), "sent");
  EXPECT_THAT(store_->Replay(Created("yesterday", std::nullopt)),
              StatusIs(StatusCode::kInvalidArgument,
                       "createdAfter must be an ISO-8601 instant such as "
                       "2024-01-31T10:00:00Z, got 'yesterday'."));
}

// --- retention (RetentionSemanticsTest) ---

TEST_P(OutboxStoreContractTest, RetentionRefusesActiveStates) {
  for (const char* state : {"pending", "processing", "failed"}) {
    auto age = store_->DeleteOlderThan(state, 0, 100);
    EXPECT_EQ(age.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(age.status().message(), HasSubstr("Cannot delete active work"));
    EXPECT_THAT(store_->DeleteBeyondCount(state, 0, 100),
                StatusIs(StatusCode::kInvalidArgument,
                         "Cannot delete active work: retention deletes only 'sent' and 'dead' "
                         "rows, not '" +
                             std::string(state) + "'."));
  }
}

TEST_P(OutboxStoreContractTest, RetentionNeverDeletesPendingOrProcessingRowsEvenWhenOld) {
  std::string processing = Add(std::nullopt);
  Claim();
  std::string pending = Add(std::nullopt);
  db_->Exec("UPDATE outbox SET updated_at = " + db_->NowPlus(-86400) +
            ", created_at = " + db_->NowPlus(-86400));
  EXPECT_EQ(*store_->DeleteOlderThan("sent", 1000, 100), 0);
  EXPECT_EQ(*store_->DeleteOlderThan("dead", 1000, 100), 0);
  EXPECT_EQ(*store_->DeleteBeyondCount("sent", 0, 100), 0);
  EXPECT_EQ(db_->Field(processing, "state"), "processing");
  EXPECT_EQ(db_->Field(pending, "state"), "pending");
}

TEST_P(OutboxStoreContractTest, RetentionAgeUsesUpdatedAtAndNotCreatedAt) {
  std::string old_created = Add(std::nullopt), old_updated = Add(std::nullopt);
  auto rows = Claim();
  for (const auto& r : rows) ASSERT_EQ(Sent(r).size(), 1u);
  db_->Exec("UPDATE outbox SET created_at = " + db_->NowPlus(-86400) + " WHERE id = '" +
            old_created + "'");
  db_->Exec("UPDATE outbox SET updated_at = " + db_->NowPlus(-86400) + " WHERE id = '" +
            old_updated + "'");
  auto deleted = store_->DeleteOlderThan("sent", 3600000, 100);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 1);
  EXPECT_EQ(db_->Field(old_updated, "state"), "");  // gone
  EXPECT_EQ(db_->Field(old_created, "state"), "sent");
}

TEST_P(OutboxStoreContractTest, RetentionAgeDeletesInBatches) {
  for (int i = 0; i < 5; ++i) Add(std::nullopt);
  for (const auto& r : Claim()) ASSERT_EQ(Sent(r).size(), 1u);
  db_->Exec("UPDATE outbox SET updated_at = " + db_->NowPlus(-7200));
  EXPECT_EQ(*store_->DeleteOlderThan("sent", 3600000, 2), 2);
  EXPECT_EQ(*store_->DeleteOlderThan("sent", 3600000, 2), 2);
  EXPECT_EQ(*store_->DeleteOlderThan("sent", 3600000, 2), 1);
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox"), "0");
}

TEST_P(OutboxStoreContractTest, RetentionCountKeepsTheNewestRowsOfEachState) {
  std::vector<std::string> sent, dead;
  for (int i = 0; i < 4; ++i) sent.push_back(Add(std::nullopt, "s"));
  for (int i = 0; i < 3; ++i) dead.push_back(Add(std::nullopt, "d"));
  for (const auto& r : Claim()) {
    if (r.topic == "s") {
      ASSERT_EQ(Sent(r).size(), 1u);
    } else {
      ASSERT_EQ(Dead(r).size(), 1u);
    }
  }
  // sent[i] was updated i hours ago: sent[0] is the newest.
  for (size_t i = 0; i < sent.size(); ++i) {
    db_->Exec("UPDATE outbox SET updated_at = " + db_->NowPlus(-3600 * static_cast<int64_t>(i)) +
              " WHERE id = '" + sent[i] + "'");
  }
  EXPECT_EQ(*store_->DeleteBeyondCount("sent", 2, 100), 2);
  EXPECT_EQ(db_->Field(sent[0], "state"), "sent");
  EXPECT_EQ(db_->Field(sent[1], "state"), "sent");
  EXPECT_EQ(db_->Field(sent[2], "state"), "");
  EXPECT_EQ(db_->Field(sent[3], "state"), "");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox WHERE state = 'dead'"), "3");
  EXPECT_EQ(*store_->DeleteBeyondCount("sent", 2, 100), 0);
}

// --- operations ---

TEST_P(OutboxStoreContractTest, StatsCountRowsPerStateOldestPendingAgeAndDeadPerTopic) {
  Add(std::nullopt, "a");
  Add(std::nullopt, "b");
  auto rows = Claim();
  ASSERT_EQ(Dead(rows[0]).size(), 1u);
  std::string pending = Add(std::nullopt, "c");
  Add(std::nullopt, "c");
  db_->Exec("UPDATE outbox SET created_at = " + db_->NowPlus(-100) + " WHERE id = '" + pending +
            "'");
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->rows_by_state["pending"], 2);
  EXPECT_EQ(stats->rows_by_state["processing"], 1);
  EXPECT_EQ(stats->rows_by_state["dead"], 1);
  EXPECT_EQ(stats->dead_by_topic.size(), 1u);
  EXPECT_EQ(stats->dead_by_topic[rows[0].topic], 1);
  EXPECT_GE(stats->oldest_pending_age_seconds, 99.0);
  EXPECT_LT(stats->oldest_pending_age_seconds, 3600.0);
}

// The gauges' read: pending rows only, whatever else the table holds.
TEST_P(OutboxStoreContractTest, PendingGaugesCountOnlyPendingRowsAndTheOldestPendingAge) {
  auto empty = store_->PendingGauges();
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_THAT(empty->rows_by_state, ElementsAre(Pair("pending", 0)));
  EXPECT_EQ(empty->oldest_pending_age_seconds, 0.0);

  Add(std::nullopt, "a");
  Add(std::nullopt, "b");
  Add(std::nullopt, "c");
  auto rows = Claim(3);
  ASSERT_EQ(rows.size(), 3u);
  ASSERT_EQ(Sent(rows[0]).size(), 1u);
  ASSERT_EQ(Dead(rows[1]).size(), 1u);  // rows[2] stays processing
  std::string old = Add(std::nullopt, "d");
  Add(std::nullopt, "d");
  db_->Exec("UPDATE outbox SET created_at = " + db_->NowPlus(-100) + " WHERE id = '" + old + "'");

  auto gauges = store_->PendingGauges();
  ASSERT_TRUE(gauges.ok()) << gauges.status().ToString();
  EXPECT_THAT(gauges->rows_by_state, ElementsAre(Pair("pending", 2)));
  EXPECT_THAT(gauges->dead_by_topic, IsEmpty());
  EXPECT_GE(gauges->oldest_pending_age_seconds, 99.0);
  EXPECT_LT(gauges->oldest_pending_age_seconds, 3600.0);
  // The same figures as the full Stats().
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->rows_by_state["pending"], 2);
  EXPECT_NEAR(stats->oldest_pending_age_seconds, gauges->oldest_pending_age_seconds, 5.0);
}

TEST_P(OutboxStoreContractTest, ListDeadIsNewestFirstAndDistinctTopicsListsEachOnce) {
  std::string a = Add("k", "x"), b = Add(std::nullopt, "y");
  Add(std::nullopt, "x");
  auto rows = Claim(2);
  ASSERT_THAT(Ids(rows), ElementsAre(a, b));
  ASSERT_EQ(Dead(rows[0], "first").size(), 1u);
  ASSERT_EQ(Dead(rows[1], "second").size(), 1u);
  db_->Exec("UPDATE outbox SET updated_at = " + db_->NowPlus(-60) + " WHERE id = '" + a + "'");
  auto dead = store_->ListDead(10);
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->size(), 2u);
  EXPECT_EQ((*dead)[0].id, b);
  EXPECT_EQ((*dead)[0].last_error, "second");
  EXPECT_EQ((*dead)[1].id, a);
  EXPECT_EQ((*dead)[1].key, "k");
  EXPECT_THAT(*store_->DistinctTopics(), ElementsAre("x", "y"));
}

TEST_P(OutboxStoreContractTest, InsertWithOnlyTopicAndPayloadTakesTheDefaults) {
  NewOutboxRow row;
  row.topic = "orders.created";
  row.payload = R"({"orderId":"1"})";
  auto id = store_->Insert(row);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  // A random UUID (version 4) on SQLite; a time-ordered one (version 7, V21) on PostgreSQL.
  const std::string version = GetParam() == "sqlite" ? "4" : "7";
  EXPECT_THAT(*id, ::testing::MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-" + version +
                                           "[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"));
  EXPECT_EQ(db_->Field(*id, "state"), "pending");
  EXPECT_EQ(db_->Field(*id, "attempt"), "0");
  EXPECT_EQ(db_->Field(*id, "max_attempts"), "5");
  EXPECT_EQ(db_->Field(*id, "headers"), "{}");
  EXPECT_EQ(db_->Field(*id, "key"), "<null>");
  EXPECT_NE(db_->Field(*id, "sequence"), "<null>");
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].topic, "orders.created");
  EXPECT_EQ(rows[0].headers, "{}");
  EXPECT_EQ(rows[0].max_attempts, 5);
  EXPECT_FALSE(rows[0].created_at.empty());
}

TEST_P(OutboxStoreContractTest, InsertKeepsTheGivenFields) {
  NewOutboxRow row;
  row.id = "11111111-1111-4111-8111-111111111111";
  row.topic = "t";
  row.key = "cust-42";
  row.payload = R"({"a":1})";
  row.headers = R"({"X-Tenant":"acme"})";
  row.aggregate_type = "order";
  row.max_attempts = 9;
  ASSERT_EQ(*store_->Insert(row), *row.id);
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].key, "cust-42");
  EXPECT_EQ(rows[0].aggregate_type, "order");
  EXPECT_EQ(rows[0].max_attempts, 9);
  EXPECT_THAT(rows[0].headers, HasSubstr("acme"));
}

TEST_P(OutboxStoreContractTest, InsertRejectsAPayloadThatIsNotJson) {
  NewOutboxRow row;
  row.topic = "t";
  row.payload = "not json";
  EXPECT_THAT(store_->Insert(row),
              StatusIs(StatusCode::kInvalidArgument,
                       GetParam() == "sqlite"
                           ? "SQLite: CHECK constraint failed: json_valid(payload)"
                           : "PostgreSQL: invalid input syntax for type json (SQLSTATE 22P02)"));
}

TEST_P(OutboxStoreContractTest, MigrateTwiceAppliesNothingTheSecondTime) {
  auto again = store_->Migrate(std::nullopt);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_THAT(again->applied, IsEmpty());
  EXPECT_THAT(store_->Migrate(3),
              StatusIs(StatusCode::kFailedPrecondition,
                       "The database already has a migration history, so --baseline 3 cannot be "
                       "recorded. Run `queuebox migrate` without it."));
}

TEST_P(OutboxStoreContractTest, ABadIdentifierIsRejectedAtOpen) {
  DatabaseConfig config = db_->config();
  config.columns.state = "state; DROP TABLE outbox";
  auto store = OpenStore(config);
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("database.columnMapping.outbox.state"));
}

// --- the attempt history (outbox_attempts, V22) ---

class AttemptHistoryTest : public OutboxStoreContractTest {
 protected:
  void SetUp() override {
    OutboxStoreContractTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    ASSERT_TRUE(store_->EnableAttemptHistory().ok());
  }

  static Fence Recorded(const OutboxRow& row, int64_t ms, std::string answer) {
    return {row.id, row.claim_token, AttemptRecord{row.attempt, "webhook", ms, std::move(answer)}};
  }

  std::vector<AttemptRow> Attempts(const std::string& id) {
    auto rows = store_->Attempts(id);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? *rows : std::vector<AttemptRow>{};
  }

  std::string AttemptCount() { return db_->Scalar("SELECT count(*) FROM outbox_attempts"); }
};

TEST_P(AttemptHistoryTest, EachOutcomeWriteRecordsItsAttemptInTheSameWrite) {
  const std::string id = Add("k");
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 1u);
  RetryOrder retry{Recorded(rows[0], 120, "HTTP 500"), 0, "HTTP 500: boom"};
  ASSERT_THAT(*store_->ScheduleRetry(std::span<const RetryOrder>(&retry, 1)), ElementsAre(id));
  rows = Claim();
  ASSERT_EQ(rows.size(), 1u);
  ReleaseOrder release{Recorded(rows[0], -1, ""), 0, "Not published, its circuit breaker is open"};
  ASSERT_THAT(*store_->Release(std::span<const ReleaseOrder>(&release, 1)), ElementsAre(id));
  rows = Claim();
  ASSERT_EQ(rows.size(), 1u);
  const Fence sent = Recorded(rows[0], 7, "HTTP 204");
  ASSERT_THAT(*store_->MarkSent(std::span<const Fence>(&sent, 1)), ElementsAre(id));

  auto attempts = Attempts(id);
  ASSERT_EQ(attempts.size(), 3u);
  EXPECT_EQ(attempts[0].outcome, "retry");
  EXPECT_EQ(attempts[0].attempt, 0);
  EXPECT_EQ(attempts[0].row_table, "outbox");
  EXPECT_EQ(attempts[0].destination, "webhook");
  EXPECT_EQ(attempts[0].duration_ms, 120);
  EXPECT_EQ(attempts[0].answer, "HTTP 500");
  EXPECT_EQ(attempts[0].error, "HTTP 500: boom");
  EXPECT_EQ(attempts[1].outcome, "released");
  EXPECT_EQ(attempts[1].attempt, 1);
  EXPECT_EQ(attempts[1].duration_ms, std::nullopt);  // nothing was published
  EXPECT_EQ(attempts[1].answer, std::nullopt);
  EXPECT_EQ(attempts[1].error, "Not published, its circuit breaker is open");
  EXPECT_EQ(attempts[2].outcome, "sent");
  EXPECT_EQ(attempts[2].attempt, 1);
  EXPECT_EQ(attempts[2].duration_ms, 7);
  EXPECT_EQ(attempts[2].answer, "HTTP 204");
  EXPECT_EQ(attempts[2].error, std::nullopt);
  for (const AttemptRow& a : attempts) {
    EXPECT_EQ(a.message_id, id);
    EXPECT_FALSE(a.recorded_at.empty());
  }
  // The database clock: recorded no earlier than the row was created.
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM outbox_attempts a JOIN outbox o ON o.id = "
                        "a.message_id WHERE a.recorded_at >= o.created_at"),
            "3");
}

TEST_P(AttemptHistoryTest, ADeadRowRecordsItsErrorAndAnUnroutableOneNoDestination) {
  const std::string a = Add(std::nullopt), b = Add(std::nullopt);
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 2u);
  std::vector<DeadOrder> dead{{Recorded(rows[0], 3, "HTTP 400"), "HTTP 400: bad"},
                              {{rows[1].id, rows[1].claim_token, AttemptRecord{}}, "no route"}};
  ASSERT_EQ(store_->MarkDead(dead)->size(), 2u);
  auto first = Attempts(rows[0].id);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].outcome, "dead");
  EXPECT_EQ(first[0].error, "HTTP 400: bad");
  auto second = Attempts(rows[1].id);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].destination, std::nullopt);
  EXPECT_EQ(second[0].error, "no route");
}

TEST_P(AttemptHistoryTest, ALostClaimWritesNoAttempt) {
  const std::string id = Add(std::nullopt);
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 1u);
  db_->ExpireLease(id);
  const Fence late = Recorded(rows[0], 5, "HTTP 200");
  EXPECT_THAT(*store_->MarkSent(std::span<const Fence>(&late, 1)), IsEmpty());
  const Fence stale{id, "00000000-0000-4000-8000-000000000000", AttemptRecord{}};
  EXPECT_THAT(*store_->MarkSent(std::span<const Fence>(&stale, 1)), IsEmpty());
  EXPECT_EQ(AttemptCount(), "0");
}

TEST_P(AttemptHistoryTest, OffByDefaultAndWithoutRecords) {
  auto other = db_->Open();  // a store whose history was not turned on
  ASSERT_NE(other, nullptr);
  Add(std::nullopt);
  Add(std::nullopt);
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 2u);
  const Fence recorded = Recorded(rows[0], 1, "HTTP 200");
  ASSERT_EQ(other->MarkSent(std::span<const Fence>(&recorded, 1))->size(), 1u);
  const Fence plain{rows[1].id, rows[1].claim_token};
  ASSERT_EQ(store_->MarkSent(std::span<const Fence>(&plain, 1))->size(), 1u);
  EXPECT_EQ(AttemptCount(), "0");
}

TEST_P(AttemptHistoryTest, RetentionDeletesTheAttemptsOfTheRowsItDeletes) {
  const std::string old_sent = Add(std::nullopt, "s"), kept = Add(std::nullopt, "s");
  const std::string old_dead = Add(std::nullopt, "d");
  for (const OutboxRow& r : Claim()) {
    if (r.topic == "d") {
      DeadOrder o{Recorded(r, 1, ""), "gone"};
      ASSERT_EQ(store_->MarkDead(std::span<const DeadOrder>(&o, 1))->size(), 1u);
    } else {
      const Fence f = Recorded(r, 1, "HTTP 200");
      ASSERT_EQ(store_->MarkSent(std::span<const Fence>(&f, 1))->size(), 1u);
    }
  }
  db_->Exec("UPDATE outbox SET updated_at = " + db_->NowPlus(-7200) + " WHERE id <> '" + kept +
            "'");
  EXPECT_EQ(*store_->DeleteOlderThan("sent", 3600000, 100), 1);
  EXPECT_EQ(*store_->DeleteBeyondCount("dead", 0, 100), 1);
  EXPECT_THAT(Attempts(old_sent), IsEmpty());
  EXPECT_THAT(Attempts(old_dead), IsEmpty());
  EXPECT_EQ(Attempts(kept).size(), 1u);
  EXPECT_EQ(AttemptCount(), "1");
}

TEST_P(AttemptHistoryTest, WithoutTheTableTheHistoryStaysOffAndRetentionStillWorks) {
  db_->Exec("DROP TABLE outbox_attempts");
  auto store = db_->Open();
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(store->EnableAttemptHistory(),
              StatusIs(StatusCode::kFailedPrecondition,
                       "the table outbox_attempts does not exist; `queuebox migrate` creates it "
                       "(V22), or create it as docs/schema.md shows"));
  EXPECT_EQ(store->Attempts(Add(std::nullopt)).status().code(), StatusCode::kFailedPrecondition);
  auto rows = store->Claim(10, kLease);
  ASSERT_EQ(rows->size(), 1u);
  const Fence f = Recorded((*rows)[0], 1, "HTTP 200");
  ASSERT_EQ(store->MarkSent(std::span<const Fence>(&f, 1))->size(), 1u);
  db_->Exec("UPDATE outbox SET updated_at = " + db_->NowPlus(-7200));
  EXPECT_EQ(*store->DeleteOlderThan("sent", 3600000, 100), 1);
}

INSTANTIATE_TEST_SUITE_P(Stores, OutboxClaimsContractTest,
                         ::testing::Values("sqlite", "postgresql", "memory"),
                         [](const auto& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(Dialects, OutboxStoreContractTest,
                         ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(Dialects, ReplayTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(Dialects, AttemptHistoryTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace queuebox
