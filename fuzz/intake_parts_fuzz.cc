// intake_parts_fuzz: the rules every source applies to what a sender writes (sources/
// intake_parts.h). The whole input is tried as a publish time, an X-Correlation-Id, a JSON body
// (the nesting guard) and text to trim; read as lines "name: value" it is a request's headers.
// Properties: ParsePublishTime accepts only digits or an ISO-8601 instant, within 1970..9999,
// and what it accepts reads back the same (the epoch number and the instant it names);
// SanitizeCorrelationId gives trimmed UTF-8 without control characters, at most 128 code points,
// and is idempotent; JsonDepth agrees with nlohmann's parser on JSON and never reports past
// limit + 1; StoredHeaders keeps the last value of each name except the credentials, and
// StoredHeaderPairs reads them back.
#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_util.h"
#include "sources/intake_parts.h"

using queuebox::fuzz::Require;
namespace s = queuebox::sources;

namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string LowerText(std::string_view v) {
  std::string out(v);
  for (char& c : out) c = Lower(c);
  return out;
}

bool AllDigits(std::string_view v) {
  if (v.empty()) return false;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// y-m-d of days since 1970-01-01 (Howard Hinnant's civil_from_days).
void CivilFromDays(int64_t z, int64_t& y, unsigned& m, unsigned& d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y += m <= 2;
}

// Unix ms as YYYY-MM-DDThh:mm:ss.fffZ.
std::string Iso(int64_t ms) {
  int64_t secs = ms / 1000, days = secs / 86400, y = 0;
  unsigned m = 0, d = 0;
  CivilFromDays(days, y, m, d);
  const int64_t sod = secs % 86400;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%03lldZ",
                static_cast<long long>(y), m, d, static_cast<long long>(sod / 3600),
                static_cast<long long>(sod / 60 % 60), static_cast<long long>(sod % 60),
                static_cast<long long>(ms % 1000));
  return buf;
}

void CheckPublishTime(std::string_view text) {
  std::optional<int64_t> ms = s::ParsePublishTime(text);
  if (!ms) return;
  constexpr int64_t kMaxMs = 253'402'300'799LL * 1000 + 999;  // 9999-12-31T23:59:59.999Z
  Require(*ms >= 0 && *ms <= kMaxMs, "an accepted publish time is within 1970..9999");
  // ParsePublishTime trims every isspace byte (also \v and \f).
  std::string_view t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  const bool number = AllDigits(t) || (t.size() > 1 && t[0] == '-' && AllDigits(t.substr(1)) &&
                                       t.find_first_not_of("-0") == std::string::npos);
  if (!number) {
    // YYYY-MM-DDThh:mm then seconds, fraction and offset: nothing but those characters.
    Require(t.size() >= 17 && t.find_first_not_of("0123456789-:.+TtZz") == std::string::npos,
            "an accepted publish time is a number or an ISO-8601 instant");
    // Written in UTC with seconds below 60, the instant reads back as the same fields.
    const size_t end = t.size() - 1;
    if ((t[end] == 'Z' || t[end] == 'z') && t.size() >= 20 && t[16] == ':' && t[17] < '6') {
      std::string expected(t.substr(0, 19));
      expected[10] = 'T';
      Require(Iso(*ms).substr(0, 19) == expected, "an accepted instant names its own fields");
    }
  }
  Require(s::ParsePublishTime(Iso(*ms)) == ms, "an accepted publish time round-trips as ISO");
  if (*ms >= 100'000'000'000LL) {
    Require(s::ParsePublishTime(std::to_string(*ms)) == ms, "epoch ms round-trip");
  }
  if (*ms % 1000 == 0 && *ms / 1000 < 100'000'000'000LL) {
    Require(s::ParsePublishTime(std::to_string(*ms / 1000)) == ms, "epoch seconds round-trip");
  }
}

