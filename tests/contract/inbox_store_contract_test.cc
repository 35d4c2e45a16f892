// The inbox store contract (include/queuebox/inbox.h) on SQLite, PostgreSQL and the in-memory
// twin (testing/memory_inbox_store.h), through InboxUnderTest (inbox_test_support.h):
// - InboxIntakeContractTest: Store (dedup on (source, idempotency_key), duplicates inside one
//   batch, bad input rejected per message, unicode, deep nesting, scheduled_at of §11.5).
// - InboxClaimsContractTest: the relay's side (claim per aggregate, fence, forward in one
//   transaction, lost claims, renew, reclaim, dead). Mirrors QueueBox's OrderingGuaranteeTest
//   inbox cases, ClaimFenceTest and ReclaimStaleTest for the inbox (reference §14.2, §14.3).
// - InboxOperationsContractTest: stats, replay, dead list, retention (RetentionSemanticsTest
//   "inbox age uses created_at, which is the receipt time").
// - InboxSchemaGuardContractTest: the schema guard (SQL stores only: the twin has no schema).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "inbox_test_support.h"
#include "testing/status_matchers.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::InboxUnderTest;
using ::testing::IsEmpty;
using testing::SqlInboxUnderTest;
using testing::StatusIs;
using Kind = InboxStoreOutcome::Kind;

constexpr int64_t kLease = 60000;

NewInboxMessage Msg(std::string key, std::optional<std::string> aggregate = std::nullopt,
                    std::string source = "stripe") {
  NewInboxMessage m;
  m.source = std::move(source);
  m.idempotency_key = std::move(key);
  m.aggregate_id = std::move(aggregate);
  m.event_type = "payment.succeeded";
  m.payload = R"({"id":")" + m.idempotency_key + R"("})";
  return m;
}

// A subject per parameter: "sqlite" and "postgresql" (a migrated store), "memory" (the twin).
class InboxFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    testing::CreateInboxUnderTest(GetParam(), subject_, &sql_);
    if (subject_ == nullptr) return;
    inbox_ = &subject_->inbox();
  }

  std::vector<InboxStoreOutcome> Store(const std::vector<NewInboxMessage>& batch) {
    auto out = inbox_->Store(batch);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? *out : std::vector<InboxStoreOutcome>{};
  }
  // Stores one message; returns its id ("" when it was not stored).
  std::string Add(NewInboxMessage m) {
    auto out = Store({std::move(m)});
    EXPECT_EQ(out.size(), 1u);
    if (out.empty() || out[0].kind != Kind::kStored) return "";
    return out[0].id;
  }
  std::vector<ClaimedInboxRow> Claim(int limit = 100, int64_t lease = kLease) {
    auto rows = inbox_->ClaimPush(limit, lease);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? *rows : std::vector<ClaimedInboxRow>{};
  }
  static std::vector<std::string> Keys(const std::vector<ClaimedInboxRow>& rows) {
    std::vector<std::string> keys;
    for (const auto& r : rows) keys.push_back(r.idempotency_key);
    return keys;
  }
  InboxForward Forward(const ClaimedInboxRow& r, std::string topic = "payments") {
    return {{r.id, r.claim_token}, std::move(topic), R"({"x-inbox-id":")" + r.id + R"("})", 7};
  }
  std::vector<std::string> ForwardAll(const std::vector<ClaimedInboxRow>& rows) {
    std::vector<InboxForward> f;
    for (const auto& r : rows) f.push_back(Forward(r));
    auto ids = inbox_->Forward(f);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? *ids : std::vector<std::string>{};
  }
  std::string Field(const std::string& id, const std::string& col) {
    return subject_->Field(id, col);
  }
  std::string Count(const std::string& table, const std::string& column = "",
                    const std::string& value = "") {
    return subject_->Count(table, column, value);
  }
  void ExpireLease(const std::string& id) { subject_->ExpireLease(id); }
  // Milliseconds between two timestamp columns of inbox row `id` (b - a).
  int64_t MsBetween(const std::string& id, const std::string& a, const std::string& b) {
    return subject_->MsBetween(id, a, b);
  }

  std::unique_ptr<InboxUnderTest> subject_;
  SqlInboxUnderTest* sql_ = nullptr;  // the SQL subject; null for the twin
  InboxStore* inbox_ = nullptr;
};

class InboxIntakeContractTest : public InboxFixture {};
class InboxClaimsContractTest : public InboxFixture {};
class InboxOperationsContractTest : public InboxFixture {};
class InboxSchemaGuardContractTest : public InboxFixture {};

// ---------------------------------------------------------------------------------------------
// Intake

