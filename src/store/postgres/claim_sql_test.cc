// The claim statement's parameters and result columns by name (claim.sql, claim_sql.h). Its
// behaviour on PostgreSQL is proved by tests/contract (store_contract_test.cc,
// store_postgres_claim_window_test.cc, store_postgres_key_affinity_test.cc).
#include "store/postgres/claim_sql.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/postgres/pg_arrays.h"
#include "testing/status_matchers.h"

namespace queuebox::store {
namespace {

using ::queuebox::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(ClaimSqlTest, TheStatementCompilesWithElevenPositionalParameters) {
  const std::string& sql = ClaimSqlTemplate();
  EXPECT_THAT(sql, HasSubstr("WITH RECURSIVE qb_now AS"));
  EXPECT_THAT(sql, HasSubstr("$11::bigint"));
  EXPECT_THAT(sql, Not(HasSubstr("$12")));
  EXPECT_THAT(sql, Not(HasSubstr(":batch_size")));
  EXPECT_THAT(sql, Not(HasSubstr("--")));
  EXPECT_THAT(ClaimParamNames(),
              ElementsAre("batch_size", "lease_ms", "window_rows", "window_from_at",
                          "window_from_sequence", "walk_after_key", "read_window", "replicas",
                          "replica_index", "walk_allowed", "share_key_count"));
}

TEST(ClaimSqlTest, BindClaimPutsEachFieldAtItsNamesPosition) {
  ClaimParams p;
  p.batch_size = 100;
  p.lease_ms = 60000;
  p.window_rows = 200;
  p.window.window_from_at = "2024-01-01T00:00:00Z";
  p.window.window_from_sequence = 7;
  p.window.walk_after_key = "k9";
  p.window.read_window = false;
  p.replicas = 4;
  p.replica_index = 3;
  p.window.walk_allowed = true;
  p.window.share_key_count = 12;
  EXPECT_EQ(BindClaim(p),
            (std::vector<SqlParam>{int64_t{100}, int64_t{60000}, int64_t{200},
                                   std::string("2024-01-01T00:00:00Z"), int64_t{7},
                                   std::string("k9"), std::string("false"), int64_t{4}, int64_t{3},
                                   std::string("true"), int64_t{12}}));
}

// outbox.ordering: strict: the same statement with the bound on keyed heads, the same first
// eleven parameters, then strict_bound.
TEST(ClaimSqlTest, TheStrictVariantBindsStrictBoundTwelfth) {
  const std::string& sql = ClaimSqlTemplate(/*strict=*/true);
  EXPECT_THAT(sql, HasSubstr("<= $12::bigint"));
  EXPECT_THAT(ClaimSqlTemplate(), Not(HasSubstr("strict")));
  std::vector<std::string> names = ClaimParamNames();
  names.push_back("strict_bound");
  EXPECT_EQ(ClaimParamNames(/*strict=*/true), names);
  ClaimParams p;
  p.strict = true;
  p.strict_bound = 41;
  std::vector<SqlParam> bound = BindClaim(p);
  ASSERT_EQ(bound.size(), 12u);
  EXPECT_EQ(bound.back(), SqlParam(int64_t{41}));
}

// A result as PostgreSQL returns it: the columns in claim.sql's order, one claimed row.
SqlTable OneClaimedRow() {
  SqlTable t;
  t.columns = {"id",
               "topic",
               "key",
               "payload",
               "headers",
               "aggregate_type",
               "attempt",
               "max_attempts",
               "sequence",
               "claim_token",
               "created_at",
               "scheduled_at",
               "next_window_from",
               "walk_last_key",
               "walk_share_keys",
               "window_keys"};
  t.rows = {{"11111111-1111-4111-8111-111111111111", "orders", "k1", "{}", std::nullopt,
             std::nullopt, "2", "9", "42", "22222222-2222-4222-8222-222222222222",
             "2024-01-01T00:00:00.000000Z", "2024-01-01T00:00:01.000000Z",
             "2024-01-01T00:00:01.000000Z 42", "k1", "3", std::nullopt}};
  return t;
}

TEST(ClaimSqlTest, ResultColumnsAreReadByName) {
  SqlTable t = OneClaimedRow();
  // The same values with the columns in another order: the reader follows the names.
  SqlTable reversed;
  reversed.columns.assign(t.columns.rbegin(), t.columns.rend());
  reversed.rows = {SqlRow(t.rows[0].rbegin(), t.rows[0].rend())};
  for (const SqlTable* table : {&t, &reversed}) {
    auto result = ReadClaimResult(*table);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    ASSERT_EQ(result->rows.size(), 1u);
    const OutboxRow& row = result->rows[0];
    EXPECT_EQ(row.id, "11111111-1111-4111-8111-111111111111");
    EXPECT_EQ(row.topic, "orders");
    EXPECT_EQ(row.key, "k1");
    EXPECT_EQ(row.headers, "{}");
    EXPECT_EQ(row.aggregate_type, std::nullopt);
    EXPECT_EQ(row.attempt, 2);
    EXPECT_EQ(row.max_attempts, 9);
    EXPECT_EQ(row.sequence, 42);
    EXPECT_EQ(row.claim_token, "22222222-2222-4222-8222-222222222222");
    EXPECT_EQ(row.scheduled_at, "2024-01-01T00:00:01.000000Z");
    const ClaimWindowState::ClaimReport& report = result->report;
    EXPECT_TRUE(report.claimed_any);
    EXPECT_EQ(report.window_first_row, "2024-01-01T00:00:01.000000Z 42");
    EXPECT_EQ(report.walk_last_key, "k1");
    EXPECT_EQ(report.walk_share_keys, 3);
    EXPECT_EQ(report.window_keys, -1);
  }
}

TEST(ClaimSqlTest, NoRowsReportNothing) {
  SqlTable t = OneClaimedRow();
  t.rows.clear();
  auto result = ReadClaimResult(t);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->rows.empty());
  EXPECT_FALSE(result->report.claimed_any);
}

TEST(ClaimSqlTest, AMissingColumnIsAnInternalError) {
  SqlTable t = OneClaimedRow();
  t.columns[13] = "last_key";
  EXPECT_THAT(ReadClaimResult(t).status(),
              StatusIs(StatusCode::kInternal, HasSubstr("no column 'walk_last_key'")));
}

// The batch statements' array parameter (pg_arrays.h): every element quoted, a quote or a
// backslash inside one escaped with a backslash, the rest copied as it is.
TEST(PgArrayTest, QuotesEveryElementAndEscapesQuotesAndBackslashes) {
  EXPECT_EQ(PgArray({}), "{}");
  EXPECT_EQ(PgArray({"11111111-1111-4111-8111-111111111111", ""}),
            "{\"11111111-1111-4111-8111-111111111111\",\"\"}");
  EXPECT_EQ(PgArray({"a\"b", "c\\d", "\"\\\"", "{x,y}"}),
            "{\"a\\\"b\",\"c\\\\d\",\"\\\"\\\\\\\"\",\"{x,y}\"}");
}

}  // namespace
}  // namespace queuebox::store
