// The PostgreSQL claim's state between claims (ClaimWindowState, docs/claim.md section 5), through
// PostgreSQL and real time: claims read idx_outbox_pending_due from the first due row the previous
// claim saw, and a row that becomes due behind that position is still claimed, by the periodic
// read from the beginning. src/store/postgres/claim_window_state_test.cc proves the same rules on
// a fake clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <thread>

#include "store_test_support.h"

namespace queuebox {
namespace {

constexpr int64_t kLease = 60000;

class PostgresClaimWindowTest : public testing::MigratedPgStoreTest {
 protected:
  // Inserts `n` rows of `key`, in one statement.
  void InsertRowsOfKey(const std::string& key, int n) {
    db_->Exec("INSERT INTO outbox (topic, key, payload) SELECT 't', '" + key +
              "', '{}' FROM generate_series(1, " + std::to_string(n) + ")");
  }

  static std::vector<Fence> FencesOf(const std::vector<OutboxRow>& rows) {
    std::vector<Fence> fences;
    for (const OutboxRow& r : rows) fences.push_back({r.id, r.claim_token});
    return fences;
  }

  std::vector<std::string> ClaimKeys(int limit) {
    auto rows = store_->Claim(limit, kLease);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    std::vector<std::string> keys;
    if (rows.ok()) {
      for (const OutboxRow& r : *rows) keys.push_back(r.key.value_or("<null>"));
    }
    return keys;
  }
};

// The window judges one row per key, the key's lowest sequence in it, not its first in claim
// order: a retried head sorts after its key's later rows (a later scheduled_at), and it is the
// one claimed. Each key here has five rows in the window, the lowest sequence scheduled last;
// the claim returns every key's lowest sequence and no other row.
TEST_F(PostgresClaimWindowTest, TheWindowJudgesEachKeysLowestSequenceWhereverItSorts) {
  for (const char* key : {"a", "b", "c"}) InsertRowsOfKey(key, 5);
  db_->Exec(
      "UPDATE outbox SET scheduled_at = clock_timestamp() - interval '1 hour' + "
      "(CASE WHEN sequence = (SELECT min(sequence) FROM outbox o2 WHERE o2.key = outbox.key) "
      "THEN interval '30 minutes' ELSE interval '0' END)");
  auto rows = store_->Claim(10, kLease);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  std::map<std::string, int64_t> claimed;  // key -> sequence
  for (const OutboxRow& r : *rows) claimed[r.key.value_or("")] = r.sequence;
  ASSERT_EQ(rows->size(), 3u);
  for (const char* key : {"a", "b", "c"}) {
    EXPECT_EQ(claimed[key], std::stoll(db_->Scalar(std::string("SELECT min(sequence) FROM "
                                                               "outbox WHERE key = '") +
                                                   key + "'")))
        << key;
  }
}

TEST_F(PostgresClaimWindowTest, RowDueBeforeTheWindowStartIsStillClaimed) {
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || n, '{}' "
      "FROM generate_series(1, 3) AS n");
  EXPECT_THAT(ClaimKeys(1), ::testing::ElementsAre("k1"));
  // A row due an hour before every other row, as a transaction that began long ago or a
  // reclaimed lease leaves it: it sorts before where the window now starts.
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload, scheduled_at) "
      "VALUES ('t', 'early', '{}', clock_timestamp() - interval '1 hour')");
  std::vector<std::string> claimed;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::find(claimed.begin(), claimed.end(), "early") == claimed.end() &&
         std::chrono::steady_clock::now() < deadline) {
    for (const std::string& k : ClaimKeys(10)) claimed.push_back(k);
  }
  EXPECT_THAT(claimed, ::testing::UnorderedElementsAre("k2", "k3", "early"));
  EXPECT_EQ(db_->Query("SELECT count(*) FROM outbox WHERE state = 'pending'"),
            (std::vector<std::vector<std::string>>{{"0"}}));
}

