// log.h: structured logs (spdlog). One line per event with level, time, message and fields
// (message id, topic, key, attempt, destination where they apply). Never payloads or secrets:
// callers pass ids and names only, and every error text goes through core/redaction first.
//
// Formats: "json" (one JSON object per line, for machines) and "text" (for terminals).
// Thread-safety: all functions are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace queuebox::log {

enum class Level { kDebug, kInfo, kWarn, kError };

// A field of a log line: name and value as text (numbers are rendered by the caller).
using Field = std::pair<std::string_view, std::string>;

enum class Stream { kStderr, kStdout };

// Sets up the process logger. format: "json" | "text"; level: debug|info|warn|error.
// Logs go to `stream` (stderr unless asked). Safe to call again (replaces the sink).
void Init(std::string_view format, std::string_view level, Stream stream = Stream::kStderr);

void Write(Level level, std::string_view message, std::initializer_list<Field> fields = {});
inline void Debug(std::string_view m, std::initializer_list<Field> f = {}) {
  Write(Level::kDebug, m, f);
}
inline void Info(std::string_view m, std::initializer_list<Field> f = {}) {
  Write(Level::kInfo, m, f);
}
inline void Warn(std::string_view m, std::initializer_list<Field> f = {}) {
  Write(Level::kWarn, m, f);
}
inline void Error(std::string_view m, std::initializer_list<Field> f = {}) {
  Write(Level::kError, m, f);
}

// The line Write would emit, without the trailing newline. JSON: {"time","level","message",
// then the fields in order}; a field named like a reserved key is written as "field.<name>".
// Text: "<time> <LEVEL> <message> key=value ..."; values with spaces, quotes or '=' are quoted
// and control characters escaped, so one event is always one line.
std::string FormatLine(bool json, Level level, std::string_view message,
                       std::initializer_list<Field> fields);

// Receives every written line instead of stderr (tests); nullptr restores stderr.
using LineSink = std::function<void(std::string_view line)>;
void SetSinkForTesting(LineSink sink);

// Rate limit for repeated errors during an outage (scenarios S6, S7): at most one line per
// `interval`; the next line that passes reports how many were suppressed in between.
class RateLimiter {
 public:
  using SteadyNow = std::function<std::chrono::steady_clock::time_point()>;
  // `now`: the clock the interval is measured on; the steady clock when unset (tests inject).
  explicit RateLimiter(std::chrono::milliseconds interval, SteadyNow now = {})
      : interval_(interval), now_(std::move(now)) {}
  // True when the caller may log now; `suppressed` gets the count dropped since the last pass.
  bool Allow(int64_t* suppressed);
  // The count dropped since the last pass, reset to 0 (a final summary line at the end of an
  // outage).
  int64_t TakeSuppressed();

 private:
  std::mutex mu_;
  std::chrono::milliseconds interval_;
  SteadyNow now_;
  std::chrono::steady_clock::time_point last_{};
  bool has_last_ = false;
  int64_t dropped_ = 0;
};

// Writes the line when `limiter` allows it; when lines were dropped before it, adds the field
// suppressed=<n>. Returns true when a line was written.
bool WriteLimited(RateLimiter& limiter, Level level, std::string_view message,
                  std::initializer_list<Field> fields = {});

}  // namespace queuebox::log
