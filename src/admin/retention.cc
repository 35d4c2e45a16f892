#include "admin/retention.h"

#include <string>

#include "admin/metrics.h"
#include "core/log.h"

namespace queuebox {
namespace {

Status ValidatePolicy(const RetentionPolicy& p, const std::string& table) {
  const std::string prefix = "retention." + table;
  if (p.policy == "AGE") {
    if (!p.max_age_ms || *p.max_age_ms < 0) {
      return InvalidArgument(prefix + ".maxAge is required by policy AGE (e.g. 7d)");
    }
  } else if (p.policy == "COUNT") {
    if (!p.max_count || *p.max_count <= 0) {
      return InvalidArgument(prefix + ".maxCount is required by policy COUNT (> 0)");
    }
  } else if (p.policy != "DISABLED") {
    return InvalidArgument(prefix + ".policy must be AGE, COUNT or DISABLED (got '" + p.policy +
                           "')");
  }
  if (p.batch_size <= 0) return InvalidArgument(prefix + ".batchSize must be > 0");
  return Status::Ok();
}

}  // namespace

RetentionService::RetentionService(OutboxOperations* outbox, InboxOperations* inbox,
                                   RetentionConfig config, Metrics* metrics)
    : outbox_(outbox), inbox_(inbox), config_(std::move(config)), metrics_(metrics) {}

RetentionService::~RetentionService() { Stop(); }

Result<bool> RetentionService::Validate(const RetentionConfig& config) {
  QB_RETURN_IF_ERROR(ValidatePolicy(config.outbox, "outbox"));
  QB_RETURN_IF_ERROR(ValidatePolicy(config.inbox, "inbox"));
  return config.enabled &&
         (config.outbox.policy != "DISABLED" || config.inbox.policy != "DISABLED");
}

Status RetentionService::Start() {
  QB_ASSIGN_OR_RETURN(bool active, Validate(config_));
  if (!active || !threads_.empty()) return Status::Ok();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = false;
  }
  std::vector<std::string_view> tables;
  if (config_.outbox.policy != "DISABLED") tables.push_back("outbox");
  if (config_.inbox.policy != "DISABLED" && inbox_ != nullptr) tables.push_back("inbox");
  started_ = static_cast<int>(tables.size());
  running_ = started_.load();
  for (std::string_view table : tables) threads_.emplace_back([this, table] { Loop(table); });
  return Status::Ok();
}

void RetentionService::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  running_ = 0;
  started_ = 0;
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

void RetentionService::Loop(std::string_view table) {
  const RetentionPolicy& p = table == "inbox" ? config_.inbox : config_.outbox;
  log::Info("The retention service started.",
            {{"table", std::string(table)},
             {"policy", p.policy},
             {"interval_ms", std::to_string(p.cleanup_interval_ms)}});
  do {
    auto r = RunTable(table);
    if (!r.ok()) {
      log::Error("The retention run failed. The next run retries.",
                 {{"table", std::string(table)}, {"reason", r.status().ToString()}});
    }
  } while (SleepFor(std::chrono::milliseconds(p.cleanup_interval_ms)));
  --running_;
}

Result<int64_t> RetentionService::RunOnce() { return RunTable("outbox"); }

Result<int64_t> RetentionService::RunOnceInbox() {
  if (inbox_ == nullptr) return FailedPrecondition("the retention service has no inbox store");
  return RunTable("inbox");
}

Result<int64_t> RetentionService::RunTable(std::string_view table) {
  QB_RETURN_IF_ERROR(Validate(config_).status());
  const bool inbox = table == "inbox";
  const RetentionPolicy& p = inbox ? config_.inbox : config_.outbox;
  if (p.policy == "DISABLED") return int64_t{0};
  auto started = std::chrono::steady_clock::now();
  int64_t total = 0;
  Status failure;
  const std::vector<const char*> states =
      inbox ? std::vector<const char*>{kInboxStateProcessed, kInboxStateDead}
            : std::vector<const char*>{kStateSent, kStateDead};
  for (const char* state : states) {
    while (true) {
      Result<int64_t> n = int64_t{0};
      if (p.policy == "AGE") {
        n = inbox ? inbox_->DeleteOlderThan(state, *p.max_age_ms, p.batch_size)
                  : outbox_->DeleteOlderThan(state, *p.max_age_ms, p.batch_size);
      } else {
        n = inbox ? inbox_->DeleteBeyondCount(state, *p.max_count, p.batch_size)
                  : outbox_->DeleteBeyondCount(state, *p.max_count, p.batch_size);
      }
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
  if (metrics_ != nullptr) metrics_->OnCleanup(table, total, seconds);
  runs_++;
  if (!failure.ok()) return failure;
  if (total > 0) {
    log::Info("Retention deleted " + std::to_string(total) + " " + std::string(table) + " row(s).",
              {{"table", std::string(table)}, {"deleted", std::to_string(total)}});
  }
  return total;
}

}  // namespace queuebox