TEST_F(PostgresClaimWindowTest, FallbackVisitsEveryKeyRoundRobinBehindAHotKey) {
  // Key h's 10 rows come first, so a window of 2 x 2 rows holds only h's head and blocked rows:
  // every claim takes the fallback, whose key walk stops after a window's worth of candidates
  // and resumes after the last key it visited, wrapping around. Without acknowledgements each
  // key's head is claimed exactly once, and no key's second row.
  InsertRowsOfKey("h", 10);
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', k, '{}' "
      "FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e', 'a', 'b', 'c', 'd', 'e']) AS k");
  std::vector<std::string> claimed;
  for (int i = 0; i < 20; ++i) {
    std::vector<std::string> keys = ClaimKeys(2);
    if (keys.empty()) break;
    claimed.insert(claimed.end(), keys.begin(), keys.end());
  }
  EXPECT_THAT(claimed, ::testing::UnorderedElementsAre("a", "b", "c", "d", "e", "h"));
}

TEST_F(PostgresClaimWindowTest, AfterAFallbackTheWindowComesBackWhileClaimsContinue) {
  // Key zz's 10 rows come first (the oldest), then key a: a claim of 2 reads a window of zz's
  // blocked rows and falls back to the key walk. Claims skip the window for a second after that
  // fallback, then read it again, even while every claim keeps returning rows: the oldest row
  // (zz's next one) comes back within a few claims, not after the walk has visited the 20 keys
  // k00..k19 that sort between a and zz.
  InsertRowsOfKey("zz", 10);
  db_->Exec("INSERT INTO outbox (topic, key, payload) VALUES ('t', 'a', '{}')");
  auto first = store_->Claim(2, kLease);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->size(), 2u);
  const std::vector<Fence> fences = FencesOf(*first);
  ASSERT_TRUE(store_->MarkSent(fences).ok());
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || lpad(n::text, 2, '0'), '{}' "
      "FROM generate_series(0, 19) AS n");
  int claims_until_zz = 0;
  for (int i = 1; i <= 21 && claims_until_zz == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // claims spread over > 1 s
    auto rows = store_->Claim(1, kLease);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_EQ(rows->size(), 1u);
    if (rows->front().key == "zz") claims_until_zz = i;
    std::vector<Fence> sent{{rows->front().id, rows->front().claim_token}};
    ASSERT_TRUE(store_->MarkSent(sent).ok());
  }
  EXPECT_GE(claims_until_zz, 1);
  EXPECT_LE(claims_until_zz, 12) << "the window did not come back after the fallback";
}

TEST_F(PostgresClaimWindowTest, DrainClaimsEveryRowOnceInKeyOrder) {
  // 30 keys x 40 rows, claimed 50 at a time and acknowledged: every row exactly once, each key's
  // rows in sequence order, while the window start moves along the drained rows.
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || (n % 30), '{}' "
      "FROM generate_series(1, 1200) AS n");
  std::map<std::string, int64_t> last_sequence;
  int64_t total = 0;
  for (int i = 0; i < 1000; ++i) {
    auto rows = store_->Claim(50, kLease);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    if (rows->empty()) break;
    std::vector<Fence> fences;
    for (const OutboxRow& r : *rows) {
      auto [it, fresh] = last_sequence.emplace(*r.key, r.sequence);
      if (!fresh) {
        EXPECT_LT(it->second, r.sequence) << *r.key;
        it->second = r.sequence;
      }
      fences.push_back({r.id, r.claim_token});
    }
    auto sent = store_->MarkSent(fences);
    ASSERT_TRUE(sent.ok()) << sent.status().ToString();
    ASSERT_EQ(sent->size(), fences.size());
    total += static_cast<int64_t>(sent->size());
  }
  EXPECT_EQ(total, 1200);
  EXPECT_EQ(db_->Query("SELECT count(*) FROM outbox WHERE state <> 'sent'"),
            (std::vector<std::vector<std::string>>{{"0"}}));
}

