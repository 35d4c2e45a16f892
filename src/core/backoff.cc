#include "core/backoff.h"

#include <algorithm>
#include <random>

namespace queuebox {
namespace {

std::mt19937_64& Engine() {
  thread_local std::mt19937_64 engine(std::random_device{}());
  return engine;
}

int64_t ExponentialPart(int attempt, int64_t base_ms) {
  int exp = std::clamp(attempt, 0, 20);
  int64_t base = std::max<int64_t>(base_ms, 0);
  // base * 2^exp without overflow: cap early, the result is capped at 60 s anyway.
  int64_t v = base;
  for (int i = 0; i < exp && v < kMaxRetryDelayMs * 4; ++i) v *= 2;
  return v;
}

}  // namespace

int64_t RetryDelayMsWithJitter(int attempt, int64_t base_ms, int64_t jitter) {
  int64_t exp = ExponentialPart(attempt, base_ms);
  int64_t max_jitter = std::max<int64_t>(1, exp / 4);
  return std::min(kMaxRetryDelayMs, exp + std::clamp<int64_t>(jitter, 0, max_jitter));
}

int64_t RetryDelayMs(int attempt, int64_t base_ms) {
  int64_t exp = ExponentialPart(attempt, base_ms);
  int64_t max_jitter = std::max<int64_t>(1, exp / 4);
  std::uniform_int_distribution<int64_t> dist(0, max_jitter);
  return RetryDelayMsWithJitter(attempt, base_ms, dist(Engine()));
}

int64_t ReconnectDelayMs(int failures, int64_t initial_ms, int64_t cap_ms) {
  int64_t v = std::max<int64_t>(1, initial_ms);
  for (int i = 0; i < failures && v < cap_ms; ++i) v *= 2;
  v = std::min(v, cap_ms);
  std::uniform_real_distribution<double> dist(0.5, 1.0);
  return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(v) * dist(Engine())));
}

}  // namespace queuebox
