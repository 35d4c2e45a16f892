#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

namespace queuebox::log {
namespace {

std::mutex g_mu;
std::shared_ptr<spdlog::logger> g_logger;
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
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
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

}  // namespace

void Init(std::string_view format, std::string_view level) {
  g_json = format != "text";
  Level l = Level::kInfo;
  if (level == "debug") l = Level::kDebug;
  if (level == "warn") l = Level::kWarn;
  if (level == "error") l = Level::kError;
  g_min_level = static_cast<int>(l);
  Logger();
}

void Write(Level level, std::string_view message, std::initializer_list<Field> fields) {
  if (static_cast<int>(level) < g_min_level.load()) return;
  std::string line;
  if (g_json) {
    nlohmann::ordered_json j;
    j["time"] = NowIso();
    j["level"] = LevelName(level);
    j["message"] = std::string(message);
    for (const auto& [k, v] : fields) j[std::string(k)] = v;
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = NowIso() + " " + LevelName(level) + " " + std::string(message);
    for (const auto& [k, v] : fields) line += " " + std::string(k) + "=" + v;
  }
  Logger()->info(line);
}

bool RateLimiter::Allow(int64_t* suppressed) {
  std::lock_guard<std::mutex> lock(mu_);
  auto now = std::chrono::steady_clock::now();
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

}  // namespace queuebox::log
