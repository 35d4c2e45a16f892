// envelope_test.cc: the envelope codec (Make / Encode / Decode / Accepts / Annotate / Redrive).
#include "babelqueue/envelope.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <regex>

namespace babelqueue {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// The compact canonical form of fixtures/order-created.json (BabelQueue reference §1.1).
constexpr std::string_view kOrderCreated =
    R"({"job":"urn:babel:orders:created","trace_id":"7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b",)"
    R"("data":{"order_id":1042},"meta":{"id":"f1e2d3c4-b5a6-4789-90ab-cdef01234567",)"
    R"("queue":"orders","lang":"php","schema_version":1,"created_at":1749132727000},"attempts":0})";

const std::regex kUuidV4("^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$");

std::string MustEncode(const Envelope& env) {
  Result<std::string> bytes = Encode(env);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  return bytes.ok() ? *bytes : std::string();
}

// Encodes data {"v": value} and returns the text of the value.
std::string EncodeValue(const Json& value) {
  Result<std::string> out = EncodeJson(value);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::string();
}

TEST(MakeTest, ProducesCanonicalShape) {
  const int64_t before = NowUnixMs();
  Result<Envelope> env = Make("  urn:babel:orders:created \n", Json{{"order_id", 1042}});
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->job, "urn:babel:orders:created");
  EXPECT_EQ(env->attempts, 0);
  EXPECT_EQ(env->meta.lang, "cpp");
  EXPECT_EQ(env->meta.schema_version, 1);
  EXPECT_EQ(env->meta.queue, "default");
  EXPECT_TRUE(std::regex_match(env->meta.id, kUuidV4)) << env->meta.id;
  EXPECT_TRUE(std::regex_match(env->trace_id, kUuidV4)) << env->trace_id;
  EXPECT_NE(env->trace_id, env->meta.id);
  EXPECT_GE(env->meta.created_at, before);
  EXPECT_LE(env->meta.created_at, NowUnixMs());
  EXPECT_FALSE(env->dead_letter.has_value());
  EXPECT_TRUE(Accepts(*env).ok());
}

TEST(MakeTest, EachMessageGetsAFreshId) {
  Result<Envelope> a = Make("urn:babel:x:y");
  Result<Envelope> b = Make("urn:babel:x:y");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->meta.id, b->meta.id);
  EXPECT_NE(a->trace_id, b->trace_id);
}

TEST(MakeTest, BlankUrnIsRefused) {
  Result<Envelope> env = Make("   ");
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(env.status().message(), HasSubstr("URN is blank"));
}

TEST(MakeTest, DataMustBeAnObject) {
  Result<Envelope> env = Make("urn:babel:x:y", Json::array({1, 2}));
  ASSERT_FALSE(env.ok());
  EXPECT_THAT(env.status().message(), HasSubstr("data must be a JSON object"));
  Result<Envelope> null_data = Make("urn:babel:x:y", Json());
  ASSERT_TRUE(null_data.ok());
  EXPECT_EQ(MustEncode(*null_data).find(R"("data":{})") != std::string::npos, true);
}

TEST(MakeTest, QueueAndContinuedTrace) {
  Result<Envelope> env = Make("urn:babel:x:y", {}, {.queue = "orders", .trace_id = " trace-123 "});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->meta.queue, "orders");
  EXPECT_EQ(env->trace_id, "trace-123");
  Result<Envelope> blank = Make("urn:babel:x:y", {}, {.queue = "q", .trace_id = "   "});
  ASSERT_TRUE(blank.ok());
  EXPECT_TRUE(std::regex_match(blank->trace_id, kUuidV4));
}

TEST(EncodeTest, OrderCreatedIsByteIdenticalToTheCanonicalForm) {
  Envelope env;
  env.job = "urn:babel:orders:created";
  env.trace_id = "7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b";
  env.data = Json{{"order_id", 1042}};
  env.meta.id = "f1e2d3c4-b5a6-4789-90ab-cdef01234567";
  env.meta.queue = "orders";
  env.meta.lang = "php";
  env.meta.created_at = 1749132727000;
  const std::string bytes = MustEncode(env);
  EXPECT_EQ(bytes, kOrderCreated);
  EXPECT_EQ(bytes.size(), 251u);
}

