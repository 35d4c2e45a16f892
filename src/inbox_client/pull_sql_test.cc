#include "inbox_client/pull_sql.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "queuebox/inbox/pull_worker.h"

namespace queuebox::inbox {
namespace {

using internal::PullSqlText;
using internal::PullStatement;
using internal::RenderPullSql;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(PullSqlTest, EmbedsTheRepositoryFiles) {
  for (Dialect d : {Dialect::kPostgreSQL, Dialect::kSQLite}) {
    for (PullStatement s : {PullStatement::kClaim, PullStatement::kRenew, PullStatement::kComplete,
                            PullStatement::kRetry, PullStatement::kDead}) {
      EXPECT_THAT(PullSqlText(d, s), HasSubstr("UPDATE inbox"));
    }
  }
  EXPECT_THAT(PullSqlText(Dialect::kPostgreSQL, PullStatement::kClaim),
              HasSubstr("FOR UPDATE OF row_ SKIP LOCKED"));
}

TEST(PullSqlTest, RendersParametersAsPositionalMarkersOnePerName) {
  auto pg = RenderPullSql(
      "UPDATE inbox SET lease_expires_at = :lease_ms WHERE id = :id AND "
      "claim_token = :token AND x = :id;",
      Dialect::kPostgreSQL, InboxSchema{});
  ASSERT_TRUE(pg.ok()) << pg.status().message();
  EXPECT_EQ(pg->sql(),
            "UPDATE \"inbox\" SET \"lease_expires_at\" = $1 WHERE \"id\" = $2 AND "
            "\"claim_token\" = $3 AND x = $2");
  EXPECT_THAT(pg->names(), ::testing::ElementsAre("lease_ms", "id", "token"));
  auto lite = RenderPullSql("SELECT :a, :b, :a", Dialect::kSQLite, InboxSchema{});
  ASSERT_TRUE(lite.ok());
  EXPECT_EQ(lite->sql(), "SELECT ?1, ?2, ?1");
}

TEST(PullSqlTest, MapsTableAndColumnsButNotQuotesCastsOrComments) {
  InboxSchema s;
  s.schema = "app";
  s.table = "my_inbox";
  s.id = "msg_id";
  s.state = "status";
  auto r = RenderPullSql(
      "-- state of the inbox\nSELECT b.id::text, 'state inbox', \"id\" FROM inbox AS b "
      "WHERE b.state = 'pending' AND coalesce(b.id, '#' || b.id::text) IS NOT NULL",
      Dialect::kPostgreSQL, s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->sql(),
            "SELECT b.\"msg_id\"::text, 'state inbox', \"id\" FROM \"app\".\"my_inbox\" AS b "
            "WHERE b.\"status\" = 'pending' AND coalesce(b.\"msg_id\", '#' || "
            "b.\"msg_id\"::text) IS NOT NULL");
}

TEST(PullSqlTest, EveryFileRendersUnderAMappedSchemaWithoutDefaultNamesLeft) {
  InboxSchema s;
  s.table = "t_in";
  s.id = "c_id";
  s.source = "c_source";
  s.state = "c_state";
  s.scheduled_at = "c_due";
  s.aggregate_id = "c_agg";
  for (Dialect d : {Dialect::kPostgreSQL, Dialect::kSQLite}) {
    auto claim = RenderPullSql(PullSqlText(d, PullStatement::kClaim), d, s);
    ASSERT_TRUE(claim.ok()) << claim.status().message();
    EXPECT_THAT(claim->sql(), Not(HasSubstr(" inbox ")));
    EXPECT_THAT(claim->sql(), Not(HasSubstr(".state ")));
    EXPECT_THAT(claim->sql(), HasSubstr("\"t_in\""));
    EXPECT_THAT(claim->names(),
                ::testing::UnorderedElementsAre("source", "batch", "lease_ms", "cand_limit"));
  }
}

TEST(PullSqlTest, BindRefusesUnknownMissingAndDoubleParameters) {
  auto r = RenderPullSql("SELECT :a, :b", Dialect::kPostgreSQL, InboxSchema{});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Bind({{"a", int64_t{1}}, {"b", std::string("x")}}).ok());
  EXPECT_EQ(r->Bind({{"a", int64_t{1}}}).status().code(), StatusCode::kInternal);
  EXPECT_EQ(r->Bind({{"a", int64_t{1}}, {"b", {}}, {"c", {}}}).status().code(),
            StatusCode::kInternal);
  EXPECT_EQ(r->Bind({{"a", int64_t{1}}, {"a", int64_t{2}}, {"b", {}}}).status().code(),
            StatusCode::kInternal);
}

TEST(PullSqlTest, RefusesANameThatIsNotAPlainIdentifier) {
  InboxSchema s;
  s.last_error = "last_error\"; DROP TABLE x; --";
  auto r = RenderPullSql("SELECT 1", Dialect::kPostgreSQL, s);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("InboxSchema.last_error"));
  s = InboxSchema{};
  s.schema = "1abc";
  EXPECT_THAT(RenderPullSql("SELECT 1", Dialect::kPostgreSQL, s).status().message(),
              HasSubstr("InboxSchema.schema"));
  s = InboxSchema{};
  s.table = std::string(64, 'a');
  EXPECT_THAT(RenderPullSql("SELECT 1", Dialect::kPostgreSQL, s).status().message(),
              HasSubstr("InboxSchema.table"));
}

