#include "json/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace queuebox::json {
namespace {

TEST(Utf8Test, AcceptsEveryLengthAndCountsCodePoints) {
  // "a", "é" (2 bytes), "€" (3), "😀" (4), and NUL, which is a code point.
  const std::string s = std::string("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80") + '\0';
  EXPECT_EQ(FirstInvalidUtf8(s), std::nullopt);
  EXPECT_EQ(Utf8CodePoints(s), 5u);
  EXPECT_EQ(Utf8SequenceLength(s, 0), 1u);
  EXPECT_EQ(Utf8SequenceLength(s, 1), 2u);
  EXPECT_EQ(Utf8SequenceLength(s, 3), 3u);
  EXPECT_EQ(Utf8SequenceLength(s, 6), 4u);
  EXPECT_EQ(Utf8CodePoints(""), 0u);
}

TEST(Utf8Test, RefusesWhatRfc3629Refuses) {
  const struct {
    std::string bytes;
    size_t first_bad;
  } cases[] = {
      {"ab\x80", 2},            // a stray continuation byte
      {"\xC0\xAF", 0},          // overlong "/" (C0 never starts a sequence)
      {"x\xE0\x80\xAF", 1},     // overlong in three bytes
      {"\xF0\x80\x80\xAF", 0},  // overlong in four bytes
      {"ok\xED\xA0\x80", 2},    // U+D800, a surrogate
      {"\xF4\x90\x80\x80", 0},  // U+110000, past the last code point
      {"\xF5\x80\x80\x80", 0},  // F5 never starts a sequence
      {"abc\xE2\x82", 3},       // cut short at the end
      {"\xC3(", 0},             // a continuation byte missing
  };
  for (const auto& c : cases) {
    EXPECT_EQ(FirstInvalidUtf8(c.bytes), c.first_bad) << testing::PrintToString(c.bytes);
    EXPECT_EQ(Utf8CodePoints(c.bytes), std::nullopt) << testing::PrintToString(c.bytes);
  }
}

TEST(Utf8Test, TheLargestValidSequencesPass) {
  EXPECT_EQ(Utf8CodePoints("\xF4\x8F\xBF\xBF"), 1u);  // U+10FFFF
  EXPECT_EQ(Utf8CodePoints("\xED\x9F\xBF"), 1u);      // U+D7FF, just below the surrogates
  EXPECT_EQ(Utf8CodePoints("\xEE\x80\x80"), 1u);      // U+E000, just above them
  EXPECT_EQ(Utf8CodePoints("\xC2\x80"), 1u);          // U+0080, the smallest two-byte form
}

}  // namespace
}  // namespace queuebox::json