void CheckCorrelationId(std::string_view text) {
  const std::string id = s::SanitizeCorrelationId(text);
  Require(queuebox::fuzz::ValidUtf8(id), "a correlation id is UTF-8");
  Require(queuebox::fuzz::CodePoints(id) <= 128, "a correlation id is at most 128 code points");
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    Require(c >= 0x20 && c != 0x7f, "a correlation id holds no C0 control or DEL");
    if (c == 0xc2 && i + 1 < id.size()) {
      Require(static_cast<unsigned char>(id[i + 1]) >= 0xa0, "a correlation id holds no C1");
    }
  }
  Require(id.empty() || (id.front() != ' ' && id.back() != ' '), "a correlation id is trimmed");
  Require(s::SanitizeCorrelationId(id) == id, "sanitizing twice changes nothing");
  // Clean, short text is kept as it is (trimmed).
  bool clean = queuebox::fuzz::ValidUtf8(text) && queuebox::fuzz::CodePoints(text) <= 128;
  for (size_t i = 0; clean && i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    clean = c >= 0x20 && c != 0x7f &&
            !(c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xa0);
  }
  if (clean) Require(id == s::Trimmed(text), "clean text is kept, trimmed");
}

// The nesting of JSON text as nlohmann's (non-recursive) SAX parser sees it; nullopt when the
// text is not JSON.
struct DepthSax : nlohmann::json_sax<nlohmann::json> {
  int depth = 0, deepest = 0;
  bool Open() {
    deepest = std::max(deepest, ++depth);
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return Open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return Open(); }
  bool end_array() override { return --depth, true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

void CheckJsonDepth(std::string_view text) {
  const int unbounded = s::JsonDepth(text, 1 << 30);
  for (int limit : {0, 1, 2, 5, 64}) {
    const int d = s::JsonDepth(text, limit);
    Require(d >= 0 && d <= limit + 1, "JsonDepth scans no deeper than limit + 1");
    Require((d > limit) == (unbounded > limit), "JsonDepth's verdict does not depend on the limit");
  }
  // nlohmann's lexer ends the input at a NUL byte ("2\0{" parses as 2), so the comparison holds
  // only for text without one (docs/testing.md, "Fuzzing": found, not fixed).
  DepthSax sax;
  if (text.find('\0') == std::string_view::npos &&
      nlohmann::json::sax_parse(text, &sax, nlohmann::json::input_format_t::json, true)) {
    Require(unbounded == sax.deepest, "JsonDepth agrees with the parser on JSON");
  }
}

// Lines "name: value" (a line without ':' is a name with an empty value).
std::vector<std::pair<std::string, std::string>> Headers(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty() && out.size() < 64) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    size_t colon = line.find(':');
    std::string_view name = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    out.emplace_back(std::string(name), std::string(value));
  }
  return out;
}

void CheckStoredHeaders(std::string_view text) {
  const auto headers = Headers(text);
  const std::string stored = s::StoredHeaders(headers, {"X-Api-Key"});
  nlohmann::json j = nlohmann::json::parse(stored, nullptr, false);
  Require(j.is_object(), "stored headers are a JSON object");
  // What should be kept: the last of each name (any case), under its last spelling.
  std::vector<std::pair<std::string, std::string>> expected;
  bool utf8 = true;
  for (const auto& [name, value] : headers) {
    const std::string lower = LowerText(name);
    if (lower == "authorization" || lower == "proxy-authorization" || lower == "cookie" ||
        lower == "x-api-key") {
      continue;
    }
    utf8 = utf8 && queuebox::fuzz::ValidUtf8(name) && queuebox::fuzz::ValidUtf8(value);
    std::erase_if(expected, [&](const auto& h) { return LowerText(h.first) == lower; });
    expected.emplace_back(name, value);
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string lower = LowerText(it.key());
    Require(lower != "authorization" && lower != "proxy-authorization" && lower != "cookie" &&
                lower != "x-api-key",
            "credentials are never stored");
  }
  if (utf8) {
    // StoredHeaderPairs reads an unordered object: compare by name.
    auto pairs = s::StoredHeaderPairs(stored);
    std::sort(pairs.begin(), pairs.end());
    std::sort(expected.begin(), expected.end());
    Require(pairs == expected, "stored headers are the last of each name and read back");
  } else {
    Require(j.size() <= expected.size(), "no header is invented");
  }
}

void CheckTrimmed(std::string_view text) {
  const std::string t = s::Trimmed(text);
  Require(text.find(t) != std::string_view::npos, "trimmed text is part of the text");
  if (!t.empty()) {
    Require(std::string_view(" \t\r\n").find(t.front()) == std::string_view::npos &&
                std::string_view(" \t\r\n").find(t.back()) == std::string_view::npos,
            "trimmed text has no blanks at its ends");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckPublishTime(text);
  CheckCorrelationId(text);
  CheckJsonDepth(text);
  CheckStoredHeaders(text);
  CheckTrimmed(text);
  return 0;
}
