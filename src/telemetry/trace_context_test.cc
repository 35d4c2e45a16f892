#include "telemetry/trace_context.h"

#include <gtest/gtest.h>

#include <string>

namespace queuebox::telemetry {
namespace {

constexpr const char* kValid = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

TEST(Traceparent, ReadsAValidValue) {
  auto c = ParseTraceparent(kValid);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(Hex(c->trace_id), "0af7651916cd43dd8448eb211c80319c");
  EXPECT_EQ(Hex(c->span_id), "b7ad6b7169203331");
  EXPECT_EQ(c->flags, 1);
  EXPECT_EQ(FormatTraceparent(c->trace_id, c->span_id, c->flags), kValid);
}

TEST(Traceparent, DropsHostileValues) {
  const std::string hostile[] = {
      "",
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0",    // short
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-011",  // long for 00
      "00-0af7651916cd43dd8448eb211c80319-cb7ad6b7169203331-01",   // dash misplaced
      "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",   // upper case
      "00-0af7651916cd43dd8448eb211c80319c-B7ad6b7169203331-01",   // one upper case digit
      "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",   // version ff
      "00-00000000000000000000000000000000-b7ad6b7169203331-01",   // zero trace id
      "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",   // zero span id
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0g",   // not hex
      "0g-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",   // version not hex
      "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",  // future version, no dash
      "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",   // wrong separators
      std::string(10 * 1024, 'a'),                                 // 10 KB of text
      std::string(kValid) + std::string(10 * 1024, ' ') + "x",     // 10 KB after a valid one
      std::string("00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033\0"
                  "1-01",
                  55),  // NUL
  };
  for (const std::string& v : hostile)
    EXPECT_FALSE(ParseTraceparent(v).has_value()) << v.substr(0, 80);
}

TEST(Traceparent, AcceptsAFutureVersionsPrefix) {
  auto c = ParseTraceparent("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-what-ever");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(Hex(c->span_id), "b7ad6b7169203331");
  EXPECT_TRUE(ParseTraceparent(std::string(" ") + kValid + "\t").has_value());
}

TEST(Traceparent, KeepsOnlyTheSampledFlag) {
  auto c = ParseTraceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-ff");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->flags, 1);
}

TEST(Tracestate, FollowsTheGrammar) {
  EXPECT_TRUE(ValidTracestate("congo=t61rcWkgMzE"));
  EXPECT_TRUE(ValidTracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
  EXPECT_TRUE(ValidTracestate("tenant1@vendor=x , b=2,,"));
  EXPECT_FALSE(ValidTracestate(""));
  EXPECT_FALSE(ValidTracestate("Congo=1"));  // upper-case key
  EXPECT_FALSE(ValidTracestate("a=1,a=2"));  // duplicate key
  EXPECT_FALSE(ValidTracestate("a"));        // no value
  EXPECT_FALSE(ValidTracestate("a=1\n"));    // control character
  EXPECT_FALSE(ValidTracestate(std::string(600, 'a') + "=1"));
  std::string many;
  for (int i = 0; i < 33; ++i) many += "k" + std::to_string(i) + "=v,";
  EXPECT_FALSE(ValidTracestate(many));  // 33 members
}

TEST(TraceHeaders, ReadsAnyLetterCaseAndDropsAStateWithoutAParent) {
  auto c = FromHeaders({{"TraceParent", kValid}, {"TRACESTATE", "a=1"}});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->tracestate, "a=1");
  EXPECT_FALSE(FromHeaders({{"tracestate", "a=1"}}).has_value());
  auto bad_state = FromHeaders({{"traceparent", kValid}, {"tracestate", "A=1"}});
  ASSERT_TRUE(bad_state.has_value());
  EXPECT_EQ(bad_state->tracestate, "");
}

TEST(TraceHeaders, ReadsRowHeadersJson) {
  EXPECT_FALSE(FromHeadersJson(R"({"x":"1"})").has_value());
  EXPECT_FALSE(FromHeadersJson(R"({"traceparent":1})").has_value());
  EXPECT_FALSE(FromHeadersJson("not json traceparent").has_value());
  auto c = FromHeadersJson(std::string(R"({"x":"1","Traceparent":")") + kValid + R"("})");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(Hex(c->trace_id), "0af7651916cd43dd8448eb211c80319c");
}

TEST(TraceIds, AreRandomAndNotZero) {
  EXPECT_NE(NewTraceId(), NewTraceId());
  EXPECT_NE(NewSpanId(), TraceContext{}.span_id);
}

}  // namespace
}  // namespace queuebox::telemetry