TEST_P(InboxIntakeContractTest, StoresNewMessagesWithEveryFieldAndAnswersDuplicates) {
  NewInboxMessage m = Msg("evt_1", "cus_1");
  m.correlation_id = "corr-1";
  m.headers = R"({"X-Tenant":"acme"})";
  auto first = Store({m, Msg("evt_2")});
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].kind, Kind::kStored);
  EXPECT_EQ(first[1].kind, Kind::kStored);
  EXPECT_EQ(first[0].id.size(), 36u);
  EXPECT_NE(first[0].id, first[1].id);
  const std::string id = first[0].id;
  EXPECT_EQ(Field(id, "source"), "stripe");
  EXPECT_EQ(Field(id, "idempotency_key"), "evt_1");
  EXPECT_EQ(Field(id, "aggregate_id"), "cus_1");
  EXPECT_EQ(Field(id, "event_type"), "payment.succeeded");
  EXPECT_EQ(Field(id, "correlation_id"), "corr-1");
  EXPECT_EQ(nlohmann::json::parse(Field(id, "payload")), nlohmann::json::parse(m.payload));
  EXPECT_EQ(nlohmann::json::parse(Field(id, "headers")), nlohmann::json::parse(m.headers));
  EXPECT_EQ(Field(id, "state"), "pending");
  EXPECT_EQ(Field(id, "consumption"), "push");
  EXPECT_EQ(Field(id, "attempt"), "0");
  EXPECT_EQ(Field(id, "processed_at"), "<null>");
  EXPECT_EQ(Field(id, "claim_token"), "<null>");
  EXPECT_EQ(MsBetween(id, "created_at", "scheduled_at"), 0);

  // The same key again, with another payload: a duplicate, the row unchanged.
  NewInboxMessage again = Msg("evt_1", "cus_9");
  again.payload = R"({"changed":true})";
  auto second = Store({again});
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].kind, Kind::kDuplicate);
  EXPECT_EQ(second[0].id, "");
  EXPECT_EQ(Count("inbox"), "2");
  EXPECT_EQ(Field(id, "aggregate_id"), "cus_1");
}

TEST_P(InboxIntakeContractTest, ADuplicateInsideOneBatchIsStoredOnceAndTheFirstWins) {
  NewInboxMessage a = Msg("evt_1");
  NewInboxMessage a_again = Msg("evt_1");
  a_again.payload = R"({"second":true})";
  auto out = Store({a, Msg("evt_2"), a_again, Msg("evt_2")});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].kind, Kind::kStored);
  EXPECT_EQ(out[1].kind, Kind::kStored);
  EXPECT_EQ(out[2].kind, Kind::kDuplicate);
  EXPECT_EQ(out[3].kind, Kind::kDuplicate);
  EXPECT_EQ(Count("inbox"), "2");
  EXPECT_EQ(nlohmann::json::parse(Field(out[0].id, "payload")), nlohmann::json::parse(a.payload));
}

// A source that ran a transform chose the id ($messageId); the row keeps it. Without one the
// database makes it; an id that is not a lowercase UUID is refused alone.
TEST_P(InboxIntakeContractTest, AnIdChosenByTheSourceIsKept) {
  NewInboxMessage chosen = Msg("evt_1");
  chosen.id = "0b7e1c52-3d6a-4f0e-9a51-6f2d8c9e4b10";
  NewInboxMessage bad = Msg("evt_2");
  bad.id = "0B7E1C52-nope";
  auto out = Store({chosen, bad, Msg("evt_3")});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].kind, Kind::kStored);
  EXPECT_EQ(out[0].id, chosen.id);
  EXPECT_EQ(Field(chosen.id, "idempotency_key"), "evt_1");
  EXPECT_EQ(out[1].kind, Kind::kRejected);
  EXPECT_EQ(out[1].error.message(), "the id is not a UUID");
  EXPECT_EQ(out[2].kind, Kind::kStored);
  EXPECT_EQ(out[2].id.size(), 36u);
  EXPECT_NE(out[2].id, chosen.id);
}

TEST_P(InboxIntakeContractTest, TheKeyIsPerSource) {
  auto out = Store({Msg("evt_1", std::nullopt, "stripe"), Msg("evt_1", std::nullopt, "github")});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, Kind::kStored);
  EXPECT_EQ(out[1].kind, Kind::kStored);
  EXPECT_EQ(Count("inbox"), "2");
}

TEST_P(InboxIntakeContractTest, UnicodeInPayloadKeysAndHeadersIsStoredAsGiven) {
  NewInboxMessage m = Msg("évt_🎉_键", "客户-1", "källa");
  m.event_type = "支払い.成功";
  m.payload = R"({"name":"Zoë 🐙 山田","escaped":"\u00e9\ud83d\ude00","rtl":"שלום"})";
  m.headers = R"({"X-Name":"Ünïcode ✓"})";
  std::string id = Add(m);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Field(id, "idempotency_key"), "évt_🎉_键");
  EXPECT_EQ(Field(id, "aggregate_id"), "客户-1");
  EXPECT_EQ(Field(id, "source"), "källa");
  EXPECT_EQ(Field(id, "event_type"), "支払い.成功");
  nlohmann::json stored = nlohmann::json::parse(Field(id, "payload"));
  EXPECT_EQ(stored["name"], "Zoë 🐙 山田");
  EXPECT_EQ(stored["escaped"], "é😀");
  EXPECT_EQ(nlohmann::json::parse(Field(id, "headers"))["X-Name"], "Ünïcode ✓");
  // 255 characters (not bytes) fit the key column.
  std::string long_key;
  for (int i = 0; i < 255; ++i) long_key += "é";
  EXPECT_FALSE(Add(Msg(long_key)).empty());
}

TEST_P(InboxIntakeContractTest, SixtyFourLevelsOfNestingAreStored) {
  std::string deep;
  for (int i = 0; i < 32; ++i) deep += R"({"a":[)";
  deep += "1";
  for (int i = 0; i < 32; ++i) deep += "]}";
  NewInboxMessage m = Msg("deep");
  m.payload = deep;
  std::string id = Add(m);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(nlohmann::json::parse(Field(id, "payload")), nlohmann::json::parse(deep));
}

