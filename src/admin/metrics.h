// metrics.h: QueueBox's Prometheus metrics (reference §13.4) on a prometheus-cpp registry,
// rendered with prometheus::TextSerializer for GET /metrics. Names, types and labels are
// QueueBox's; docs/metrics.md lists every family (a test compares the list with a scrape).
//
// Metrics implements RelayObserver, InboxRelayObserver and the sources' IntakeObserver, so both
// relays and every source feed it directly. The
// pending gauges (queuebox_outbox_messages_pending, queuebox_outbox_oldest_pending_age_seconds)
// come from OutboxOperations::Stats (database clock), refreshed by a background thread at most
// every outbox.pendingGaugeIntervalMs and on scrape when older than that.
//
// Counters with a known label set (status, component, status_class, the configured
// destinations) are exported at 0 from the start, unlike QueueBox's "tagged metrics appear on
// first use", so alerts on increase() catch the first event.
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
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "admin/activity.h"
#include "core/inbox_relay.h"
#include "queuebox/relay.h"
#include "queuebox/store.h"
#include "sources/intake_observer.h"

namespace prometheus {
class Registry;
}

namespace queuebox {

inline constexpr std::string_view kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

class Metrics final : public RelayObserver,
                      public InboxRelayObserver,
                      public sources::IntakeObserver {
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
  void OnProcessingDurations(double seconds, int64_t n) override;
  void OnPublishes(const Destination& d, int64_t successes, int64_t failures,
                   double seconds) override;
  void OnQueueDepth(const std::string& destination, int64_t delta) override;
  void OnPollCycle(bool ok) override;
  // queuebox_transform_failures_total{strategy}; fail, skip and dead are exported from the start.
  void OnTransformFailure(std::string_view strategy) override;
  void OnCircuitState(const std::string& destination, int state) override;
  // queuebox_destination_throttled_seconds_total{destination}
  void OnThrottled(const std::string& destination, double seconds) override;

  // --- InboxRelayObserver ---
  void OnInboxForwarded(int64_t n) override;   // queuebox_inbox_messages_total{status="forwarded"}
  void OnInboxRelayError() override;           // queuebox_inbox_relay_errors_total
  void OnInboxClaimsLost(int64_t n) override;  // queuebox_claims_lost_total{component="inbox"}
  void OnInboxOldestPendingAge(double seconds) override;

  // --- sources::IntakeObserver ---
  // queuebox_inbox_messages_total{status}: "new" and "duplicate" from the sources after
  // InboxIntake::Store ("forwarded" comes from the relay).
  void OnInboxMessages(std::string_view status, int64_t n) override;
  // queuebox_inbox_rejections_total{reason}: QueueBox's extraction_failed, transform_failed,
  // storage_failed, and this build's rate_limited, auth_failed, invalid_json, invalid_message.
  void OnInboxRejection(std::string_view reason) override;
  // queuebox_inbox_filtered_total{source}.
  void OnInboxFiltered(std::string_view source) override;

  // queuebox_claims_lost_total{component} for other components (e.g. "inbox").
  void OnClaimsLost(std::string_view component, int64_t n);
  // queuebox_http_publish_responses_total{status_class}: 100-599 -> "1xx".."5xx", else "other".
  // For the HTTP destination (wire through the composition root).
  void OnHttpResponse(int status);
  // One retention run of `table` ("outbox"): deleted total, duration summary, last run = now.
  void OnCleanup(std::string_view table, int64_t deleted, double seconds);
  // Exports the per-destination series at 0 (outcome success/failure, queue depth) for the
  // configured destinations, before their first publish.
  void ExportDestinations(const std::vector<std::string>& names);
  // Exports queuebox_cleanup_messages_deleted_total{table} at 0 (retention enabled).
  void ExportCleanup(std::string_view table);
  // Exports the database pool as HikariCP's Micrometer families (QueueBox's names, so its
  // dashboards and alerts read them): hikaricp_connections, _active, _idle, _pending, _min, _max
  // and hikaricp_connections_timeout_total, labelled pool=<pool>. `read` is called on every
  // scrape (cheap, thread-safe, outlives this object's scrapes). Once per process.
  void ExportConnectionPool(const std::string& pool, std::function<ConnectionPoolStats()> read);
  // queuebox_admin_auth_failures_total: an admin or console request refused by admin.auth.
  void OnAdminAuthFailure();
  // The console's overview: sent and dead per minute in this process, the last circuit state
  // reported per destination (0 closed, 1 open, 2 half-open), the capture reading (nullopt
  // without change capture).
  std::vector<ActivityWindow::Minute> Activity() const;
  // The window behind Activity(), for ActivityRecorder (valid as long as this object).
  ActivityWindow& activity_window();
  std::map<std::string, int> CircuitStates() const;

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
  // The reading the probe gives now; nullopt without a probe (no change capture).
  std::optional<CaptureReading> Capture() const;

  // Tracing (telemetry.enabled; docs/operations.md, "Tracing"): the tracer's running totals.
  struct TelemetryReading {
    uint64_t recorded = 0, exported = 0, dropped = 0, failed_exports = 0;
  };
  // Registers queuebox_telemetry_spans_total{outcome="recorded|exported|dropped"} and
  // queuebox_telemetry_export_failures_total (the families exist only with tracing on) and reads
  // `probe` on every Render. `probe` must be cheap, thread-safe and outlive this object's use.
  void SetTelemetryProbe(std::function<TelemetryReading()> probe);

  // Starts the background refresher of the pending gauges: PendingGauges() every `interval`, and
  // on a scrape when the last refresh is older than that. `interval` is a minimum: after a
  // successful query that took d, the next waits kPendingCostFactor x d, at most
  // kPendingWaitCap, so the count of a deep backlog (it reads every pending row's index entry)
  // takes at most 1 % of one database session per replica (a 150 ms count: every 15 s). A failed
  // query keeps the previous values (logged, rate-limited) and is retried after `interval`.
  // `store` must outlive Stop().
  static constexpr int kPendingCostFactor = 100;
  static constexpr std::chrono::milliseconds kPendingWaitCap{60000};
  void StartPendingRefresher(OutboxOperations* store, std::chrono::milliseconds interval);
  // Stops and joins the refresher (also done by the destructor). Idempotent.
  void StopPendingRefresher();

  // The Prometheus text exposition of every family (updates uptime, max gauges and, when
  // stale, the pending gauges first).
  std::string Render();
  // The telemetry counters from the probe (Render does it).
  void RefreshTelemetry();

  // Seconds since the last OnPollCycle (any outcome); a large value when none yet.
  double SecondsSinceLastPollCycle() const;

  prometheus::Registry& registry();

 private:
  struct Impl;
  void RefreshPending(bool only_if_stale);
  // How long the refresher waits from the last refresh: `interval`, or longer after a slow one.
  std::chrono::milliseconds PendingWait();
  void RefreshPool();
  void RefresherLoop();

  std::unique_ptr<Impl> impl_;
  std::mutex refresher_mu_;
  std::condition_variable refresher_cv_;
  bool refresher_stop_ = false;
  std::thread refresher_;
};

}  // namespace queuebox
