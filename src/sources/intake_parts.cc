#include "sources/intake_parts.h"

#include <openssl/rand.h>
#include <uuid/uuid.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "json/utf8.h"

namespace queuebox::sources {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

constexpr int64_t kSecondsLimit = 100'000'000'000LL;
constexpr int64_t kMaxEpochSeconds = 253'402'300'799LL;  // 9999-12-31T23:59:59Z

// Days from 1970-01-01 to y-m-d (proleptic Gregorian; Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

int DaysInMonth(int y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

bool Digits(std::string_view s, size_t at, size_t n, int& out) {
  if (at + n > s.size()) return false;
  out = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

// YYYY-MM-DDThh:mm[:ss[.fff...]](Z|+hh:mm|-hh:mm) -> Unix ms.
std::optional<int64_t> ParseIso(std::string_view s) {
  int y, mo, d, h, mi, sec = 0;
  if (!Digits(s, 0, 4, y) || s.size() < 16 || s[4] != '-' || !Digits(s, 5, 2, mo) || s[7] != '-' ||
      !Digits(s, 8, 2, d) || (s[10] != 'T' && s[10] != 't') || !Digits(s, 11, 2, h) ||
      s[13] != ':' || !Digits(s, 14, 2, mi)) {
    return std::nullopt;
  }
  size_t i = 16;
  int64_t millis = 0;
  if (i < s.size() && s[i] == ':') {
    if (!Digits(s, i + 1, 2, sec)) return std::nullopt;
    i += 3;
    if (i < s.size() && s[i] == '.') {
      ++i;
      int64_t scale = 100;
      size_t start = i;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        millis += (s[i] - '0') * scale;
        scale /= 10;
        ++i;
      }
      if (i == start) return std::nullopt;
    }
  }
  if (mo < 1 || mo > 12 || d < 1 || d > DaysInMonth(y, mo) || h > 23 || mi > 59 || sec > 60) {
    return std::nullopt;
  }
  int64_t offset_s = 0;
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    int oh, om;
    if (!Digits(s, i + 1, 2, oh) || i + 3 >= s.size() || s[i + 3] != ':' ||
        !Digits(s, i + 4, 2, om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_s = (s[i] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
    i += 6;
  } else {
    return std::nullopt;  // an instant needs its offset
  }
  if (i != s.size()) return std::nullopt;
  int64_t days = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - offset_s;
  if (secs < 0 || secs > kMaxEpochSeconds) return std::nullopt;
  return secs * 1000 + millis;
}

}  // namespace

RateLimiter::RateLimiter(int limit, std::chrono::milliseconds period, Clock clock)
    : limit_(limit), period_(period), clock_(std::move(clock)), tokens_(limit) {
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
  period_start_ = clock_();
}

int64_t RateLimiter::TryAcquire() {
  std::lock_guard<std::mutex> lock(mu_);
  auto now = clock_();
  if (now - period_start_ >= period_) {
    tokens_ = limit_;
    period_start_ = now;
  }
  if (tokens_ > 0) {
    --tokens_;
    return 0;
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(period_start_ + period_ - now);
  return std::max<int64_t>(1, (left.count() + 999) / 1000);
}

std::optional<int64_t> ParsePublishTime(std::string_view text) {
  std::string_view s = Trim(text);
  if (s.empty()) return std::nullopt;
  int64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec == std::errc() && p == s.data() + s.size()) {
    if (n < 0) return std::nullopt;
    int64_t ms = n < kSecondsLimit ? n * 1000 : n;
    if (ms / 1000 > kMaxEpochSeconds) return std::nullopt;
    return ms;
  }
  if (ec == std::errc::result_out_of_range) return std::nullopt;
  return ParseIso(s);
}

std::string SanitizeCorrelationId(std::string_view value) {
  std::string out;
  size_t code_points = 0;
  for (size_t i = 0; i < value.size() && code_points < 128;) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 1;
    if (i + len > value.size()) {  // a sequence cut short: drop its lead byte, keep the rest
      ++i;
      continue;
    }
    bool valid = true;
    uint32_t cp = len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (size_t k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(value[i + k]);
      valid = valid && (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    // Only well-formed UTF-8: no overlong form, surrogate or code point past U+10FFFF.
    if (valid &&
        ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
         (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))) {
      valid = false;
    }
    if (!valid || (len == 1 && (c < 0x20 || c == 0x7F || c >= 0x80))) {  // control or stray byte
      ++i;
      continue;
    }
    // C1 controls U+0080..U+009F arrive as 0xC2 0x80..0x9F.
    if (len == 2 && c == 0xC2 && static_cast<unsigned char>(value[i + 1]) < 0xA0) {
      i += 2;
      continue;
    }
    out.append(value.substr(i, len));
    i += len;
    ++code_points;
  }
  return std::string(Trim(out));
}

std::string NewUuid() {
  // OpenSSL's per-thread generator: no system call per id (libuuid's uuid_generate_random made a
  // getrandom call, a random() crank and a getpid per id; one id per webhook without an
  // X-Correlation-Id). libuuid stays the fallback should the generator ever fail.
  unsigned char u[16];
  if (RAND_bytes(u, sizeof u) != 1) {
    uuid_t fallback;
    uuid_generate_random(fallback);
    std::copy(fallback, fallback + sizeof u, u);
  }
  u[6] = static_cast<unsigned char>((u[6] & 0x0F) | 0x40);  // version 4
  u[8] = static_cast<unsigned char>((u[8] & 0x3F) | 0x80);  // RFC 4122 variant
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += kHex[u[i] >> 4];
    out += kHex[u[i] & 0x0F];
  }
  return out;
}

std::string StoredHeaders(const std::vector<std::pair<std::string, std::string>>& headers,
                          const std::vector<std::string>& credential_headers) {
  std::vector<std::string> credentials;
  for (const std::string& h : credential_headers) {
    if (!h.empty()) credentials.push_back(Lower(h));
  }
  // Last occurrence of each name (any case) wins, under its own spelling.
  std::vector<std::pair<std::string, std::string>> kept;
  for (const auto& [name, value] : headers) {
    const std::string lower = Lower(name);
    if (lower == "authorization" || lower == "proxy-authorization" || lower == "cookie" ||
        std::find(credentials.begin(), credentials.end(), lower) != credentials.end()) {
      continue;
    }
    kept.erase(std::remove_if(kept.begin(), kept.end(),
                              [&](const auto& h) { return Lower(h.first) == lower; }),
               kept.end());
    kept.emplace_back(name, value);
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (auto& [name, value] : kept) out[name] = value;
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int JsonDepth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// The system clock as ISO-8601 UTC with milliseconds ($timestamp of the source stage, a display
// value; the row's times come from the database).
std::string NowIso() {
  const auto now = std::chrono::system_clock::now();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

std::vector<std::pair<std::string, std::string>> StoredHeaderPairs(std::string_view stored) {
  std::vector<std::pair<std::string, std::string>> out;
  nlohmann::json j = nlohmann::json::parse(stored, nullptr, false);
  if (!j.is_object()) return out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.value().is_string()) out.emplace_back(it.key(), it.value().get<std::string>());
  }
  return out;
}

std::string Trimmed(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return std::string();
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

bool IsUtf8(std::string_view s) {
  return s.find('\0') == std::string_view::npos && !queuebox::json::FirstInvalidUtf8(s);
}

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

Result<std::vector<JsonPath>> CompilePaths(const std::vector<std::string>& paths,
                                           const std::string& key) {
  std::vector<JsonPath> out;
  for (const std::string& p : paths) {
    auto compiled = JsonPath::Compile(p);
    if (!compiled.ok()) return InvalidArgument(key + ": " + compiled.status().message());
    out.push_back(std::move(compiled).value());
  }
  return out;
}

}  // namespace queuebox::sources
