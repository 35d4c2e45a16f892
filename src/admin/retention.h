// retention.h: the outbox retention service (QueueBox reference §5.5). When retention.enabled
// and retention.outbox.policy is not DISABLED, a thread runs one cleanup, then sleeps
// cleanupInterval (in 100 ms slices, so Stop returns quickly), and repeats.
//   AGE:   per state (sent, then dead) OutboxOperations::DeleteOlderThan(state, maxAge, batchSize)
//          while a batch came back full (10 ms pause between batches); updated_at on the
//          database clock.
//   COUNT: per state DeleteBeyondCount(state, maxCount, batchSize) while a batch was full.
// Only `sent` and `dead` rows are ever deleted (the store refuses other states too). Each run
// records queuebox_cleanup_* metrics for table "outbox".
//
// Thread-safety: Start/Stop from one controlling thread; Healthy() and RunOnce() from any.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "queuebox/config.h"
#include "queuebox/status.h"
#include "queuebox/store.h"

namespace queuebox {

class Metrics;

class RetentionService {
 public:
  // `store` and `metrics` (nullable) must outlive the service.
  RetentionService(OutboxOperations* store, RetentionConfig config, Metrics* metrics);
  ~RetentionService();
  RetentionService(const RetentionService&) = delete;
  RetentionService& operator=(const RetentionService&) = delete;

  // kInvalidArgument when the policy lacks maxAge (AGE) or maxCount (COUNT), or has an unknown
  // name. True when the loop would run (enabled and policy not DISABLED).
  static Result<bool> Validate(const RetentionConfig& config);

  // Starts the loop when enabled (a no-op otherwise). Errors as Validate.
  Status Start();
  // Stops the loop and joins the thread (a run in progress finishes its current batch).
  void Stop();

  // One cleanup of the outbox: returns the rows deleted. Records the metrics.
  Result<int64_t> RunOnce();

  // Health component `retention-service`: the loop thread is running.
  bool Healthy() const { return running_.load(); }
  // Completed runs so far (tests wait on it).
  int64_t runs() const { return runs_.load(); }

 private:
  void Loop();
  // Sleeps up to `d` in slices; false when stopping.
  bool SleepFor(std::chrono::milliseconds d);

  OutboxOperations* store_;
  RetentionConfig config_;
  Metrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> running_{false};
  std::atomic<int64_t> runs_{0};
  std::thread thread_;
};

}  // namespace queuebox