TEST_P(InboxIntakeContractTest, BadInputIsRejectedPerMessageWithInvalidArgumentAndTheRestStored) {
  NewInboxMessage not_json = Msg("bad_json");
  not_json.payload = "{\"id\": evt_1";
  NewInboxMessage headers_array = Msg("bad_headers_1");
  headers_array.headers = R"(["a"])";
  NewInboxMessage headers_number = Msg("bad_headers_2");
  headers_number.headers = R"({"X-Count":1})";
  NewInboxMessage long_key = Msg(std::string(256, 'k'));
  NewInboxMessage nul_key = Msg(std::string("a\0b", 3));
  NewInboxMessage bad_utf8 = Msg("\xff\xfe");
  NewInboxMessage nul_json = Msg("nul_json");
  nul_json.payload = R"({"a":"x\u0000y"})";
  NewInboxMessage too_deep = Msg("too_deep");
  too_deep.payload = std::string(1001, '[') + std::string(1001, ']');
  NewInboxMessage empty_key = Msg("");
  NewInboxMessage long_corr = Msg("long_corr");
  long_corr.correlation_id = std::string(129, 'c');
  auto out = Store({Msg("good_1"), not_json, headers_array, headers_number, long_key, nul_key,
                    bad_utf8, nul_json, too_deep, empty_key, long_corr, Msg("good_2")});
  ASSERT_EQ(out.size(), 12u);
  EXPECT_EQ(out[0].kind, Kind::kStored);
  EXPECT_EQ(out[11].kind, Kind::kStored);
  const char* reasons[] = {"the payload is not JSON",
                           "the headers are not a JSON object",
                           "the header 'X-Count' is not a string",
                           "the idempotency key is longer than 255 characters (256)",
                           "the idempotency key contains a NUL character",
                           "the idempotency key is not UTF-8",
                           "the payload contains a NUL character",
                           "the payload nests deeper than 1000 levels",
                           "the idempotency key is empty",
                           "the correlation id is longer than 128 characters (129)"};
  for (size_t i = 1; i <= 10; ++i) {
    EXPECT_EQ(out[i].kind, Kind::kRejected) << i;
    EXPECT_THAT(out[i].error, StatusIs(StatusCode::kInvalidArgument, HasSubstr(reasons[i - 1])))
        << i;
  }
  EXPECT_EQ(Count("inbox"), "2");
}

TEST_P(InboxIntakeContractTest, AnEmptyBatchStoresNothing) {
  auto out = inbox_->Store({});
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(*out, IsEmpty());
}

TEST_P(InboxIntakeContractTest, ADeadMessageIsStoredDeadWithItsErrorAndNoDelay) {
  NewInboxMessage m = Msg("raw_1");
  m.payload = R"({"raw":"not json <xml/>"})";
  m.dead = true;
  m.last_error = "The message body is not JSON";
  m.delay_ms = 60000;
  std::string id = Add(m);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Field(id, "state"), "dead");
  EXPECT_EQ(Field(id, "last_error"), "The message body is not JSON");
  EXPECT_EQ(MsBetween(id, "created_at", "scheduled_at"), 0);
  EXPECT_THAT(Claim(), IsEmpty());
}

TEST_P(InboxIntakeContractTest, ScheduledAtIsTheEarlierOfPublishTimeAndNowPlusTheDelay) {
  NewInboxMessage delayed = Msg("delayed");
  delayed.delay_ms = 30000;
  std::string d = Add(delayed);
  EXPECT_EQ(MsBetween(d, "created_at", "scheduled_at"), 30000);

  NewInboxMessage published = Msg("published");
  published.delay_ms = 5000;
  published.publish_time_ms = 946684800000;  // 2000-01-01T00:00:00Z
  std::string p = Add(published);
  EXPECT_EQ(subject_->ScheduledAtText(p), "2000-01-01T00:00:05.000");

  NewInboxMessage future = Msg("future");
  future.delay_ms = 1000;
  future.publish_time_ms = 32503680000000;  // 3000-01-01: later than now, so now counts
  std::string f = Add(future);
  EXPECT_EQ(MsBetween(f, "created_at", "scheduled_at"), 1000);

  NewInboxMessage negative = Msg("negative");
  negative.delay_ms = -1;
  NewInboxMessage far = Msg("far");
  far.publish_time_ms = 253402300800000;  // 10000-01-01
  auto out = Store({negative, far});
  EXPECT_THAT(out[0].error, StatusIs(StatusCode::kInvalidArgument, "the delay is negative"));
  EXPECT_THAT(out[1].error,
              StatusIs(StatusCode::kInvalidArgument, "the publish time is outside 1970..9999"));
}

TEST_P(InboxIntakeContractTest, PullMessagesAreStoredWithTheirConsumption) {
  NewInboxMessage m = Msg("pull_1", "agg");
  m.consumption = InboxConsumption::kPull;
  std::string id = Add(m);
  EXPECT_EQ(Field(id, "consumption"), "pull");
}

TEST_P(InboxIntakeContractTest, ConcurrentWritersStoreEachKeyOnce) {
  // Four writers, each with its own store (its own connections), store the same 60 keys in
  // different orders and batch sizes at once: each key is one row, stored by exactly one writer.
  constexpr int kKeys = 60;
  std::atomic<int> stored{0}, duplicates{0}, errors{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      auto store = subject_->OpenAnother();
      std::vector<NewInboxMessage> all;
      for (int k = 0; k < kKeys; ++k) {
        int n = w % 2 == 0 ? k : kKeys - 1 - k;
        all.push_back(Msg("evt_" + std::to_string(n)));
      }
      const size_t batch = static_cast<size_t>(w + 3);
      for (size_t i = 0; i < all.size(); i += batch) {
        std::vector<NewInboxMessage> part(
            all.begin() + static_cast<std::ptrdiff_t>(i),
            all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), i + batch)));
        auto out = store->Store(part);
        if (!out.ok()) {
          ADD_FAILURE() << out.status().ToString();
          ++errors;
          continue;
        }
        for (const auto& o : *out) (o.kind == Kind::kStored ? stored : duplicates)++;
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(stored.load(), kKeys);
  EXPECT_EQ(duplicates.load(), 3 * kKeys);
  EXPECT_EQ(Count("inbox"), std::to_string(kKeys));
}

