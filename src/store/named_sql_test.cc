#include "store/named_sql.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "testing/status_matchers.h"

namespace queuebox::store {
namespace {

using ::queuebox::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NamedSqlTest, NamesBecomePositionsInTheDeclaredOrder) {
  auto sql = NamedSql::Compile("SELECT :b::int + :a, :b", {"a", "b"}, &PgMarker);
  ASSERT_TRUE(sql.ok()) << sql.status().ToString();
  EXPECT_EQ(sql->sql(), "SELECT $2::int + $1, $2");
  EXPECT_THAT(sql->names(), ElementsAre("a", "b"));
}

TEST(NamedSqlTest, CommentsGoAndWhitespaceBecomesOneSpace) {
  auto sql = NamedSql::Compile(
      "-- header\nSELECT 1,\n    -- why\n    2   AS two -- trailing\n  FROM t\n", {}, &PgMarker);
  ASSERT_TRUE(sql.ok()) << sql.status().ToString();
  EXPECT_EQ(sql->sql(), "SELECT 1, 2 AS two FROM t");
}

TEST(NamedSqlTest, QuotedTextIsKeptExactly) {
  auto sql = NamedSql::Compile(
      "SELECT 'a  :x -- not a comment', \"Odd  :y\", 'it''s :z', to_char(t, 'HH24:MI:SS') "
      "FROM t WHERE c = :x",
      {"x"}, &PgMarker);
  ASSERT_TRUE(sql.ok()) << sql.status().ToString();
  EXPECT_EQ(sql->sql(),
            "SELECT 'a  :x -- not a comment', \"Odd  :y\", 'it''s :z', to_char(t, 'HH24:MI:SS') "
            "FROM t WHERE c = $1");
}

TEST(NamedSqlTest, AnUndeclaredOrUnusedNameOrAnOpenQuoteIsRefused) {
  EXPECT_THAT(NamedSql::Compile("SELECT :a, :b", {"a"}, &PgMarker).status(),
              StatusIs(StatusCode::kInternal, HasSubstr(":b, which is not declared")));
  EXPECT_THAT(NamedSql::Compile("SELECT :a", {"a", "b"}, &PgMarker).status(),
              StatusIs(StatusCode::kInternal, HasSubstr("never uses the parameter :b")));
  EXPECT_THAT(NamedSql::Compile("SELECT 'a", {}, &PgMarker).status(),
              StatusIs(StatusCode::kInternal, HasSubstr("quote (') is not closed")));
}

TEST(NamedSqlTest, BindPutsValuesInPositionOrder) {
  auto sql = NamedSql::Compile("SELECT :a, :b, :c", {"a", "b", "c"}, &PgMarker);
  ASSERT_TRUE(sql.ok());
  auto params = sql->Bind({{"c", std::string("z")}, {"a", int64_t{1}}, {"b", SqlParam{}}});
  ASSERT_TRUE(params.ok()) << params.status().ToString();
  EXPECT_EQ(*params, (std::vector<SqlParam>{int64_t{1}, SqlParam{}, std::string("z")}));
}

TEST(NamedSqlTest, BindRefusesAMissingUnknownOrRepeatedName) {
  auto sql = NamedSql::Compile("SELECT :a, :b", {"a", "b"}, &PgMarker);
  ASSERT_TRUE(sql.ok());
  EXPECT_THAT(sql->Bind({{"a", int64_t{1}}}).status(),
              StatusIs(StatusCode::kInternal, HasSubstr(":b is not bound")));
  EXPECT_THAT(sql->Bind({{"a", int64_t{1}}, {"b", int64_t{2}}, {"c", int64_t{3}}}).status(),
              StatusIs(StatusCode::kInternal, HasSubstr("No SQL parameter is named :c")));
  EXPECT_THAT(sql->Bind({{"a", int64_t{1}}, {"a", int64_t{2}}, {"b", int64_t{3}}}).status(),
              StatusIs(StatusCode::kInternal, HasSubstr(":a is bound twice")));
}

}  // namespace
}  // namespace queuebox::store