TEST(EncodeTest, DecodeThenEncodeIsIdentityForCanonicalBytes) {
  Result<Envelope> env = Decode(kOrderCreated);
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(MustEncode(*env), kOrderCreated);
}

TEST(EncodeTest, DataKeysKeepInsertionOrder) {
  Json data = Json::object();
  data["title"] = "Café — naïve ☕";
  data["qty"] = 7;
  data["price_cents"] = 1299;
  data["ratio"] = 0.5;
  data["active"] = true;
  data["note"] = nullptr;
  EXPECT_EQ(EncodeValue(data),
            R"({"title":"Café — naïve ☕","qty":7,"price_cents":1299,"ratio":0.5,)"
            R"("active":true,"note":null})");
}

TEST(EncodeTest, EscapingFollowsTheReferenceRecommendation) {
  EXPECT_EQ(EncodeValue("a/b<c>&d"), R"("a/b<c>&d")");
  EXPECT_EQ(EncodeValue("q\"b\\"), R"("q\"b\\")");
  EXPECT_EQ(EncodeValue("\b\f\n\r\t"), R"("\b\f\n\r\t")");
  EXPECT_EQ(EncodeValue(std::string("\x00\x01\x1f", 3)), R"("\u0000\u0001\u001f")");
  EXPECT_EQ(EncodeValue("\x7f"), "\"\x7f\"");                       // DEL stays raw
  EXPECT_EQ(EncodeValue("l\u2028p\u2029"), R"("l\u2028p\u2029")");  // as PHP and Go
  EXPECT_EQ(EncodeValue("é😀"), "\"é😀\"");                           // raw UTF-8
}