// ---------------------------------------------------------------------------------------------
// Claims

TEST_P(InboxClaimsContractTest, TheClaimTakesOneRowPerAggregateInArrivalOrder) {
  // One batch: created_at follows the input order, so a1 is a's head.
  Store({Msg("a1", "a"), Msg("a2", "a"), Msg("b1", "b"), Msg("n1"), Msg("n2"), Msg("a3", "a")});
  auto rows = Claim();
  EXPECT_THAT(Keys(rows), ElementsAre("a1", "b1", "n1", "n2"));
  EXPECT_THAT(Claim(), IsEmpty()) << "a and b are in flight; no other row is free";
  ASSERT_EQ(ForwardAll(rows).size(), 4u);
  EXPECT_THAT(Keys(Claim()), ElementsAre("a2"));
}

TEST_P(InboxClaimsContractTest, AnAggregateInFlightHoldsBackItsRowsFromEverySource) {
  Add(Msg("s1_1", "agg-1", "s1"));
  auto first = Claim(1);
  ASSERT_THAT(Keys(first), ElementsAre("s1_1"));
  Add(Msg("s2_1", "agg-1", "s2"));
  Add(Msg("s2_2", "agg-2", "s2"));
  EXPECT_THAT(Keys(Claim()), ElementsAre("s2_2"));
  ASSERT_EQ(ForwardAll(first).size(), 1u);
  EXPECT_THAT(Keys(Claim()), ElementsAre("s2_1"));
}

TEST_P(InboxClaimsContractTest, PullRowsAreNeverClaimedAndNeverHoldBackPushRows) {
  NewInboxMessage pull = Msg("pull_1", "agg");
  pull.consumption = InboxConsumption::kPull;
  std::string pull_id = Add(pull);
  NewInboxMessage busy_pull = Msg("pull_2", "agg");
  busy_pull.consumption = InboxConsumption::kPull;
  std::string busy = Add(busy_pull);
  subject_->SetState(busy, "processing");
  subject_->SetLease(busy, -60);
  Add(Msg("push_1", "agg"));
  EXPECT_THAT(Keys(Claim()), ElementsAre("push_1"));
  EXPECT_EQ(Field(pull_id, "state"), "pending");
  // The relay's reclaim leaves an expired pull claim to the pull claim.
  ASSERT_TRUE(inbox_->ReclaimExpired().ok());
  EXPECT_EQ(Field(busy, "state"), "processing");
}

TEST_P(InboxClaimsContractTest, RowsNotYetDueAreNotClaimedAndDueOrderGoesBeforeArrival) {
  NewInboxMessage later = Msg("later", "a");
  later.delay_ms = 3600000;
  Store({later});
  NewInboxMessage old = Msg("old", "a");
  old.publish_time_ms = 946684800000;  // published long ago: due, and first of aggregate a
  Store({old});
  EXPECT_THAT(Keys(Claim()), ElementsAre("old"));
}

TEST_P(InboxClaimsContractTest, TheLimitCapsTheBatchInScheduleOrder) {
  std::vector<NewInboxMessage> batch;
  for (int i = 0; i < 5; ++i)
    batch.push_back(Msg("k" + std::to_string(i), "agg" + std::to_string(i)));
  Store(batch);
  EXPECT_THAT(Keys(Claim(3)), ElementsAre("k0", "k1", "k2"));
  EXPECT_THAT(Keys(Claim(3)), ElementsAre("k3", "k4"));
}

TEST_P(InboxClaimsContractTest, AHotAggregateAheadDoesNotHoldBackTheHeadsOfOthers) {
  // 300 rows of aggregate "hot" arrive first, then one row of each of 8 aggregates and 2 rows
  // without one: the claim's window is full of "hot" rows, so the fallback finds the others.
  std::vector<NewInboxMessage> hot;
  for (int i = 0; i < 300; ++i) hot.push_back(Msg("hot" + std::to_string(i), "hot"));
  Store(hot);
  std::vector<NewInboxMessage> rest;
  for (int i = 0; i < 8; ++i)
    rest.push_back(Msg("c" + std::to_string(i), "cold" + std::to_string(i)));
  rest.push_back(Msg("n0"));
  rest.push_back(Msg("n1"));
  Store(rest);
  EXPECT_THAT(Keys(Claim(5)), ElementsAre("hot0", "c0", "c1", "c2", "c3"));
  EXPECT_THAT(Keys(Claim(10)), ElementsAre("c4", "c5", "c6", "c7", "n0", "n1"));
  EXPECT_THAT(Claim(10), IsEmpty());
}

