// metrics.h: QueueBox's Prometheus metrics (reference §13.4) on a prometheus-cpp registry,
// rendered with prometheus::TextSerializer for GET /metrics. Names, types and labels are
// QueueBox's; docs/metrics.md lists every family (a test compares the list with a scrape).
//
// Metrics implements RelayObserver, so the relay feeds it directly. The pending gauges
// (queuebox_outbox_messages_pending, queuebox_outbox_oldest_pending_age_seconds) come from
// OutboxOperations::Stats (database clock), refreshed by a background thread at most every
// outbox.pendingGaugeIntervalMs and on scrape when older than that.
//
// Timers are summaries with quantiles 0.5/0.95/0.99 (60 s window) plus a `<name>_max` gauge: the
// largest observation of the current and the previous 60 s window (Micrometer's decaying max).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "queuebox/relay.h"
#include "queuebox/store.h"

namespace prometheus {
class Registry;
}

namespace queuebox {

inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

class Metrics final : public RelayObserver {
 public:
  explicit Metrics(std::string version = QUEUEBOX_VERSION);
  ~Metrics() override;
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // --- RelayObserver ---
  void OnMessages(std::string_view status, int64_t n) override;
  void OnReclaimed(int64_t n) override;
  void OnClaimsLost(int64_t n) override;  // component="outbox"
  void OnProcessError() override;
  void OnProcessingDuration(double seconds) override;
  void OnPublish(const Destination& d, bool success, double seconds) override;
  void OnQueueDepth(const std::string& destination, int64_t delta) override;
  void OnPollCycle(bool ok) override;
  // queuebox_transform_failures_total{strategy}; fail, skip and dead are exported from the start.
  void OnTransformFailure(std::string_view strategy) override;

  // queuebox_claims_lost_total{component} for other components (e.g. "inbox").
  void OnClaimsLost(std::string_view component, int64_t n);
  // queuebox_http_publish_responses_total{status_class}: 100-599 -> "1xx".."5xx", else "other".
  // For the HTTP destination (wire through the composition root).
  void OnHttpResponse(int status);
  // One retention run of `table` ("outbox"): deleted total, duration summary, last run = now.
  void OnCleanup(std::string_view table, int64_t deleted, double seconds);
  // Sets the pending gauges directly (what the refresher does with Stats()).
  void SetPending(int64_t pending, double oldest_pending_age_seconds);

  // Change capture (outbox.capture.enabled; QueueBox C++ only): what the capture engine reports,
  // read on every scrape. `wakeups`: a running total; `slot_retained_bytes`: the WAL its slot
  // retains, -1 while unknown.
  struct CaptureReading {
    bool streaming = false;
    int64_t wakeups = 0;
    int64_t slot_retained_bytes = -1;
  };
  // Registers queuebox_capture_streaming, queuebox_capture_wakeups_total and
  // queuebox_capture_slot_retained_bytes (the families exist only with capture) and reads
  // `probe` on every Render. `probe` must be cheap, thread-safe and outlive this object's use.
  void SetCaptureProbe(std::function<CaptureReading()> probe);

  // Starts the background refresher of the pending gauges: Stats() every `interval`, and on
  // a scrape when the last refresh is older than `interval`. `store` must outlive Stop().
  // A failed Stats() keeps the previous values (logged, rate-limited).
  void StartPendingRefresher(OutboxOperations* store, std::chrono::milliseconds interval);
  // Stops and joins the refresher (also done by the destructor). Idempotent.
  void StopPendingRefresher();

  // The Prometheus text exposition of every family (updates uptime, max gauges and, when
  // stale, the pending gauges first).
  std::string Render();

  // Seconds since the last OnPollCycle (any outcome); a large value when none yet.
  double SecondsSinceLastPollCycle() const;

  prometheus::Registry& registry();

 private:
  struct Impl;
  void RefreshPending(bool only_if_stale);
  void RefresherLoop();

  std::unique_ptr<Impl> impl_;
  std::mutex refresher_mu_;
  std::condition_variable refresher_cv_;
  bool refresher_stop_ = false;
  std::thread refresher_;
};

}  // namespace queuebox