// After a claim that came back empty, the key walk rests until this store writes an outcome (or a
// second passes): it would only visit the same busy keys again. A new key whose row lies beyond a
// window of blocked rows is then claimed after the next outcome.
TEST_F(PostgresClaimWindowTest, AfterAnEmptyClaimTheKeyWalkWaitsForAnOutcome) {
  // 10 rows of `hot` fill the window (2 x limit 2 = 4 rows), then `busy`'s row.
  InsertRowsOfKey("hot", 10);
  db_->Exec("INSERT INTO outbox (topic, key, payload) VALUES ('t', 'busy', '{}')");
  auto first = store_->Claim(2, kLease);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::vector<std::string> keys;
  for (const OutboxRow& r : *first) keys.push_back(*r.key);
  EXPECT_THAT(keys, ::testing::UnorderedElementsAre("hot", "busy"));
  // Both keys in flight: nothing to claim.
  EXPECT_THAT(ClaimKeys(2), ::testing::IsEmpty());
  // A new key behind the window: the walk rests, so it is not claimed yet ...
  db_->Exec("INSERT INTO outbox (topic, key, payload) VALUES ('t', 'late', '{}')");
  EXPECT_THAT(ClaimKeys(2), ::testing::IsEmpty());
  // ... until an outcome is written (busy's row is sent).
  std::vector<Fence> fences;
  for (const OutboxRow& r : *first) {
    if (*r.key == "busy") fences.push_back({r.id, r.claim_token});
  }
  auto sent = store_->MarkSent(fences);
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_THAT(ClaimKeys(2), ::testing::ElementsAre("late"));
}

// Without outcomes, the walk comes back after a second.
TEST_F(PostgresClaimWindowTest, AfterAnEmptyClaimTheKeyWalkComesBackWithinASecond) {
  InsertRowsOfKey("hot", 10);
  EXPECT_THAT(ClaimKeys(2), ::testing::ElementsAre("hot"));
  EXPECT_THAT(ClaimKeys(2), ::testing::IsEmpty());
  db_->Exec("INSERT INTO outbox (topic, key, payload) VALUES ('t', 'late', '{}')");
  std::vector<std::string> claimed;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (claimed.empty() && std::chrono::steady_clock::now() < deadline) {
    claimed = ClaimKeys(2);
    if (claimed.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(claimed, ::testing::ElementsAre("late"));
}

// Claim order is (scheduled_at, sequence) but a key's head is its lowest sequence: when a later
// row of the key is due earlier (its producer set scheduled_at), only the head is claimed, and the
// later row waits for it.
TEST_F(PostgresClaimWindowTest, AKeysHeadIsItsLowestSequenceEvenWhenALaterRowIsDueEarlier) {
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload, scheduled_at) VALUES "
      "('t', 'k', '{\"n\": 1}', clock_timestamp() - interval '1 second')");
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload, scheduled_at) VALUES "
      "('t', 'k', '{\"n\": 2}', clock_timestamp() - interval '1 hour')");
  auto first = store_->Claim(10, kLease);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ(first->front().payload, R"({"n": 1})");
  EXPECT_THAT(ClaimKeys(10), ::testing::IsEmpty());
  ASSERT_TRUE(store_->MarkSent(FencesOf(*first)).ok());
  auto second = store_->Claim(10, kLease);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ(second->front().payload, R"({"n": 2})");
}

// A key's head can sort after the key's own later rows (a retry's backoff, a producer's
// scheduled_at): the window then holds rows of the key but not its head, so the count of keys a
// walk saw must not let a claim skip the walk that finds the head once it is due.
TEST_F(PostgresClaimWindowTest, ARetriedHeadIsClaimedByTheFirstClaimAfterItIsDue) {
  InsertRowsOfKey("x", 3);
  InsertRowsOfKey("y", 300);
  auto first = store_->Claim(5, kLease);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->size(), 2u);  // the heads of x and y; the walk went round both keys
  std::vector<Fence> sent;
  std::vector<RetryOrder> retry;
  for (const OutboxRow& r : *first) {
    if (*r.key == "x") {
      retry.push_back({{r.id, r.claim_token}, 100, "receiver answered 503"});
    } else {
      sent.push_back({r.id, r.claim_token});
    }
  }
  ASSERT_TRUE(store_->ScheduleRetry(retry).ok());
  ASSERT_TRUE(store_->MarkSent(sent).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // x's head is due again
  auto next = store_->Claim(5, kLease);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  std::vector<std::string> ids;
  for (const OutboxRow& r : *next) ids.push_back(r.id);
  EXPECT_THAT(ids, ::testing::Contains(retry.front().fence.id));
}