TEST_P(InboxClaimsContractTest, ForwardWritesTheOutboxRowAndMarksTheInboxRowInOneStep) {
  NewInboxMessage m = Msg("evt_1", "cus_1");
  m.payload = R"({"id":"evt_1","amount":42})";
  std::string id = Add(m);
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, id);
  EXPECT_EQ(rows[0].source, "stripe");
  EXPECT_EQ(rows[0].event_type, "payment.succeeded");
  EXPECT_EQ(Field(id, "state"), "processing");
  EXPECT_NE(Field(id, "claimed_at"), "<null>");
  auto done = ForwardAll(rows);
  EXPECT_THAT(done, ElementsAre(id));
  EXPECT_EQ(Field(id, "state"), "processed");
  EXPECT_NE(Field(id, "processed_at"), "<null>");
  EXPECT_EQ(Field(id, "claim_token"), "<null>");
  ASSERT_EQ(Count("outbox"), "1");
  auto out = subject_->OutboxRows();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].topic, "payments");
  EXPECT_EQ(out[0].key.value_or("<null>"), "cus_1");
  EXPECT_EQ(nlohmann::json::parse(out[0].payload), nlohmann::json::parse(m.payload));
  EXPECT_EQ(nlohmann::json::parse(out[0].headers)["x-inbox-id"], id);
  EXPECT_EQ(out[0].max_attempts, "7");
  EXPECT_EQ(out[0].state, "pending");
  EXPECT_EQ(out[0].attempt, "0");
}

TEST_P(InboxClaimsContractTest, ARowWithoutAnAggregateBecomesAnUnkeyedOutboxRow) {
  Add(Msg("n1"));
  ASSERT_EQ(ForwardAll(Claim()).size(), 1u);
  auto out = subject_->OutboxRows();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].key.value_or("<none>"), "<none>");
}

TEST_P(InboxClaimsContractTest, AStaleOwnerForwardsNothingAfterReclaimAndANewClaim) {
  std::string id = Add(Msg("evt_1", "a"));
  auto stale = Claim();
  ASSERT_EQ(stale.size(), 1u);
  ExpireLease(id);
  ASSERT_EQ(*inbox_->ReclaimExpired(), 1);
  EXPECT_EQ(Field(id, "state"), "pending");
  EXPECT_EQ(Field(id, "claimed_at"), "<null>");
  EXPECT_EQ(Field(id, "attempt"), "0");
  auto fresh = Claim();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_NE(fresh[0].claim_token, stale[0].claim_token);
  EXPECT_THAT(ForwardAll(stale), IsEmpty());
  EXPECT_EQ(Count("outbox"), "0") << "a lost claim inserts nothing";
  EXPECT_EQ(Field(id, "state"), "processing");
  EXPECT_THAT(ForwardAll(fresh), ElementsAre(id));
  EXPECT_EQ(Count("outbox"), "1");
  EXPECT_THAT(ForwardAll(fresh), IsEmpty()) << "never a second outbox row for one inbox row";
  EXPECT_EQ(Count("outbox"), "1");
}

TEST_P(InboxClaimsContractTest, AnExpiredLeaseCannotForwardEvenBeforeReclaim) {
  std::string id = Add(Msg("evt_1"));
  auto rows = Claim();
  ExpireLease(id);
  EXPECT_THAT(ForwardAll(rows), IsEmpty());
  EXPECT_EQ(Count("outbox"), "0");
  EXPECT_EQ(Field(id, "state"), "processing");
}

TEST_P(InboxClaimsContractTest, ABatchForwardChangesOnlyTheRowsStillOwned) {
  Store({Msg("k1", "a"), Msg("k2", "b"), Msg("k3", "c")});
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 3u);
  ExpireLease(rows[1].id);
  auto done = ForwardAll(rows);
  EXPECT_THAT(std::set<std::string>(done.begin(), done.end()),
              (std::set<std::string>{rows[0].id, rows[2].id}));
  EXPECT_EQ(Count("outbox"), "2");
  EXPECT_EQ(Count("outbox", "key", "b"), "0");
  std::vector<InboxForward> none;
  EXPECT_THAT(*inbox_->Forward(none), IsEmpty());
}

TEST_P(InboxClaimsContractTest, RenewExtendsTheLeaseAndALostClaimIsNotRenewed) {
  Store({Msg("k1", "a"), Msg("k2", "b")});
  auto rows = Claim(10, 2000);
  ASSERT_EQ(rows.size(), 2u);
  ExpireLease(rows[1].id);
  std::vector<Fence> fences{{rows[0].id, rows[0].claim_token}, {rows[1].id, rows[1].claim_token}};
  auto renewed = inbox_->Renew(fences, 3600000);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_THAT(*renewed, ElementsAre(rows[0].id));
  EXPECT_TRUE(subject_->LeaseLaterThanNowPlus(rows[0].id, 3000));
}

TEST_P(InboxClaimsContractTest, MarkDeadIsFencedAndStoresTheError) {
  Store({Msg("k1", "a"), Msg("k2", "a")});
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 1u);
  std::vector<DeadOrder> wrong{{{rows[0].id, "00000000-0000-4000-8000-000000000000"}, "x"}};
  EXPECT_THAT(*inbox_->MarkDead(wrong), IsEmpty());
  std::vector<DeadOrder> orders{{{rows[0].id, rows[0].claim_token}, "topic rendered empty"}};
  EXPECT_THAT(*inbox_->MarkDead(orders), ElementsAre(rows[0].id));
  EXPECT_EQ(Field(rows[0].id, "state"), "dead");
  EXPECT_EQ(Field(rows[0].id, "last_error"), "topic rendered empty");
  EXPECT_THAT(Keys(Claim()), ElementsAre("k2")) << "a dead row releases its aggregate";
}

