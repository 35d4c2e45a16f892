// The small rules of receiving a message: JSONPath keys, the header filter, the token bucket,
// publish times, correlation ids, stored headers, the nesting guard.
#include "sources/intake_parts.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "core/header_filter.h"
#include "core/json_path.h"

namespace queuebox::sources {
namespace {

using nlohmann::json;

TEST(JsonPathTest, DefinitePathsReadKeys) {
  json doc = json::parse(
      R"({"id":"evt_1","n":42,"ok":true,"data":{"object":{"customer":" cus_9 "}},"list":["a","b"],
          "odd key":"x","blank":"  ","nil":null,"obj":{}})");
  auto text = [&](const char* path) { return JsonPath::Compile(path).value().Text(doc); };
  EXPECT_EQ(text("$.id"), "evt_1");
  EXPECT_EQ(text("id"), "evt_1");
  EXPECT_EQ(text("$.n"), "42");
  EXPECT_EQ(text("$.ok"), "true");
  EXPECT_EQ(text("$.data.object.customer"), "cus_9");
  EXPECT_EQ(text("$['data']['object']['customer']"), "cus_9");
  EXPECT_EQ(text("$[\"odd key\"]"), "x");
  EXPECT_EQ(text("$.list[0]"), "a");
  EXPECT_EQ(text("$.list[-1]"), "b");
  EXPECT_EQ(text("$.list[5]"), std::nullopt);
  EXPECT_EQ(text("$.missing.deeper"), std::nullopt);
  EXPECT_EQ(text("$.blank"), std::nullopt);
  EXPECT_EQ(text("$.nil"), std::nullopt);
  EXPECT_EQ(text("$.obj"), std::nullopt);
}

TEST(JsonPathTest, IndefinitePathsAreRefused) {
  for (const char* path : {"$..id", "$.*", "$.list[*]", "$.list[?(@.a)]", "$.list[1:3]",
                           "$.list[0,1]", "$['a','b']"}) {
    auto p = JsonPath::Compile(path);
    ASSERT_FALSE(p.ok()) << path;
    EXPECT_NE(p.status().message().find("is not a definite JSONPath"), std::string::npos)
        << p.status().message();
  }
  EXPECT_FALSE(JsonPath::Compile("$.a[").ok());
}

TEST(JsonPathTest, FirstNonEmptyPathWins) {
  json doc = json::parse(R"({"b":"second","c":"third"})");
  std::vector<JsonPath> paths = {JsonPath::Compile("$.a").value(), JsonPath::Compile("$.b").value(),
                                 JsonPath::Compile("$.c").value()};
  EXPECT_EQ(FirstText(paths, doc), "second");
}

TEST(HeaderFilterTest, RequireAndExcludeRules) {
  auto filter = HeaderFilter::Parse(json::parse(R"({
    "require": [{"header": "X-Env", "in": ["prod", "staging"]},
                {"header": "X-Event", "matches": "invoice.*"}],
    "exclude": [{"header": "X-Test", "exists": true}]})"));
  ASSERT_TRUE(filter.ok()) << filter.status().ToString();
  std::map<std::string, std::string> headers = {{"x-env", "prod"}, {"x-event", "invoice.paid"}};
  auto lookup = [&](std::string_view name) -> std::optional<std::string> {
    std::string lower(name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto it = headers.find(lower);
    return it == headers.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  EXPECT_EQ(filter->FirstFailure(lookup), std::nullopt);
  headers["x-event"] = "invoice.item.added";
  EXPECT_EQ(filter->FirstFailure(lookup), "require[1] (X-Event matches)");
  headers["x-event"] = "invoice.paid";
  headers["x-test"] = "1";
  EXPECT_EQ(filter->FirstFailure(lookup), "exclude[0] (X-Test exists)");
  headers.erase("x-test");
  headers["x-env"] = "PROD";  // values match case-sensitively
  EXPECT_EQ(filter->FirstFailure(lookup), "require[0] (X-Env in)");
}

TEST(HeaderFilterTest, BadRulesStopTheStart) {
  EXPECT_FALSE(HeaderFilter::Parse(json::parse(R"({"require":[{"header":"X","in":[]}]})")).ok());
  EXPECT_FALSE(
      HeaderFilter::Parse(json::parse(R"({"require":[{"header":"X","exists":false}]})")).ok());
  EXPECT_FALSE(
      HeaderFilter::Parse(json::parse(R"({"require":[{"header":"X","equals":"a","exists":true}]})"))
          .ok());
}

TEST(RateLimiterTest, RefillsPerPeriodAndSaysWhenToRetry) {
  std::chrono::steady_clock::time_point now{};
  RateLimiter limiter(2, std::chrono::seconds(60), [&] { return now; });
  EXPECT_EQ(limiter.TryAcquire(), 0);
  EXPECT_EQ(limiter.TryAcquire(), 0);
  now += std::chrono::milliseconds(59500);
  EXPECT_EQ(limiter.TryAcquire(), 1);  // 0.5 s left rounds up to 1
  now += std::chrono::milliseconds(500);
  EXPECT_EQ(limiter.TryAcquire(), 0);
}

TEST(ParsePublishTimeTest, SecondsMillisAndIso) {
  EXPECT_EQ(ParsePublishTime("1767225600"), 1767225600000);
  EXPECT_EQ(ParsePublishTime(" 1767225600123 "), 1767225600123);
  EXPECT_EQ(ParsePublishTime("2026-01-01T00:00:00Z"), 1767225600000);
  EXPECT_EQ(ParsePublishTime("2026-01-01T01:00:00+01:00"), 1767225600000);
  EXPECT_EQ(ParsePublishTime("-5"), std::nullopt);
  EXPECT_EQ(ParsePublishTime("yesterday"), std::nullopt);
  EXPECT_EQ(ParsePublishTime("2026-01-01T00:00:00"), std::nullopt);  // no offset
}

// Found by fuzz/intake_parts_fuzz.cc: a day past the end of its month was accepted and rolled
// over (2026-02-31 read as 2026-03-03).
TEST(ParsePublishTimeTest, DaysPastTheEndOfTheMonthAreRefused) {
  EXPECT_EQ(ParsePublishTime("9999-06-31T23:59:59.999Z"), std::nullopt);  // the fuzzer's input
  EXPECT_EQ(ParsePublishTime("2026-02-31T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParsePublishTime("2026-02-29T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParsePublishTime("2026-04-31T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParsePublishTime("2100-02-29T00:00:00Z"), std::nullopt);
  EXPECT_EQ(ParsePublishTime("2028-02-29T00:00:00Z"), 1835395200000);
  EXPECT_EQ(ParsePublishTime("2000-02-29T00:00:00Z"), 951782400000);
  EXPECT_EQ(ParsePublishTime("2026-12-31T00:00:00Z"), 1798675200000);
}

// Found by fuzz/intake_parts_fuzz.cc: byte sequences shaped like UTF-8 but not UTF-8 (overlong
// forms, surrogates, past U+10FFFF) were kept, so a stored correlation id could be text that
// PostgreSQL refuses; \xC0\x80 is an overlong NUL. A lead byte near the end dropped the text after
// it.
TEST(CorrelationIdTest, OnlyWellFormedUtf8IsKept) {
  EXPECT_EQ(SanitizeCorrelationId("a\xC0\x80-b"), "a-b");          // overlong NUL
  EXPECT_EQ(SanitizeCorrelationId("a\xE0\x80\xAF-b"), "a-b");      // overlong '/'
  EXPECT_EQ(SanitizeCorrelationId("a\xED\xA0\x80-b"), "a-b");      // surrogate U+D800
  EXPECT_EQ(SanitizeCorrelationId("a\xF4\x90\x80\x80-b"), "a-b");  // past U+10FFFF
  EXPECT_EQ(SanitizeCorrelationId("caf\xC3\xA9-\xF0\x9F\x93\xA6"), "caf\xC3\xA9-\xF0\x9F\x93\xA6");
  EXPECT_EQ(SanitizeCorrelationId("x\xF0-ab"), "x-ab");  // a cut sequence drops only its lead byte
  EXPECT_EQ(SanitizeCorrelationId(std::string("x\xF0") + "ab"), "xab");
}

TEST(CorrelationIdTest, SanitisedAndBounded) {
  EXPECT_EQ(SanitizeCorrelationId("abc\r\ndef\t"), "abcdef");
  EXPECT_EQ(SanitizeCorrelationId(std::string(300, 'x')).size(), 128u);
  EXPECT_EQ(SanitizeCorrelationId("\x01\x02"), "");
  EXPECT_EQ(NewUuid().size(), 36u);
  EXPECT_NE(NewUuid(), NewUuid());
}

// NewUuid's ids are lowercase version-4 UUIDs (RFC 4122 variant), all different.
TEST(CorrelationIdTest, NewUuidIsALowercaseVersion4Uuid) {
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i) {
    const std::string id = NewUuid();
    ASSERT_EQ(id.size(), 36u) << id;
    for (size_t k = 0; k < id.size(); ++k) {
      if (k == 8 || k == 13 || k == 18 || k == 23) {
        ASSERT_EQ(id[k], '-') << id;
      } else {
        ASSERT_TRUE((id[k] >= '0' && id[k] <= '9') || (id[k] >= 'a' && id[k] <= 'f')) << id;
      }
    }
    EXPECT_EQ(id[14], '4') << id;
    EXPECT_NE(std::string("89ab").find(id[19]), std::string::npos) << id;
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 200u);
}

TEST(StoredHeadersTest, CredentialsDroppedLastValueWins) {
  std::string stored = StoredHeaders({{"Authorization", "Bearer t"},
                                      {"proxy-authorization", "Basic x"},
                                      {"Cookie", "s=1"},
                                      {"X-Signature", "sha256=ab"},
                                      {"X-Env", "a"},
                                      {"x-env", "b"},
                                      {"Stripe-Signature", "kept"}},
                                     {"x-signature"});
  EXPECT_EQ(json::parse(stored), json::parse(R"({"x-env":"b","Stripe-Signature":"kept"})"));
}

TEST(JsonDepthTest, CountsNestingOutsideStrings) {
  EXPECT_EQ(JsonDepth(R"({"a":[1,{"b":"[[[["}]})", 100), 3);
  std::string deep(2000, '[');
  EXPECT_GT(JsonDepth(deep, 1000), 1000);
}

}  // namespace
}  // namespace queuebox::sources