TEST(EncodeTest, IntegersAndFloatsStayDistinct) {
  EXPECT_EQ(EncodeValue(1042), "1042");
  EXPECT_EQ(EncodeValue(-7), "-7");
  EXPECT_EQ(EncodeValue(std::numeric_limits<int64_t>::max()), "9223372036854775807");
  EXPECT_EQ(EncodeValue(std::numeric_limits<uint64_t>::max()), "18446744073709551615");
  // Floats print like Python's repr (reference §1.5: PHP and Python keep 1.0; Go prints 1).
  EXPECT_EQ(EncodeValue(1.0), "1.0");
  EXPECT_EQ(EncodeValue(-0.0), "-0.0");
  EXPECT_EQ(EncodeValue(0.5), "0.5");
  EXPECT_EQ(EncodeValue(99.9), "99.9");
  EXPECT_EQ(EncodeValue(1e21), "1e+21");
  EXPECT_EQ(EncodeValue(1e16), "1e+16");
  EXPECT_EQ(EncodeValue(1e15), "1000000000000000.0");
  EXPECT_EQ(EncodeValue(123456789.123), "123456789.123");
  EXPECT_EQ(EncodeValue(0.0001), "0.0001");
  EXPECT_EQ(EncodeValue(1e-5), "1e-05");
  EXPECT_EQ(EncodeValue(5e-324), "5e-324");
  EXPECT_EQ(EncodeValue(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(EncodeValue(-2.5e-7), "-2.5e-07");
}

TEST(EncodeTest, DecodedNumbersKeepTheirKind) {
  Result<Envelope> env = Decode(
      R"({"job":"j","trace_id":"t","data":{"i":1,"f":1.0,"big":1e21,"u":18446744073709551615},)"
      R"("meta":{"id":"x","queue":"q","lang":"go","schema_version":1,"created_at":0},"attempts":0})");
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(EncodeValue(env->data), R"({"i":1,"f":1.0,"big":1e+21,"u":18446744073709551615})");
}

TEST(EncodeTest, NonFiniteNumbersAreRefused) {
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity()}) {
    Result<Envelope> env = Make("urn:babel:x:y", Json{{"n", {{"deep", bad}}}});
    ASSERT_TRUE(env.ok());
    Result<std::string> bytes = Encode(*env);
    ASSERT_FALSE(bytes.ok());
    EXPECT_EQ(bytes.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(bytes.status().message(), HasSubstr("NaN or Infinity at data.n.deep"));
  }
}

TEST(EncodeTest, InvalidUtf8IsRefused) {
  const std::string bad_cases[] = {
      "\xff",              // never valid
      "\xc0\xaf",          // overlong '/'
      "\xed\xa0\x80",      // UTF-16 surrogate
      "\xf4\x90\x80\x80",  // above U+10FFFF
      "\xe2\x82",          // truncated
  };
  for (const std::string& bad : bad_cases) {
    Result<Envelope> env = Make("urn:babel:x:y", Json{{"s", "ok" + bad}});
    ASSERT_TRUE(env.ok());
    Result<std::string> bytes = Encode(*env);
    ASSERT_FALSE(bytes.ok());
    EXPECT_THAT(bytes.status().message(),
                HasSubstr("invalid UTF-8 at byte 2 of the string at data.s"));
  }
  Result<Envelope> key = Make("urn:babel:x:y", Json{{"k\xff", 1}});
  ASSERT_TRUE(key.ok());
  EXPECT_THAT(Encode(*key).status().message(), HasSubstr("data.k"));
  Result<Envelope> job = Make("urn:\xff");
  ASSERT_TRUE(job.ok());
  EXPECT_THAT(Encode(*job).status().message(), HasSubstr("string at job"));
}

TEST(DecodeTest, UrnAliasIsAcceptedAndEncodedAsJob) {
  Result<Envelope> env = Decode(
      R"({"urn":"  urn:babel:orders:created ","trace_id":"t","data":{},)"
      R"("meta":{"id":"i","queue":"q","lang":"go","schema_version":1,"created_at":1},"attempts":0})");
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(env->job, "urn:babel:orders:created");
  EXPECT_TRUE(Accepts(*env).ok());
  EXPECT_THAT(MustEncode(*env), StartsWith(R"({"job":"urn:babel:orders:created",)"));
  EXPECT_EQ(MustEncode(*env).find("\"urn\""), std::string::npos);
}

TEST(DecodeTest, UnknownKeysAreKeptInOrder) {
  const std::string bytes =
      R"({"job":"j","trace_id":"t","data":{},"meta":{"id":"i","queue":"q","lang":"php",)"
      R"("schema_version":1,"created_at":1,"tenant":"acme"},"attempts":0,"x-extra":[1,2.5]})";
  Result<Envelope> env = Decode(bytes);
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(MustEncode(*env), bytes);
}

TEST(DecodeTest, ReasonsForUndecodableEnvelopes) {
  struct Case {
    std::string bytes;
    std::string reason;
  };
  const std::string meta = R"("meta":{"id":"i","queue":"q","lang":"php","schema_version":1})";
  const Case cases[] = {
      {"not json", "malformed: not valid UTF-8 JSON"},
      {"[1]", "malformed: the envelope must be a JSON object"},
      {"{\"job\":\"j\",\"s\":\"\xff\"}", "malformed"},
      {R"({"job":1,)" + meta + R"(,"attempts":0})", "job must be a string"},
      {R"({"job":"j","trace_id":"t","data":{},"attempts":0})", "missing_meta: meta is missing"},
      {R"({"job":"j","meta":[],"attempts":0})", "missing_meta: meta must be an object"},
      {R"({"job":"j","meta":{"schema_version":1.0},"attempts":0})",
       "unsupported_schema_version: meta.schema_version must be an integer"},
      {R"({"job":"j","meta":{"schema_version":true},"attempts":0})", "must be an integer"},
      {R"({"job":"j","meta":{}, "attempts":0})", "meta.schema_version is missing"},
      {R"({"job":"j",)" + meta + R"(})", "invalid_attempts: attempts is missing"},
      {R"({"job":"j",)" + meta + R"(,"attempts":"1"})",
       "invalid_attempts: attempts must be an integer"},
      {R"({"job":"j",)" + meta + R"(,"attempts":0,"dead_letter":"x"})",
       "dead_letter must be an object"},
  };
  for (const Case& c : cases) {
    Result<Envelope> env = Decode(c.bytes);
    ASSERT_FALSE(env.ok()) << c.bytes;
    EXPECT_EQ(env.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(env.status().message(), HasSubstr(c.reason)) << c.bytes;
  }
}

TEST(AcceptsTest, ReasonsForRejectedEnvelopes) {
  Result<Envelope> good = Decode(kOrderCreated);
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(Accepts(*good).ok());

  Envelope e = *good;
  e.job = "  ";
  EXPECT_THAT(Accepts(e).message(), HasSubstr("missing_urn"));
  e = *good;
  e.meta.schema_version = 2;
  EXPECT_THAT(Accepts(e).message(), HasSubstr("unsupported_schema_version: meta.schema_version 2"));
  e = *good;
  e.data = Json::array();
  EXPECT_THAT(Accepts(e).message(), HasSubstr("invalid_data"));
  e = *good;
  e.data = Json();
  EXPECT_THAT(Accepts(e).message(), HasSubstr("invalid_data"));
  e = *good;
  e.trace_id = " \t";
  EXPECT_THAT(Accepts(e).message(), HasSubstr("missing_trace_id"));
  e = *good;
  e.attempts = -1;
  EXPECT_THAT(Accepts(e).message(), HasSubstr("invalid_attempts"));
  EXPECT_THAT(Accepts(std::string_view("{}")).message(), HasSubstr("missing_meta"));
}

TEST(DeadLetterTest, AnnotateReturnsACopyWithTheBlock) {
  Result<Envelope> env = Decode(kOrderCreated);
  ASSERT_TRUE(env.ok());
  Envelope dl =
      Annotate(*env, DeadLetterReason::kFailed, "orders", 3, std::string("Payment gateway timeout"),
               std::string("App\\Exceptions\\GatewayTimeout"), 1749132730000);
  EXPECT_FALSE(env->dead_letter.has_value());  // original untouched
  ASSERT_TRUE(dl.dead_letter.has_value());
  const std::string bytes = MustEncode(dl);
  EXPECT_EQ(bytes.substr(0, kOrderCreated.size() - 1),
            kOrderCreated.substr(0, kOrderCreated.size() - 1));
  EXPECT_THAT(bytes, HasSubstr(R"(,"attempts":0,"dead_letter":{"reason":"failed",)"
                               R"("error":"Payment gateway timeout",)"
                               R"("exception":"App\\Exceptions\\GatewayTimeout",)"
                               R"("failed_at":1749132730000,"original_queue":"orders",)"
                               R"("attempts":3,"lang":"cpp"}})"));
  Result<Envelope> back = Decode(bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(MustEncode(*back), bytes);
}

TEST(DeadLetterTest, NoCauseEncodesNulls) {
  Result<Envelope> env = Make("urn:babel:x:y");
  ASSERT_TRUE(env.ok());
  const int64_t before = NowUnixMs();
  Envelope dl = Annotate(*env, DeadLetterReason::kUnknownUrn, "q", 1);
  EXPECT_GE(dl.dead_letter->failed_at, before);
  EXPECT_THAT(MustEncode(dl),
              HasSubstr(R"({"reason":"unknown_urn","error":null,"exception":null,)"));
  EXPECT_EQ(DeadLetterReasonName(DeadLetterReason::kPoison), "poison");
}

TEST(DeadLetterTest, RedriveRemovesTheBlockAndResetsAttempts) {
  Result<Envelope> env = Make("urn:babel:x:y", {}, {.queue = "meta-q", .trace_id = ""});
  ASSERT_TRUE(env.ok());
  env->attempts = 3;
  Redriven r = Redrive(Annotate(*env, DeadLetterReason::kFailed, "orders", 3));
  EXPECT_EQ(r.queue, "orders");
  EXPECT_FALSE(r.envelope.dead_letter.has_value());
  EXPECT_EQ(r.envelope.attempts, 0);
  EXPECT_EQ(r.envelope.meta.id, env->meta.id);
  EXPECT_EQ(r.envelope.trace_id, env->trace_id);
  EXPECT_EQ(Redrive(*env).queue, "meta-q");  // no block: meta.queue
}

}  // namespace
}  // namespace babelqueue