TEST_P(InboxClaimsContractTest, ReclaimTakesProcessingPushRowsWithoutALeaseAndLeavesLiveOnes) {
  Store({Msg("k1", "a"), Msg("k2", "b")});
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 2u);
  subject_->SetLease(rows[0].id, std::nullopt);
  EXPECT_EQ(*inbox_->ReclaimExpired(), 1);
  EXPECT_EQ(Field(rows[0].id, "state"), "pending");
  EXPECT_EQ(Field(rows[1].id, "state"), "processing");
}

TEST_P(InboxClaimsContractTest, ClaimRejectsABadLimitOrLease) {
  EXPECT_THAT(inbox_->ClaimPush(0, kLease), StatusIs(StatusCode::kInvalidArgument));
  EXPECT_THAT(inbox_->ClaimPush(1, 0), StatusIs(StatusCode::kInvalidArgument));
}

TEST_P(InboxClaimsContractTest, ConcurrentClaimersNeverHaveTwoRowsOfOneAggregateInFlight) {
  // The database itself checks the rule: a unique index over the aggregate of push rows in
  // `processing` fails any claim that would put a second row of an aggregate in flight.
  subject_->RefuseTwoInFlight();
  constexpr int kAggregates = 12, kPerAggregate = 25;
  for (int n = 0; n < kPerAggregate; ++n) {
    std::vector<NewInboxMessage> batch;
    for (int a = 0; a < kAggregates; ++a) {
      NewInboxMessage m =
          Msg("a" + std::to_string(a) + "_" + std::to_string(n), "agg" + std::to_string(a));
      m.payload = R"({"n":)" + std::to_string(n) + "}";
      batch.push_back(m);
    }
    Store(batch);
  }
  std::atomic<int> errors{0};
  std::vector<std::thread> relays;
  for (int r = 0; r < 4; ++r) {
    relays.emplace_back([&] {
      auto store = subject_->OpenAnother();
      for (int idle = 0; idle < 3;) {
        auto rows = store->ClaimPush(5, kLease);
        if (!rows.ok()) {
          ADD_FAILURE() << rows.status().ToString();
          ++errors;
          return;
        }
        if (rows->empty()) {
          ++idle;
          std::this_thread::yield();
          continue;
        }
        idle = 0;
        std::vector<InboxForward> f;
        for (const auto& row : *rows) f.push_back(Forward(row));
        auto done = store->Forward(f);
        if (!done.ok() || done->size() != f.size()) {
          ADD_FAILURE() << done.status().ToString();
          ++errors;
          return;
        }
      }
    });
  }
  for (auto& t : relays) t.join();
  EXPECT_EQ(errors.load(), 0);
  const int total = kAggregates * kPerAggregate;
  EXPECT_EQ(Count("inbox", "state", "processed"), std::to_string(total));
  EXPECT_EQ(Count("outbox"), std::to_string(total));
  // Each aggregate's outbox rows are in its arrival order (the outbox key order).
  const std::vector<testing::ForwardedOutboxRow> outbox = subject_->OutboxRows();
  for (int a = 0; a < kAggregates; ++a) {
    std::string agg = "agg" + std::to_string(a);
    std::vector<std::string> rows;  // payload.n of the aggregate's rows, in sequence order
    for (const auto& row : outbox) {
      if (row.key == agg) rows.push_back(nlohmann::json::parse(row.payload)["n"].dump());
    }
    ASSERT_EQ(rows.size(), static_cast<size_t>(kPerAggregate));
    for (int n = 0; n < kPerAggregate; ++n)
      EXPECT_EQ(rows[static_cast<size_t>(n)], std::to_string(n));
  }
}

// ---------------------------------------------------------------------------------------------
// Operations

TEST_P(InboxOperationsContractTest, StatsCountRowsPerSourceAndStateAndTheOldestPendingAge) {
  Store({Msg("k1", "a", "s1"), Msg("k2", "a", "s1"), Msg("k3", std::nullopt, "s2")});
  NewInboxMessage pull = Msg("p1", std::nullopt, "s3");
  pull.consumption = InboxConsumption::kPull;
  Store({pull});
  ASSERT_EQ(ForwardAll(Claim(1)).size(), 1u);
  subject_->SetCreatedAt(subject_->IdOfKey("k2"), -120);
  subject_->SetCreatedAt(subject_->IdOfKey("p1"), -600);
  auto stats = inbox_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->rows_by_source_state["s1"]["processed"], 1);
  EXPECT_EQ(stats->rows_by_source_state["s1"]["pending"], 1);
  EXPECT_EQ(stats->rows_by_source_state["s2"]["pending"], 1);
  EXPECT_EQ(stats->rows_by_source_state["s3"]["pending"], 1);
  // The oldest pending push row (pull rows are the application's to consume).
  EXPECT_GE(stats->oldest_pending_age_seconds, 119.0);
  EXPECT_LT(stats->oldest_pending_age_seconds, 500.0);
  auto gauge = inbox_->OldestPendingAgeSeconds();
  ASSERT_TRUE(gauge.ok()) << gauge.status().ToString();
  EXPECT_GE(*gauge, 119.0);
  EXPECT_LT(*gauge, 500.0);
}

