// intake_parts.h: the small rules of receiving a message that every source kind shares
// (QueueBox reference §9.3, §11.1, §11.5): the per-source token bucket, the publish-time parse,
// the correlation id, the stored headers.
//
// Thread-safety: RateLimiter is thread-safe; the functions are pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json_path.h"
#include "queuebox/status.h"

namespace queuebox::sources {

// The longest message key a source accepts, in characters (QueueBox rejects longer keys).
inline constexpr size_t kMaxKeyChars = 255;

// One token bucket per source (rateLimit.requestsPerMinute): `limit` tokens, all of them back
// 60 s after the period began (QueueBox's rate limiter refills per period, not per client).
class RateLimiter {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  explicit RateLimiter(int limit, std::chrono::milliseconds period = std::chrono::seconds(60),
                       Clock clock = nullptr);

  // 0 when a token was taken; else the whole seconds (>= 1) until the next refill, for
  // Retry-After.
  int64_t TryAcquire();

 private:
  const int limit_;
  const std::chrono::milliseconds period_;
  Clock clock_;
  std::mutex mu_;
  int tokens_;
  std::chrono::steady_clock::time_point period_start_;
};

// A publish time (scheduledAtHeader/Path): trimmed; an integer below 100,000,000,000 is epoch
// seconds, a larger one epoch milliseconds, a negative one invalid; otherwise an ISO-8601 instant
// with an offset (Z or +hh:mm). Unix ms within 1970-01-01..9999-12-31T23:59:59Z, else nullopt.
std::optional<int64_t> ParsePublishTime(std::string_view text);

// X-Correlation-Id as stored: control characters removed, at most 128 characters (code points);
// "" when nothing is left.
std::string SanitizeCorrelationId(std::string_view value);

// A new random UUID (v4), lowercase.
std::string NewUuid();

// The headers stored with a row: one value per name (any letter case; the last wins, under the
// last spelling), without Authorization, Proxy-Authorization, Cookie and `credential_headers`
// (the source auth's headers; may be none). A JSON object text.
std::string StoredHeaders(const std::vector<std::pair<std::string, std::string>>& headers,
                          const std::vector<std::string>& credential_headers);

// `s` without leading and trailing blanks (space, tab, CR, LF).
std::string Trimmed(std::string_view s);

// True when `s` is well-formed UTF-8 (no overlong form, surrogate or code point past U+10FFFF)
// without a NUL byte.
bool IsUtf8(std::string_view s);

// Unicode code points of UTF-8 text (continuation bytes not counted).
size_t CodePoints(std::string_view s);

// Compiles each path; kInvalidArgument "<key>: <why>" for the first that is not a definite
// JSONPath (`key` names the option, e.g. sources.orders.idempotencyKeyPath).
Result<std::vector<JsonPath>> CompilePaths(const std::vector<std::string>& paths,
                                           const std::string& key);

// The headers of StoredHeaders' JSON object text as pairs (the source stage's $headers); empty
// for text that is not an object.
std::vector<std::pair<std::string, std::string>> StoredHeaderPairs(std::string_view stored);

// The system clock as ISO-8601 UTC with milliseconds: the source stage's $timestamp, a display
// value (the row's times come from the database).
std::string NowIso();

// The deepest nesting of arrays and objects in JSON text (strings skipped), scanning no deeper
// than `limit` + 1: a cheap guard before a recursive parser.
int JsonDepth(std::string_view text, int limit);

}  // namespace queuebox::sources
