// The fenced writes' statements and bound arrays (pg_fenced.h): the texts are the ones the outbox
// and inbox stores wrote separately before (their plans are in docs/claim-plans.md), the arrays
// in id order without unmatchable fences. Their behaviour on PostgreSQL is proved by
// tests/contract (store_contract_test.cc, inbox_store_contract_test.cc).
#include "store/postgres/pg_fenced.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace queuebox::store {
namespace {

using ::queuebox::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr const char* kFencedA = "11111111-1111-1111-1111-111111111111";
constexpr const char* kFencedB = "22222222-2222-2222-2222-222222222222";
constexpr const char* kFencedToken = "33333333-3333-3333-3333-333333333333";

// Records each statement a PgFencedWrites runs and answers with `rows`.
struct FencedCall {
  std::string tmpl;
  std::vector<SqlParam> params;
  PgConnection::Plan plan;
};

struct FencedRecorder {
  std::vector<FencedCall> calls;
  SqlRows rows;
  int64_t changes = 0;

  PgFencedWrites::Runner runner() {
    return [this](const std::string& tmpl, const std::vector<SqlParam>& params, int64_t* changed,
                  PgConnection::Plan plan) -> Result<SqlRows> {
      calls.push_back({tmpl, params, plan});
      if (changed != nullptr) *changed = changes;
      return rows;
    };
  }
};

FencedTable OutboxFenced() { return {"o", ", {updated_at} = clock_timestamp()", ""}; }
FencedTable InboxFenced() { return {"i", "", "r.{consumption} = 'push' AND "}; }

TEST(PgFencedTest, TheOutboxStatementsAreTheOutboxStoresOwn) {
  FencedRecorder rec;
  PgFencedWrites fenced(OutboxFenced(), rec.runner());
  EXPECT_EQ(fenced.mark_dead_sql(),
            "UPDATE {T} AS o SET {state} = 'dead', {claimed_at} = NULL, {claim_token} = NULL, "
            "{lease_expires_at} = NULL, {last_error} = f.qb_error, {updated_at} = "
            "clock_timestamp() FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS f(qb_id, "
            "qb_token, qb_error) WHERE o.{id} = f.qb_id AND o.{claim_token} = f.qb_token AND "
            "o.{state} = 'processing' AND o.{lease_expires_at} > clock_timestamp() RETURNING "
            "o.{id}::text");
  EXPECT_EQ(fenced.renew_sql(),
            "UPDATE {T} AS o SET {lease_expires_at} = clock_timestamp() + $3::bigint * interval "
            "'1 millisecond' FROM unnest($1::uuid[], $2::uuid[]) AS f(qb_id, qb_token) WHERE "
            "o.{id} = f.qb_id AND o.{claim_token} = f.qb_token AND o.{state} = 'processing' AND "
            "o.{lease_expires_at} > clock_timestamp() RETURNING o.{id}::text");
  EXPECT_EQ(fenced.reclaim_sql(),
            "UPDATE {T} SET {state} = 'pending', {claimed_at} = NULL, {updated_at} = "
            "clock_timestamp() WHERE {id} IN (SELECT r.{id} FROM {T} AS r WHERE r.{state} = "
            "'processing' AND (r.{lease_expires_at} IS NULL OR r.{lease_expires_at} <= "
            "clock_timestamp()) FOR UPDATE OF r SKIP LOCKED)");
}

TEST(PgFencedTest, TheInboxStatementsAreTheInboxStoresOwn) {
  FencedRecorder rec;
  PgFencedWrites fenced(InboxFenced(), rec.runner());
  EXPECT_EQ(fenced.mark_dead_sql(),
            "UPDATE {T} AS i SET {state} = 'dead', {claimed_at} = NULL, {claim_token} = NULL, "
            "{lease_expires_at} = NULL, {last_error} = f.qb_error FROM unnest($1::uuid[], "
            "$2::uuid[], $3::text[]) AS f(qb_id, qb_token, qb_error) WHERE i.{id} = f.qb_id AND "
            "i.{claim_token} = f.qb_token AND i.{state} = 'processing' AND i.{lease_expires_at} > "
            "clock_timestamp() RETURNING i.{id}::text");
  EXPECT_EQ(fenced.reclaim_sql(),
            "UPDATE {T} SET {state} = 'pending', {claimed_at} = NULL WHERE {id} IN (SELECT "
            "r.{id} FROM {T} AS r WHERE r.{state} = 'processing' AND r.{consumption} = 'push' AND "
            "(r.{lease_expires_at} IS NULL OR r.{lease_expires_at} <= clock_timestamp()) FOR "
            "UPDATE OF r SKIP LOCKED)");
  EXPECT_EQ(fenced.FencePredicate("qb_f"),
            "i.{id} = qb_f.qb_id AND i.{claim_token} = qb_f.qb_token AND i.{state} = "
            "'processing' AND i.{lease_expires_at} > clock_timestamp()");
}

TEST(PgFencedTest, MarkDeadBindsItsArraysInIdOrderWithoutUnmatchableFences) {
  FencedRecorder rec;
  rec.rows = {{std::string(kFencedA)}};
  PgFencedWrites fenced(OutboxFenced(), rec.runner());
  std::vector<DeadOrder> orders = {{{kFencedB, kFencedToken}, "b failed"},
                                   {{"not-a-uuid", kFencedToken}, "never matches"},
                                   {{kFencedA, kFencedToken}, "a \"failed\""}};
  auto ids = fenced.MarkDead(orders);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_THAT(*ids, ElementsAre(kFencedA));
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(rec.calls[0].tmpl, fenced.mark_dead_sql());
  EXPECT_EQ(rec.calls[0].plan, PgConnection::Plan::kPerCall);
  const std::string both = std::string("{\"") + kFencedToken + "\",\"" + kFencedToken + "\"}";
  EXPECT_THAT(
      rec.calls[0].params,
      ElementsAre(SqlParam(std::string("{\"") + kFencedA + "\",\"" + kFencedB + "\"}"),
                  SqlParam(both), SqlParam(std::string("{\"a \\\"failed\\\"\",\"b failed\"}"))));
}

TEST(PgFencedTest, AnEmptyBatchRunsNothingAndRenewChecksTheLease) {
  FencedRecorder rec;
  PgFencedWrites fenced(InboxFenced(), rec.runner());
  std::vector<Fence> none = {{"not-a-uuid", kFencedToken}};
  auto dead = fenced.MarkDead({});
  ASSERT_TRUE(dead.ok());
  EXPECT_THAT(*dead, IsEmpty());
  auto renewed = fenced.Renew(none, /*lease_ms=*/0);  // nothing to renew: no lease check
  ASSERT_TRUE(renewed.ok());
  EXPECT_THAT(rec.calls, IsEmpty());
  std::vector<Fence> one = {{kFencedA, kFencedToken}};
  EXPECT_THAT(fenced.Renew(one, 0).status(), StatusIs(StatusCode::kInvalidArgument));
  ASSERT_TRUE(fenced.Renew(one, 5000).ok());
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(rec.calls[0].tmpl, fenced.renew_sql());
  EXPECT_EQ(rec.calls[0].params.back(), SqlParam(int64_t{5000}));
}

TEST(PgFencedTest, ReclaimReturnsTheRowsChangedOnTheCachedPlan) {
  FencedRecorder rec;
  rec.changes = 3;
  PgFencedWrites fenced(InboxFenced(), rec.runner());
  auto changed = fenced.ReclaimExpired();
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, 3);
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(rec.calls[0].tmpl, fenced.reclaim_sql());
  EXPECT_EQ(rec.calls[0].plan, PgConnection::Plan::kCached);
}

}  // namespace
}  // namespace queuebox::store