TEST_P(InboxOperationsContractTest, ReplayMovesProcessedAndDeadRowsAndNeverActiveOnes) {
  Store({Msg("k1", "a"), Msg("k2", "b"), Msg("k3", "c"), Msg("k4", "d")});
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 4u);
  ASSERT_EQ(inbox_->Forward(std::vector<InboxForward>{Forward(rows[0])})->size(), 1u);
  std::vector<DeadOrder> dead{{{rows[1].id, rows[1].claim_token}, "boom"}};
  ASSERT_EQ(inbox_->MarkDead(dead)->size(), 1u);
  Add(Msg("k5", "e"));  // pending
  InboxReplayFilter all;
  all.created_after = "2000-01-01T00:00:00Z";
  auto moved = inbox_->Replay(all);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, 2);
  for (const auto& id : {rows[0].id, rows[1].id}) {
    EXPECT_EQ(Field(id, "state"), "pending");
    EXPECT_EQ(Field(id, "processed_at"), "<null>");
    EXPECT_EQ(Field(id, "last_error"), "<null>");
    EXPECT_EQ(Field(id, "attempt"), "0");
  }
  EXPECT_EQ(Field(rows[2].id, "state"), "processing");
  // A replayed push row is forwarded again: a new outbox row.
  ExpireLease(rows[2].id);
  ExpireLease(rows[3].id);
  ASSERT_TRUE(inbox_->ReclaimExpired().ok());
  EXPECT_EQ(ForwardAll(Claim()).size(), 5u);
  EXPECT_EQ(Count("outbox"), "6");
}

TEST_P(InboxOperationsContractTest, ReplayFiltersByIdsSourcesAndCreatedTime) {
  Store({Msg("k1", "a", "s1"), Msg("k2", "b", "s2"), Msg("k3", "c", "s2")});
  auto rows = Claim();
  ASSERT_EQ(ForwardAll(rows).size(), 3u);
  InboxReplayFilter by_id;
  by_id.ids = std::vector<std::string>{rows[0].id};
  EXPECT_EQ(*inbox_->Replay(by_id), 1);
  InboxReplayFilter empty;
  empty.ids = std::vector<std::string>{};
  EXPECT_EQ(*inbox_->Replay(empty), 0);
  InboxReplayFilter by_source;
  by_source.sources = std::vector<std::string>{"s2"};
  by_source.created_before = "2000-01-01T00:00:00Z";
  EXPECT_EQ(*inbox_->Replay(by_source), 0);
  by_source.created_before.reset();
  EXPECT_EQ(*inbox_->Replay(by_source), 2);
  InboxReplayFilter bad;
  bad.created_after = "yesterday";
  EXPECT_THAT(inbox_->Replay(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("createdAfter")));
}

TEST_P(InboxOperationsContractTest, ListDeadIsNewestFirst) {
  NewInboxMessage m1 = Msg("raw_1", "agg");
  m1.dead = true;
  m1.last_error = "not JSON";
  std::string older = Add(m1);
  subject_->SetCreatedAt(older, -60);
  NewInboxMessage m2 = Msg("raw_2");
  m2.dead = true;
  m2.last_error = "transform failed";
  std::string newer = Add(m2);
  auto dead = inbox_->ListDead(10);
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  ASSERT_EQ(dead->size(), 2u);
  EXPECT_EQ((*dead)[0].id, newer);
  EXPECT_EQ((*dead)[0].last_error, "transform failed");
  EXPECT_EQ((*dead)[1].id, older);
  EXPECT_EQ((*dead)[1].aggregate_id, "agg");
  EXPECT_EQ((*dead)[1].source, "stripe");
  EXPECT_EQ((*dead)[1].idempotency_key, "raw_1");
  EXPECT_THAT(inbox_->ListDead(0), StatusIs(StatusCode::kInvalidArgument));
}

TEST_P(InboxOperationsContractTest, RetentionRefusesActiveStates) {
  for (const char* state : {"pending", "processing", "sent"}) {
    EXPECT_THAT(inbox_->DeleteOlderThan(state, 0, 100),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("Cannot delete active work")));
    EXPECT_THAT(inbox_->DeleteBeyondCount(state, 0, 100),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr("Cannot delete active work")));
  }
}

TEST_P(InboxOperationsContractTest, RetentionAgeUsesCreatedAtWhichIsTheReceiptTime) {
  Store({Msg("old", "a"), Msg("recent", "b"), Msg("old_pending", "c")});
  auto rows = Claim(2);
  ASSERT_EQ(ForwardAll(rows).size(), 2u);
  // "old" was received a day ago and processed just now; "recent" received now.
  subject_->SetCreatedAt(subject_->IdOfKey("old"), -86400);
  subject_->SetCreatedAt(subject_->IdOfKey("old_pending"), -86400);
  EXPECT_EQ(*inbox_->DeleteOlderThan("processed", 3600000, 100), 1);
  EXPECT_EQ(Count("inbox", "idempotency_key", "old"), "0");
  EXPECT_EQ(Count("inbox", "idempotency_key", "recent"), "1");
  EXPECT_EQ(Count("inbox", "idempotency_key", "old_pending"), "1") << "never an active row";
  // Deleting a row ends its dedup: the key is new again.
  EXPECT_EQ(Store({Msg("old", "a")})[0].kind, Kind::kStored);
}

TEST_P(InboxOperationsContractTest, RetentionAgeDeletesInBatchesAndCountKeepsTheNewest) {
  std::vector<NewInboxMessage> batch;
  for (int i = 0; i < 5; ++i) {
    NewInboxMessage m = Msg("d" + std::to_string(i));
    m.dead = true;
    m.last_error = "x";
    batch.push_back(m);
  }
  auto out = Store(batch);
  for (int i = 0; i < 5; ++i) {
    subject_->SetCreatedAt(out[static_cast<size_t>(i)].id, -3600 * (i + 1));
  }
  EXPECT_EQ(*inbox_->DeleteBeyondCount("dead", 3, 1), 1);
  EXPECT_EQ(*inbox_->DeleteBeyondCount("dead", 3, 10), 1);
  EXPECT_EQ(Count("inbox", "state", "dead"), "3");
  EXPECT_EQ(Field(out[0].id, "state"), "dead") << "the newest are kept";
  EXPECT_EQ(Field(out[4].id, "state"), "");
  EXPECT_EQ(*inbox_->DeleteOlderThan("dead", 1000, 2), 2);
  EXPECT_EQ(*inbox_->DeleteOlderThan("dead", 1000, 2), 1);
  EXPECT_EQ(Count("inbox"), "0");
}

