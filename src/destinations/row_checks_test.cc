// The checks of rows a destination can never carry (broker_common.h): each names its field, and
// accepts what the destination can send.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "destinations/broker_common.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(RowChecks, HeadersMustBeAJsonObjectOfStrings) {
  auto ok = ParseRowHeaders(R"({"a":"1","b":""})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 2u);
  EXPECT_TRUE(ParseRowHeaders("").ok());
  EXPECT_EQ(ParseRowHeaders(R"({"n":1})").status().message(),
            "headers: the value of \"n\" is a number; the row's headers must be a JSON object of "
            "strings");
  EXPECT_THAT(ParseRowHeaders(R"({"n":null})").status().message(), HasSubstr("is null"));
  EXPECT_THAT(ParseRowHeaders(R"({"o":{"a":"b"}})").status().message(), HasSubstr("an object"));
  EXPECT_EQ(ParseRowHeaders("[1]").status().message(),
            "headers: an array, not a JSON object of strings");
  EXPECT_THAT(ParseRowHeaders("{oops").status().message(), StartsWith("headers: not valid JSON"));
  EXPECT_THAT(ParseRowHeaders(std::string_view("{\"a\":\"b\"}\0{", 11)).status().message(),
              StartsWith("headers: not valid JSON"));
}

TEST(RowChecks, PayloadMustBeOneJsonDocument) {
  EXPECT_TRUE(CheckPayloadIsJson(R"({"a":[1,2]})").ok());
  EXPECT_TRUE(CheckPayloadIsJson("\"text\"").ok());
  EXPECT_THAT(CheckPayloadIsJson("{\"a\":").message(), StartsWith("payload: not valid JSON"));
  EXPECT_FALSE(CheckPayloadIsJson("").ok());
  EXPECT_FALSE(CheckPayloadIsJson("{} {}").ok());
  // nlohmann's parser alone stops at a NUL and would take this as {"a":1}.
  EXPECT_EQ(CheckPayloadIsJson(std::string_view("{\"a\":1}\0junk", 12)).message(),
            "payload: not valid JSON (a NUL byte at offset 7; the payload must be one JSON "
            "document)");
}

// What a message sends is checked unless it is the row's payload from a column that holds only
// JSON (OutboxRow::payload_is_json): a transformed body is always checked.
TEST(RowChecks, TheBodyIsCheckedUnlessItIsAPayloadTheStoreKnowsIsJson) {
  OutboxRow row;
  row.payload = "{\"a\":";
  OutboundMessage message;
  message.row = &row;
  EXPECT_THAT(CheckBodyIsJson(message).message(), StartsWith("payload: not valid JSON"));
  row.payload_is_json = true;  // a claim from a jsonb column never holds such text
  EXPECT_TRUE(CheckBodyIsJson(message).ok());
  message.transformed_body = "[1,";
  EXPECT_THAT(CheckBodyIsJson(message).message(), StartsWith("payload: not valid JSON"));
  message.transformed_body = "[1]";
  EXPECT_TRUE(CheckBodyIsJson(message).ok());
}

// IsJsonDocument gives nlohmann::json::accept's answer: on the edges of the grammar, and on
// every one-byte change of valid documents (a fixed seed).
TEST(RowChecks, JsonDocumentAgreesWithNlohmannAccept) {
  const std::vector<std::string> cases = {
      "{}",
      "[]",
      " {} ",
      "\t[ ]\r\n",
      "0",
      "-0",
      "01",
      "-",
      "1.",
      "1.5",
      ".5",
      "1e5",
      "1E+5",
      "1e-5",
      "1e",
      "1e+",
      "-1.5e300",
      "1e309",
      "-1e309",
      "1e-400",
      "123456789012345678901234",
      "-99999999999999999999",
      std::string(309, '9'),
      std::string(400, '1'),
      "+1",
      "true",
      "false",
      "null",
      "tru",
      "truex",
      "nul",
      "True",
      "\"\"",
      "\"a\\\"b\"",
      "\"\\/\\b\\f\\n\\r\\t\"",
      "\"\\x\"",
      "\"\\u00e9\"",
      "\"\\u00G9\"",
      "\"\\ud83d\\ude00\"",
      "\"\\ud83d\"",
      "\"\\ude00\"",
      "\"\\ud83dx\"",
      "\"\\ud83d\\u0041\"",
      "\"caf\xc3\xa9\"",
      "\"\xc3\"",
      "\"\xc0\xaf\"",
      "\"\xe0\x80\xaf\"",
      "\"\xed\xa0\x80\"",
      "\"\xf0\x9f\x98\x80\"",
      "\"\xf4\x90\x80\x80\"",
      "\"\xf5\x80\x80\x80\"",
      "\"\x80\"",
      "\"\xff\"",
      "\"\x7f\"",
      "\"\x01\"",
      "\"a\tb\"",
      "\"unterminated",
      "{\"a\":1}",
      "{\"a\":1,}",
      "{,}",
      "{\"a\"}",
      "{\"a\":}",
      "{1:2}",
      "{\"a\":1 \"b\":2}",
      "[1,2,]",
      "[,1]",
      "[1 2]",
      "[[[[[]]]]]",
      "[[[[[]]]]",
      "[]]",
      "{}}",
      "{} {}",
      "[] x",
      "\xef\xbb\xbf{}",
      "\xef\xbb{}",
      "\xef{}",
      "\xef\xbb\xbf",
      "",
      "  ",
      "{\"a\":[1,{\"b\":null,\"c\":[true,false]},\"x\"],\"d\":-0.5e-3}",
      "[1,2,3]{}",
      "{\"k\":\"v\",\"n\":{\"m\":[]}}",
      "/* c */ {}",
      "{} // c",
      "'a'",
      "[\"a\",]",
      std::string(1000, '[') + std::string(1000, ']')};
  for (const std::string& text : cases) {
    EXPECT_EQ(IsJsonDocument(text), nlohmann::json::accept(text)) << "input: " << text;
  }
  const std::vector<std::string> seeds = {
      R"({"id":"b1f0","items":[{"n":1,"price":12.50,"tags":["a","b"]},{"n":-2e3,"ok":true}],)"
      R"("note":"caf\u00e9 \ud83d\ude00 \"q\"","none":null,"f":false})",
      "[0,-1,2.5e-3,\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",{},[],{\"a\":{\"b\":[null]}}]"};
  const std::string bytes = "{}[]\":,.-+0123456789eE \\/utfnalsrbx\x80\xbf\xc3\xed\xf0\x01";
  std::mt19937 rng(18);
  for (const std::string& seed : seeds) {
    ASSERT_TRUE(IsJsonDocument(seed));
    for (size_t i = 0; i < seed.size(); ++i) {
      for (int k = 0; k < 8; ++k) {
        std::string changed = seed;
        const char b = bytes[rng() % bytes.size()];
        switch (k % 3) {
          case 0:
            changed[i] = b;
            break;
          case 1:
            changed.insert(changed.begin() + static_cast<std::ptrdiff_t>(i), b);
            break;
          default:
            changed.erase(i, 1);
            break;
        }
        EXPECT_EQ(IsJsonDocument(changed), nlohmann::json::accept(changed)) << "input: " << changed;
      }
    }
  }
}

