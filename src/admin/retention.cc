#include "admin/retention.h"

#include "admin/metrics.h"
#include "core/log.h"

namespace queuebox {

RetentionService::RetentionService(OutboxOperations* store, RetentionConfig config,
                                   Metrics* metrics)
    : store_(store), config_(std::move(config)), metrics_(metrics) {}

RetentionService::~RetentionService() { Stop(); }

Result<bool> RetentionService::Validate(const RetentionConfig& config) {
  const RetentionPolicy& p = config.outbox;
  if (p.policy == "AGE") {
    if (!p.max_age_ms || *p.max_age_ms < 0) {
      return InvalidArgument("retention.outbox.maxAge is required by policy AGE (e.g. 7d)");
    }
  } else if (p.policy == "COUNT") {
    if (!p.max_count || *p.max_count <= 0) {
      return InvalidArgument("retention.outbox.maxCount is required by policy COUNT (> 0)");
    }
  } else if (p.policy != "DISABLED") {
    return InvalidArgument("retention.outbox.policy must be AGE, COUNT or DISABLED (got '" +
                           p.policy + "')");
  }
  if (p.batch_size <= 0) return InvalidArgument("retention.outbox.batchSize must be > 0");
  return config.enabled && p.policy != "DISABLED";
}

Status RetentionService::Start() {
  QB_ASSIGN_OR_RETURN(bool active, Validate(config_));
  if (!active || thread_.joinable()) return Status::Ok();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  running_ = true;
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void RetentionService::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  running_ = false;
}

bool RetentionService::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  auto deadline = std::chrono::steady_clock::now() + d;
  // Slices of 100 ms mirror QueueBox; the condition variable also wakes at once on Stop.
  while (!stop_ && std::chrono::steady_clock::now() < deadline) {
    auto slice = std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(100), deadline - std::chrono::steady_clock::now());
    cv_.wait_for(lock, slice, [this] { return stop_; });
  }
  return !stop_;
}

void RetentionService::Loop() {
  log::Info("The retention service started.",
            {{"table", "outbox"},
             {"policy", config_.outbox.policy},
             {"interval_ms", std::to_string(config_.outbox.cleanup_interval_ms)}});
  do {
    auto r = RunOnce();
    if (!r.ok()) {
      log::Error("The retention run failed. The next run retries.",
                 {{"table", "outbox"}, {"reason", r.status().ToString()}});
    }
  } while (SleepFor(std::chrono::milliseconds(config_.outbox.cleanup_interval_ms)));
  running_ = false;
}

Result<int64_t> RetentionService::RunOnce() {
  QB_RETURN_IF_ERROR(Validate(config_).status());
  const RetentionPolicy& p = config_.outbox;
  auto started = std::chrono::steady_clock::now();
  int64_t total = 0;
  Status failure;
  for (const char* state : {kStateSent, kStateDead}) {
    while (true) {
      Result<int64_t> n =
          p.policy == "AGE"     ? store_->DeleteOlderThan(state, *p.max_age_ms, p.batch_size)
          : p.policy == "COUNT" ? store_->DeleteBeyondCount(state, *p.max_count, p.batch_size)
                                : Result<int64_t>(int64_t{0});
      if (!n.ok()) {
        failure = n.status();
        break;
      }
      total += *n;
      if (*n < p.batch_size) break;
      if (!SleepFor(std::chrono::milliseconds(10))) break;
    }
    if (!failure.ok()) break;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (metrics_ != nullptr) metrics_->OnCleanup("outbox", total, seconds);
  runs_++;
  if (!failure.ok()) return failure;
  if (total > 0) {
    log::Info("Retention deleted " + std::to_string(total) + " outbox row(s).",
              {{"table", "outbox"}, {"deleted", std::to_string(total)}});
  }
  return total;
}

}  // namespace queuebox