TEST_P(InboxSchemaGuardContractTest, TheSchemaGuardNamesAMissingHeadersColumnAndATableThatIsNot) {
  testing::StoreDb* db_ = &sql_->db();
  if (db_->pg()) {
    db_->Exec("ALTER TABLE inbox DROP COLUMN headers");
    EXPECT_THAT(inbox_->CheckSchema(),
                StatusIs(StatusCode::kFailedPrecondition,
                         "The inbox table 'inbox' has no column 'headers'. QueueBox stores the "
                         "message headers there. Add the column, then start QueueBox again: "
                         "ALTER TABLE \"inbox\" ADD COLUMN \"headers\" JSONB NOT NULL DEFAULT "
                         "'{}';"));
  } else {
    db_->Exec("ALTER TABLE inbox DROP COLUMN headers");
    EXPECT_THAT(inbox_->CheckSchema(),
                StatusIs(StatusCode::kFailedPrecondition,
                         HasSubstr("Add the column, then start QueueBox again: ALTER TABLE "
                                   "\"inbox\" ADD COLUMN \"headers\" TEXT NOT NULL DEFAULT '{}'")));
  }
  db_->Exec("DROP TABLE inbox");
  EXPECT_THAT(inbox_->CheckSchema(),
              StatusIs(StatusCode::kNotFound, HasSubstr("The inbox table 'inbox' does not exist")));
}

// ---------------------------------------------------------------------------------------------
// The attempt history: a forward that makes its row dead leaves an attempt (row_table inbox)

class InboxAttemptHistoryTest : public InboxFixture {
 protected:
  void SetUp() override {
    InboxFixture::SetUp();
    if (HasFatalFailure() || IsSkipped() || sql_ == nullptr) return;
    ASSERT_TRUE(sql_->store().EnableAttemptHistory().ok());
  }
  std::vector<AttemptRow> Attempts(const std::string& id) {
    auto rows = sql_->store().Attempts(id);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? *rows : std::vector<AttemptRow>{};
  }
};

TEST_P(InboxAttemptHistoryTest, AFencedMarkDeadRecordsTheAttemptWithItsError) {
  Store({Msg("k1", "a"), Msg("k2", "b")});
  auto rows = Claim();
  ASSERT_EQ(rows.size(), 2u);
  std::vector<DeadOrder> orders{
      {{rows[0].id, rows[0].claim_token, AttemptRecord{rows[0].attempt, {}, -1, {}}},
       "The topic template of source 'stripe' rendered empty"},
      {{rows[1].id, "00000000-0000-4000-8000-000000000000", AttemptRecord{}}, "lost"}};
  EXPECT_THAT(*inbox_->MarkDead(orders), ElementsAre(rows[0].id));
  auto attempts = Attempts(rows[0].id);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].row_table, "inbox");
  EXPECT_EQ(attempts[0].outcome, "dead");
  EXPECT_EQ(attempts[0].destination, std::nullopt);
  EXPECT_EQ(attempts[0].error, "The topic template of source 'stripe' rendered empty");
  EXPECT_THAT(Attempts(rows[1].id), IsEmpty()) << "a lost claim records nothing";
}

TEST_P(InboxAttemptHistoryTest, AOneTransactionForwardRecordsOnlyTheRowsItMadeDead) {
  const std::string ok = Add(Msg("k1", "a")), bad = Add(Msg("k2", "b"));
  auto due = inbox_->ForwardDue(10, [&](const ClaimedInboxRow& row) {
    InboxForwardPlan plan;
    plan.forward.topic = "payments";
    plan.forward.headers = "{}";
    if (row.id == bad) plan.dead_error = "rendered empty";
    return plan;
  });
  ASSERT_TRUE(due.ok()) << due.status().ToString();
  EXPECT_THAT(due->dead, ElementsAre(bad));
  EXPECT_THAT(Attempts(ok), IsEmpty());
  auto attempts = Attempts(bad);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].row_table, "inbox");
  EXPECT_EQ(attempts[0].error, "rendered empty");
  // Retention deletes the row's attempts with it.
  subject_->SetCreatedAt(bad, -3600);
  EXPECT_EQ(*inbox_->DeleteOlderThan("dead", 1000, 10), 1);
  EXPECT_THAT(Attempts(bad), IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Dialects, InboxAttemptHistoryTest,
                         ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(Stores, InboxIntakeContractTest,
                         ::testing::Values("sqlite", "postgresql", "memory"),
                         [](const auto& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(Stores, InboxClaimsContractTest,
                         ::testing::Values("sqlite", "postgresql", "memory"),
                         [](const auto& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(Stores, InboxOperationsContractTest,
                         ::testing::Values("sqlite", "postgresql", "memory"),
                         [](const auto& p) { return p.param; });
INSTANTIATE_TEST_SUITE_P(Dialects, InboxSchemaGuardContractTest,
                         ::testing::Values("sqlite", "postgresql"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace queuebox
