#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "json/escape.h"

namespace queuebox::log {
namespace {

std::mutex g_mu;
std::shared_ptr<spdlog::logger> g_logger;
std::atomic<bool> g_stdout{false};      // g_logger writes to stdout
std::shared_ptr<LineSink> g_test_sink;  // guarded by g_mu
std::atomic<bool> g_json{true};
std::atomic<int> g_min_level{static_cast<int>(Level::kInfo)};

std::shared_ptr<spdlog::logger> Logger() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_logger) {
    g_logger = std::make_shared<spdlog::logger>("queuebox",
                                                std::make_shared<spdlog::sinks::stderr_sink_mt>());
    g_logger->set_pattern("%v");
  }
  return g_logger;
}

const char* LevelName(Level l) {
  switch (l) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
  }
  return "info";
}

const char* LevelLabel(Level l) {
  switch (l) {
    case Level::kDebug:
      return "DEBUG";
    case Level::kInfo:
      return "INFO ";
    case Level::kWarn:
      return "WARN ";
    case Level::kError:
      return "ERROR";
  }
  return "INFO ";
}

std::string NowIso() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

bool Reserved(std::string_view k) { return k == "time" || k == "level" || k == "message"; }

std::string TextValue(std::string_view v) {
  bool quote = v.empty();
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      quote = true;
    }
  }
  return quote ? queuebox::json::Quoted(v) : std::string(v);
}

}  // namespace

void Init(std::string_view format, std::string_view level, Stream stream) {
  g_json = format != "text";
  Level l = Level::kInfo;
  if (level == "debug") l = Level::kDebug;
  if (level == "warn") l = Level::kWarn;
  if (level == "error") l = Level::kError;
  g_min_level = static_cast<int>(l);
  Logger();
  const bool to_stdout = stream == Stream::kStdout;
  if (to_stdout != g_stdout.exchange(to_stdout)) {
    std::shared_ptr<spdlog::sinks::sink> sink;
    if (to_stdout) {
      sink = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    } else {
      sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    }
    auto replaced = std::make_shared<spdlog::logger>("queuebox", std::move(sink));
    replaced->set_pattern("%v");
    std::lock_guard<std::mutex> lock(g_mu);
    g_logger = std::move(replaced);
  }
}

namespace {

std::string FormatFields(bool json, Level level, std::string_view message,
                         std::span<const Field> fields) {
  if (json) {
    nlohmann::ordered_json j;
    j["time"] = NowIso();
    j["level"] = LevelName(level);
    j["message"] = std::string(message);
    for (const auto& [k, v] : fields) {
      std::string key = Reserved(k) ? "field." + std::string(k) : std::string(k);
      j[key] = v;
    }
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  // Text format: escaped as in JSON, so an event never spans lines.
  std::string line = NowIso() + " " + LevelLabel(level) + " ";
  queuebox::json::AppendEscaped(line, message);
  for (const auto& [k, v] : fields) line += " " + std::string(k) + "=" + TextValue(v);
  return line;
}

void WriteFields(Level level, std::string_view message, std::span<const Field> fields) {
  if (static_cast<int>(level) < g_min_level.load()) return;
  std::string line = FormatFields(g_json.load(), level, message, fields);
  std::shared_ptr<LineSink> sink;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    sink = g_test_sink;
  }
  if (sink) {
    (*sink)(line);
    return;
  }
  Logger()->info(line);
}

}  // namespace

std::string FormatLine(bool json, Level level, std::string_view message,
                       std::initializer_list<Field> fields) {
  return FormatFields(json, level, message, std::span<const Field>(fields.begin(), fields.size()));
}

void SetSinkForTesting(LineSink sink) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_test_sink = sink ? std::make_shared<LineSink>(std::move(sink)) : nullptr;
}

void Write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  WriteFields(level, message, std::span<const Field>(fields.begin(), fields.size()));
}

bool RateLimiter::Allow(int64_t* suppressed) {
  std::lock_guard<std::mutex> lock(mu_);
  auto now = now_ ? now_() : std::chrono::steady_clock::now();
  if (has_last_ && now - last_ < interval_) {
    ++dropped_;
    return false;
  }
  has_last_ = true;
  last_ = now;
  if (suppressed != nullptr) *suppressed = dropped_;
  dropped_ = 0;
  return true;
}

int64_t RateLimiter::TakeSuppressed() {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = dropped_;
  dropped_ = 0;
  return n;
}

bool WriteLimited(RateLimiter& limiter, Level level, std::string_view message,
                  std::initializer_list<Field> fields) {
  int64_t suppressed = 0;
  if (!limiter.Allow(&suppressed)) return false;
  std::vector<Field> all(fields.begin(), fields.end());
  if (suppressed > 0) all.emplace_back("suppressed", std::to_string(suppressed));
  WriteFields(level, message, all);
  return true;
}

}  // namespace queuebox::log
