#include "store/sql_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/named_sql.h"
#include "testing/status_matchers.h"

namespace queuebox::store {
namespace {

using ::queuebox::testing::StatusIs;
using ::testing::HasSubstr;

std::string Expand(std::string_view text, SqlTemplateOptions options = {}) {
  Result<std::string> out = ExpandSqlTemplate(text, options);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : "";
}

TEST(SqlTemplateTest, AMacroIsWrittenOnceAndExpandedWhereItIsUsed) {
  EXPECT_EQ(Expand("{define mine(k)}(hash({k}) = :i){end define}"
                   "SELECT 1 WHERE {mine(w.{key})} AND {mine(coalesce(a, b))}"),
            "SELECT 1 WHERE (hash(w.{key}) = :i) AND (hash(coalesce(a, b)) = :i)");
}

TEST(SqlTemplateTest, ArgumentsSplitAtTopLevelCommasAndAreTrimmed) {
  EXPECT_EQ(Expand("{define pair(a, b)}[{a}|{b}]{end define}{pair( f(x, y) ,  'p,q' )}"),
            "[f(x, y)|'p,q']");
}

TEST(SqlTemplateTest, AnArgumentsBracesAreNotReadAsParameters) {
  EXPECT_EQ(Expand("{define lane(agg, id)}h({agg}, {id}){end define}{lane({id}, x)}"),
            "h({id}, x)");
}

TEST(SqlTemplateTest, CallerMacrosAndNestedUses) {
  SqlTemplateOptions o;
  o.macros.push_back({"twice", {"x"}, "{x}{x}"});
  EXPECT_EQ(Expand("{define wrap(y)}<{twice({y})}>{end define}{wrap(ab)}", o), "<abab>");
}

TEST(SqlTemplateTest, IfKeepsItsBlockByFlag) {
  const std::string_view text = "a{if lane} AND l = :lane{else} AND 1 = 1{end if} b";
  EXPECT_EQ(Expand(text), "a AND 1 = 1 b");
  SqlTemplateOptions lane;
  lane.flags = {"lane"};
  EXPECT_EQ(Expand(text, lane), "a AND l = :lane b");
  EXPECT_EQ(Expand("x{if other} y{end if}", lane), "x");
}

TEST(SqlTemplateTest, CommentsQuotesAndOtherBracesAreKept) {
  const std::string_view text =
      "-- {mine(x)} is documented here\nSELECT '{if x}', \"{y(z)}\", {T}.{id}, '{}'";
  EXPECT_EQ(Expand(text), text);
}

TEST(SqlTemplateTest, MistakesAreInternalErrors) {
  EXPECT_THAT(ExpandSqlTemplate("{nope(1)}").status(),
              StatusIs(StatusCode::kInternal, HasSubstr("{nope(...)}, which is not defined")));
  EXPECT_THAT(ExpandSqlTemplate("{define m(a)}{a}{end define}{m(1, 2)}").status(),
              StatusIs(StatusCode::kInternal, HasSubstr("takes 1 arguments, not 2")));
  EXPECT_THAT(ExpandSqlTemplate("{if x} a").status(),
              StatusIs(StatusCode::kInternal, HasSubstr("{if x} has no {end if}")));
  EXPECT_THAT(ExpandSqlTemplate("{define m(a)} a").status(),
              StatusIs(StatusCode::kInternal, HasSubstr("{define m} has no {end define}")));
  EXPECT_THAT(ExpandSqlTemplate("a {end if}").status(),
              StatusIs(StatusCode::kInternal, HasSubstr("out of place")));
  EXPECT_THAT(ExpandSqlTemplate("{m(a}").status(),
              StatusIs(StatusCode::kInternal, HasSubstr("parenthesis is not closed")));
}

TEST(SqlTemplateTest, NamedSqlExpandsBeforeItBindsNames) {
  SqlTemplateOptions o;
  o.flags = {"on"};
  auto sql = NamedSql::Compile(
      "{define eq(c)}{c} = :v{end define}\nSELECT 1\n WHERE {eq(a)}{if on} OR {eq(b)}{end if}",
      {"v"}, &PgMarker, o);
  ASSERT_TRUE(sql.ok()) << sql.status().ToString();
  EXPECT_EQ(sql->sql(), "SELECT 1 WHERE a = $1 OR b = $1");
}

}  // namespace
}  // namespace queuebox::store