TEST(RowChecks, TextHeadersCarryNoLineBreakOrNul) {
  EXPECT_TRUE(CheckHeaderText("key", "cus_1 ünï").ok());
  EXPECT_EQ(CheckHeaderText("key", "a\r\nX-Injected: 1").message(),
            "key: contains a line break (CR or LF), which a message header cannot carry");
  EXPECT_EQ(CheckHeaderText("topic", std::string("a\0b", 3)).message(),
            "topic: contains a NUL byte, which a message header cannot carry");
  EXPECT_THAT(CheckHeaderListText({{"x-a", "ok"}, {"x-b", "v\n"}}).message(),
              StartsWith("headers: \"x-b\": contains a line break"));
  EXPECT_THAT(CheckHeaderListText({{"x\ra", "ok"}}).message(), HasSubstr("(name)"));
}

// Found while writing the broker_headers fuzz target: NATS headers travel as lines
// "name: value", so a row header named "x-message-id: x" reached a NATS consumer as a second
// x-message-id (nats.c encodes the name as it is), and an empty name failed every attempt
// (natsMsgHeader_Set refuses it) instead of going dead at once.
TEST(RowChecks, HeaderNamesAreFieldNames) {
  EXPECT_TRUE(CheckHeaderNames({{"X-Trace", "a: b"}, {"ünï-code", ""}, {"a.b_c~!", "v"}}).ok());
  EXPECT_EQ(CheckHeaderNames({{"x-a", "ok"}, {"x-message-id: spoof", "v"}}).message(),
            "headers: \"x-message-id: spoof\" (name): contains ':', which a header name "
            "cannot carry");
  EXPECT_EQ(CheckHeaderNames({{"", "v"}}).message(), "headers: a name is empty");
  for (const char* bad : {"a b", "\ta", "a\x7f", "a\x01"}) {
    EXPECT_THAT(CheckHeaderNames({{bad, "v"}}).message(),
                HasSubstr("a space or a control character"))
        << bad;
  }
}

TEST(RowChecks, KafkaTopicNames) {
  EXPECT_TRUE(CheckKafkaTopic("orders.created_v1-eu").ok());
  EXPECT_TRUE(CheckKafkaTopic(std::string(249, 'a')).ok());
  EXPECT_THAT(CheckKafkaTopic(std::string(250, 'a')).message(),
              HasSubstr("is 250 characters; Kafka allows at most 249"));
  EXPECT_THAT(CheckKafkaTopic("orders created").message(), StartsWith("topic: "));
  EXPECT_FALSE(CheckKafkaTopic("..").ok());
  EXPECT_FALSE(CheckKafkaTopic("caf\xC3\xA9").ok());
}

TEST(RowChecks, AmqpShortStrings) {
  EXPECT_TRUE(CheckAmqpShortString("routing key", std::string(255, 'k')).ok());
  EXPECT_THAT(CheckAmqpShortString("routing key", std::string(256, 'k')).message(),
              HasSubstr("routing key: '"));
  EXPECT_THAT(CheckAmqpShortString("routing key", std::string(256, 'k')).message(),
              HasSubstr("is 256 bytes; RabbitMQ allows at most 255"));
}

TEST(RowChecks, NatsSubjects) {
  EXPECT_TRUE(CheckNatsSubject("orders.created").ok());
  EXPECT_TRUE(CheckNatsSubject("a").ok());
  EXPECT_TRUE(CheckNatsSubject("a.b*c.d>").ok());  // not wildcard tokens
  for (const char* bad : {"", ".a", "a.", "a..b", "a.*", "a.>.b", "a b", "a\tb", "a\r\n"}) {
    EXPECT_THAT(CheckNatsSubject(bad).message(), StartsWith("subject: the NATS subject")) << bad;
  }
}

}  // namespace
}  // namespace queuebox