TEST_F(PostgresClaimWindowTest, AHeadScheduledAfterItsKeysLaterRowsIsClaimedOnceDue) {
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload, scheduled_at) VALUES "
      "('t', 'x', '{}', clock_timestamp() + interval '1 hour')");
  InsertRowsOfKey("x", 2);
  InsertRowsOfKey("y", 300);
  EXPECT_THAT(ClaimKeys(5), ::testing::ElementsAre("y"));  // x's head is not due yet
  // It falls due (moved to now rather than waited for: no race with a loaded machine's clock).
  db_->Exec(
      "UPDATE outbox SET scheduled_at = clock_timestamp() WHERE key = 'x' AND scheduled_at > "
      "clock_timestamp()");
  EXPECT_THAT(ClaimKeys(5), ::testing::Contains("x"));
}

// Behind a window full of its key's later rows, only the key walk finds a retried head; after an
// empty claim the walk rests, and the retry falling due ends that rest.
TEST_F(PostgresClaimWindowTest, ARetriedHeadBehindAFullWindowIsClaimedOnceDueAfterAnEmptyClaim) {
  InsertRowsOfKey("x", 10);
  auto first = store_->Claim(2, kLease);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->size(), 1u);
  const std::vector<RetryOrder> retry = {
      {{first->front().id, first->front().claim_token}, 200, "receiver answered 503"}};
  const auto scheduled = std::chrono::steady_clock::now();
  ASSERT_TRUE(store_->ScheduleRetry(retry).ok());
  EXPECT_THAT(ClaimKeys(2), ::testing::IsEmpty());  // nothing due: the walk rests
  // Claimed once the retry (200 ms) is due, short of the walk's one-second rest: the retry ends
  // the rest. Claims are polled until then (an empty claim does not lengthen the rest); 750 ms
  // of room for a sanitizer run's round trips.
  std::vector<OutboxRow> next;
  while (next.empty() &&
         std::chrono::steady_clock::now() < scheduled + std::chrono::milliseconds(950)) {
    auto claimed = store_->Claim(2, kLease);
    ASSERT_TRUE(claimed.ok()) << claimed.status().ToString();
    next = std::move(claimed).value();
    if (next.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll
  }
  ASSERT_EQ(next.size(), 1u) << "the retried head is claimed before the walk's rest ends";
  EXPECT_EQ(next.front().id, first->front().id);
}

// A lease renewal and an acknowledgement of the same rows run at once on two connections (the
// lease keeper and a finished batch): given their rows in opposite orders, both still succeed,
// because every fenced batch write locks in id order (no deadlock for PostgreSQL to break).
TEST_F(PostgresClaimWindowTest, RenewalAndAcknowledgementOfTheSameRowsDoNotDeadlock) {
  std::unique_ptr<OutboxStore> other = db_->Open();
  ASSERT_NE(other, nullptr);
  for (int round = 0; round < 5; ++round) {
    db_->Exec(
        "INSERT INTO outbox (topic, key, payload) SELECT 't', 'k' || n, '{}' "
        "FROM generate_series(1, 400) AS n");
    auto rows = store_->Claim(400, kLease);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    ASSERT_EQ(rows->size(), 400u);
    const std::vector<Fence> fences = FencesOf(*rows);
    std::vector<Fence> reversed(fences.rbegin(), fences.rend());
    Result<std::vector<std::string>> renewed = std::vector<std::string>{};
    std::thread renew([&] { renewed = other->Renew(reversed, kLease); });
    auto sent = store_->MarkSent(fences);
    renew.join();
    ASSERT_TRUE(sent.ok()) << sent.status().ToString();
    ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
    EXPECT_EQ(sent->size(), 400u);
  }
}

