#include "core/router.h"

#include <gtest/gtest.h>

namespace queuebox {
namespace {

bool M(const char* pattern, const char* topic) {
  auto p = TopicPattern::Compile(pattern);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p->Matches(topic);
}

TEST(TopicPatternTest, SingleStarMatchesOneDotFreeSegment) {
  EXPECT_TRUE(M("order.*", "order.created"));
  EXPECT_FALSE(M("order.*", "order.created.v2"));
  EXPECT_FALSE(M("order.*", "order."));
  EXPECT_TRUE(M("*.created", "order.created"));
  EXPECT_FALSE(M("*.created", "a.b.created"));
}

TEST(TopicPatternTest, DoubleStarMatchesAnything) {
  EXPECT_TRUE(M("event.**", "event.a"));
  EXPECT_TRUE(M("event.**", "event.a.b"));
  EXPECT_TRUE(M("event.**", "event."));
  EXPECT_FALSE(M("event.**", "events.a"));
  EXPECT_TRUE(M("**", "anything.at.all"));
  EXPECT_TRUE(M("**", ""));
}

TEST(TopicPatternTest, OtherCharactersAreLiteral) {
  EXPECT_TRUE(M("a+b.(c)", "a+b.(c)"));
  EXPECT_FALSE(M("a.b", "axb"));
  EXPECT_FALSE(M("order", "order.created"));
}

TEST(TopicPatternTest, BlankAndTripleStarAreInvalid) {
  EXPECT_EQ(TopicPattern::Compile("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TopicPattern::Compile("  ").status().code(), StatusCode::kInvalidArgument);
  auto bad = TopicPattern::Compile("a.***");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("***"), std::string::npos);
}

// Found by fuzz/router_fuzz: matching backtracked over every split of the topic between the
// wildcards, exponential in their number; this 64-character topic against eleven wildcards did
// not finish. A header filter's `matches` glob runs against header values from outside.
TEST(TopicPatternTest, ManyWildcardsAnswerWithoutBacktracking) {
  const std::string topic(64, 'a');
  EXPECT_FALSE(M("**a**a**a**a**a**a**a**a**a**a**b", topic.c_str()));
  EXPECT_TRUE(M("**a**a**a**a**a**a**a**a**a**a**", topic.c_str()));
  EXPECT_FALSE(M("*a*a*a*a*a*a*a*a*a*a*b", topic.c_str()));
  EXPECT_TRUE(M("*a*a*a*a*a*a*a*a*a*a*", topic.c_str()));
  EXPECT_FALSE(M("*a*a*a*a*a*a*a*a*a*a*", (topic + ".a").c_str()));
  EXPECT_TRUE(M("**.*a*a*a*a*a*a*a*a*a*a*", ("x." + topic).c_str()));
}

TEST(RouterTest, FirstMatchWins) {
  std::vector<RouteConfig> routes = {
      {"order.created", "a", {}, ""}, {"order.*", "b", {}, ""}, {"**", "c", {}, ""}};
  auto r = Router::Create(routes);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->route(*r->Match("order.created")).destination, "a");
  EXPECT_EQ(r->route(*r->Match("order.paid")).destination, "b");
  EXPECT_EQ(r->route(*r->Match("x.y.z")).destination, "c");
}

TEST(RouterTest, NoMatchIsEmpty) {
  auto r = Router::Create({{"order.*", "b", {}, ""}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->Match("invoice.paid").has_value());
}

TEST(RouterTest, InvalidPatternNamesItsRoute) {
  auto r = Router::Create({{"ok.*", "a", {}, ""}, {"", "b", {}, ""}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("routes[1].topicPattern"), std::string::npos);
}

}  // namespace
}  // namespace queuebox
