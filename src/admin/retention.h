// retention.h: the retention service (QueueBox reference §5.5). When retention.enabled, each
// table whose policy is not DISABLED gets its own loop: run one cleanup, then sleep its
// cleanupInterval (in 100 ms slices, so Stop returns quickly), and repeat.
//   outbox  states sent, then dead; AGE by updated_at (OutboxOperations::DeleteOlderThan),
//           COUNT keeps the newest maxCount per state by updated_at.
//   inbox   states processed, then dead; AGE by created_at, the receipt time
//           (InboxOperations::DeleteOlderThan), COUNT keeps the newest maxCount per state by
//           created_at (QueueBox refuses COUNT for the inbox; QueueBox C++ has it).
// Each state is cleaned in batches of batchSize while a batch came back full (10 ms pause
// between batches). Only finished rows are ever deleted (the stores refuse other states too).
// Each run records queuebox_cleanup_* metrics with its table ("outbox" / "inbox"). Deleting an
// inbox row ends the dedup of its (source, idempotency_key): keep maxAge above the senders'
// retry window.
//
// Thread-safety: Start/Stop from one controlling thread; Healthy(), runs() and RunOnce*() from
// any.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/inbox.h"
#include "queuebox/status.h"
#include "queuebox/store.h"

namespace queuebox {

class Metrics;

class RetentionService {
 public:
  // `outbox`, `inbox` (nullable: no inbox retention) and `metrics` (nullable) must outlive the
  // service.
  RetentionService(OutboxOperations* outbox, InboxOperations* inbox, RetentionConfig config,
                   Metrics* metrics);
  // The outbox alone.
  RetentionService(OutboxOperations* outbox, RetentionConfig config, Metrics* metrics)
      : RetentionService(outbox, nullptr, std::move(config), metrics) {}
  ~RetentionService();
  RetentionService(const RetentionService&) = delete;
  RetentionService& operator=(const RetentionService&) = delete;

  // kInvalidArgument when a policy lacks maxAge (AGE) or maxCount (COUNT), or has an unknown
  // name; the message names the key (retention.outbox.maxAge, retention.inbox.maxCount, ...).
  // True when a loop would run (enabled and some policy not DISABLED).
  static Result<bool> Validate(const RetentionConfig& config);

  // Starts the loops of the enabled tables (a no-op when none). Errors as Validate.
  Status Start();
  // Stops the loops and joins them (a run in progress finishes its current batch).
  void Stop();

  // One cleanup of the outbox / the inbox: returns the rows deleted. Records the metrics. A
  // DISABLED policy deletes nothing. RunOnceInbox without an inbox store: kFailedPrecondition.
  Result<int64_t> RunOnce();
  Result<int64_t> RunOnceInbox();

  // Health component `retention-service`: every loop started is running.
  bool Healthy() const { return running_.load() > 0 && running_.load() == started_.load(); }
  // Completed runs so far, every table (tests wait on it).
  int64_t runs() const { return runs_.load(); }

 private:
  void Loop(std::string_view table);
  Result<int64_t> RunTable(std::string_view table);
  // Sleeps up to `d` in slices; false when stopping.
  bool SleepFor(std::chrono::milliseconds d);

  OutboxOperations* outbox_;
  InboxOperations* inbox_;
  RetentionConfig config_;
  Metrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<int> running_{0}, started_{0};
  std::atomic<int64_t> runs_{0};
  std::vector<std::thread> threads_;
};

}  // namespace queuebox