// A reclaim never waits for a row another transaction holds (an outcome write or a renewal in
// progress, which could lock in another order and deadlock): it skips the row, and the next
// reclaim takes it once the lock is gone and the lease is still expired.
TEST_F(PostgresClaimWindowTest, ReclaimSkipsAnExpiredRowThatIsLockedAndTakesItLater) {
  InsertRowsOfKey("k", 1);
  InsertRowsOfKey("j", 1);
  auto rows = store_->Claim(10, kLease);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  for (const OutboxRow& r : *rows) db_->ExpireLease(r.id);
  const std::string locked = rows->front().id;
  db_->Exec("BEGIN");
  db_->Exec("SELECT 1 FROM outbox WHERE id = '" + locked + "' FOR UPDATE");
  auto reclaim = std::async(std::launch::async, [&] { return store_->ReclaimExpired(); });
  const bool returned = reclaim.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  db_->Exec("COMMIT");
  ASSERT_TRUE(returned) << "the reclaim waited for the locked row";
  auto first = reclaim.get();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, 1);
  EXPECT_TRUE(db_->Holds(locked, "state = 'processing'"));
  auto second = store_->ReclaimExpired();
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(*second, 1);
  EXPECT_TRUE(db_->Holds(locked, "state = 'pending'"));
}

// A key walk that went round every key tells the next claims how many keys the share holds
// (ClaimWindowState::NextClaim::share_key_count). While a window holds a row of that many keys, the
// walk could find no head the window missed, so it is skipped; a new key behind that window waits
// until the count is over a second old and a walk runs again.
TEST_F(PostgresClaimWindowTest, WhileTheWindowHoldsEveryKeyTheWalkWaitsUpToASecond) {
  // a, b, a, b, ...: any 6 consecutive rows hold both keys.
  db_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 't', CASE WHEN n % 2 = 0 THEN 'a' ELSE "
      "'b' END, '{}' FROM generate_series(1, 20) AS n");
  // Two heads in a window of 6: short of the limit 3 with rows beyond, so the walk runs, goes
  // round both keys and finds nothing else.
  const auto walked = std::chrono::steady_clock::now();
  auto first = store_->Claim(3, kLease);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->size(), 2u);
  const std::vector<Fence> fences = FencesOf(*first);
  ASSERT_TRUE(store_->MarkSent(fences).ok());
  // A new key, behind 18 rows of a and b.
  db_->Exec("INSERT INTO outbox (topic, key, payload) VALUES ('t', 'late', '{}')");
  // The window holds a and b, both keys the walk saw: the claim takes their heads and no walk
  // looks for `late` (checked only while the count is well under a second old: a machine too
  // loaded to get here in 800 ms cannot tell this apart from the next walk).
  const bool fresh = std::chrono::steady_clock::now() - walked < std::chrono::milliseconds(800);
  std::vector<std::string> heads = ClaimKeys(3);
  if (fresh) {
    EXPECT_THAT(heads, ::testing::UnorderedElementsAre("a", "b"));
  }
  // Once the count is a second old, a walk runs again and finds it.
  std::vector<std::string> claimed;
  if (!fresh) claimed = heads;  // may hold `late` already
  claimed.erase(std::remove_if(claimed.begin(), claimed.end(),
                               [](const std::string& k) { return k != "late"; }),
                claimed.end());
  const auto deadline = walked + std::chrono::seconds(15);
  while (claimed.empty() && std::chrono::steady_clock::now() < deadline) {
    claimed = ClaimKeys(3);
    if (claimed.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_THAT(claimed, ::testing::ElementsAre("late"));
  EXPECT_GE(std::chrono::steady_clock::now() - walked, std::chrono::seconds(1));
}

}  // namespace
}  // namespace queuebox