TEST(PullSqlTest, AnUnclosedQuoteIsAnError) {
  EXPECT_EQ(RenderPullSql("SELECT 'x", Dialect::kPostgreSQL, InboxSchema{}).status().code(),
            StatusCode::kInternal);
}

TEST(PullWorkerPolicyTest, CandidateLimitIsThreeBatchesBetweenFiftyAndFiveHundred) {
  EXPECT_EQ(CandidateLimit(1), 50);
  EXPECT_EQ(CandidateLimit(16), 50);
  EXPECT_EQ(CandidateLimit(17), 51);
  EXPECT_EQ(CandidateLimit(166), 498);
  EXPECT_EQ(CandidateLimit(167), 500);
  EXPECT_EQ(CandidateLimit(10000), 500);
}

TEST(PullWorkerPolicyTest, DefaultPolicyDoublesUpToTheCeilingThenDeadLetters) {
  const RetryPolicy policy = DefaultRetryPolicy(5, 1000, 5000, 0.0);
  Message m;
  const int64_t expected[] = {1000, 2000, 4000, 5000, 5000};
  for (int attempt = 0; attempt < 5; ++attempt) {
    m.attempt = attempt;
    const FailureAction a = policy(m, Internal("x"));
    EXPECT_TRUE(a.retry) << attempt;
    EXPECT_EQ(a.delay_ms, expected[attempt]) << attempt;
  }
  m.attempt = 5;  // five retries spent: six deliveries, then the dead letter
  EXPECT_FALSE(policy(m, Internal("x")).retry);
  m.attempt = 1000;  // no overflow far past the ceiling
  EXPECT_FALSE(policy(m, Internal("x")).retry);
  EXPECT_EQ(DefaultRetryPolicy(2000, 1000, 300000, 0.0)(m, Internal("x")).delay_ms, 300000);
}

TEST(PullWorkerPolicyTest, DefaultPolicyJitterStaysInItsBand) {
  const RetryPolicy policy = DefaultRetryPolicy();  // 5, 1 s, 5 min, 0.2
  Message m;
  m.attempt = 2;  // 4 s +- 20 %
  for (int i = 0; i < 200; ++i) {
    const FailureAction a = policy(m, Internal("x"));
    ASSERT_TRUE(a.retry);
    EXPECT_GE(a.delay_ms, 3200);
    EXPECT_LE(a.delay_ms, 4800);
  }
  EXPECT_EQ(FailureAction::RetryAfter(-5).delay_ms, 0);
}

}  // namespace
}  // namespace queuebox::inbox
