#include "json/escape.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace queuebox::json {
namespace {

TEST(JsonEscapeTest, QuotesAndBackslashTakeABackslash) {
  EXPECT_EQ(Quoted(R"(say "hi" \ bye)"), R"("say \"hi\" \\ bye")");
}

TEST(JsonEscapeTest, ControlCharactersAreEscapedShortOrAsU00) {
  EXPECT_EQ(Quoted("\b\f\n\r\t"), R"("\b\f\n\r\t")");
  EXPECT_EQ(Quoted(std::string("a\0b", 3)), R"("a\u0000b")");
  EXPECT_EQ(Quoted("\x01\x1b\x1f"), R"("\u0001\u001b\u001f")");
  EXPECT_EQ(Quoted("\x7f"), "\"\x7f\"");  // DEL is not a JSON control character
}

TEST(JsonEscapeTest, Utf8PassesThroughUnchanged) {
  const std::string text = "gr\xC3\xBC\xC3\x9F \xE2\x82\xAC \xF0\x9F\x93\xA6 \xE4\xB8\xAD";
  EXPECT_EQ(Quoted(text), "\"" + text + "\"");
  // Bytes that are not UTF-8 pass through too: the caller checks UTF-8 where it must.
  EXPECT_EQ(Quoted("\xFF\xE2\x80"), "\"\xFF\xE2\x80\"");
}

TEST(JsonEscapeTest, LineAndParagraphSeparatorsAreEscaped) {
  EXPECT_EQ(Quoted("l\xE2\x80\xA8p\xE2\x80\xA9"), R"("l\u2028p\u2029")");
  EXPECT_EQ(Quoted("\xE2\x80\xA7"), "\"\xE2\x80\xA7\"");  // U+2027 stays
}

TEST(JsonEscapeTest, AppendEscapedWritesNoQuotesAndKeepsWhatIsThere) {
  std::string out = "key=";
  AppendEscaped(out, "a\"b");
  EXPECT_EQ(out, R"(key=a\"b)");
}

TEST(JsonEscapeTest, EveryByteBelow0x80RoundTripsThroughAJsonParser) {
  std::string all;
  for (int c = 0; c < 0x80; ++c) all.push_back(static_cast<char>(c));
  all += "\xE2\x80\xA8 \xC3\xBC";
  EXPECT_EQ(nlohmann::json::parse(Quoted(all)).get<std::string>(), all);
}

}  // namespace
}  // namespace queuebox::json
