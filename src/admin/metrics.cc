#include "admin/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/log.h"

namespace queuebox {
namespace {

using Clock = std::chrono::steady_clock;

prometheus::Summary::Quantiles TimerQuantiles() {
  return {{0.5, 0.05}, {0.95, 0.01}, {0.99, 0.001}};
}

// The children of one metric family by label values, looked up without building a Labels map
// or a throw-away metric. prometheus-cpp's Family::Add(labels, args...) constructs a new metric
// before it finds the existing one (for a Summary: its quantile windows), which on the
// per-message paths cost more than the observation itself. Thread-safe.
template <typename T>
class Children {
 public:
  using Make = std::function<T&(const std::vector<std::string>&)>;
  explicit Children(Make make) : make_(std::move(make)) {}

  T& Get(std::vector<std::string> values) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = children_.find(values);
    if (it != children_.end()) return *it->second;
    T& child = make_(values);
    children_.emplace(std::move(values), &child);
    return child;
  }

 private:
  Make make_;
  std::mutex mu_;
  std::map<std::vector<std::string>, T*> children_;
};

// The largest observation of the current and the previous window, per label set.
class WindowMax {
 public:
  explicit WindowMax(prometheus::Family<prometheus::Gauge>& family) : family_(family) {}

  void Observe(const prometheus::Labels& labels, double v) {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = Get(labels);
    Rotate(s, Clock::now());
    s.current = std::max(s.current, v);
    s.gauge->Set(std::max(s.current, s.previous));
  }

  // Re-applies rotation so an idle timer's max decays to 0 after two windows.
  void Refresh() {
    std::lock_guard<std::mutex> lock(mu_);
    auto now = Clock::now();
    for (auto& [labels, s] : slots_) {
      Rotate(s, now);
      s.gauge->Set(std::max(s.current, s.previous));
    }
  }

 private:
  static constexpr auto kWindow = std::chrono::seconds(60);
  struct Slot {
    prometheus::Gauge* gauge = nullptr;
    Clock::time_point start;
    double current = 0, previous = 0;
  };
  Slot& Get(const prometheus::Labels& labels) {
    auto it = slots_.find(labels);
    if (it == slots_.end()) {
      Slot s;
      s.gauge = &family_.Add(labels);
      s.start = Clock::now();
      it = slots_.emplace(labels, s).first;
    }
    return it->second;
  }
  static void Rotate(Slot& s, Clock::time_point now) {
    if (now - s.start < kWindow) return;
    s.previous = now - s.start < 2 * kWindow ? s.current : 0;
    s.current = 0;
    s.start = now;
  }

  std::mutex mu_;
  prometheus::Family<prometheus::Gauge>& family_;
  std::map<prometheus::Labels, Slot> slots_;
};

// A summary (count, sum and p50/p95/p99 of the last 48-60 s, as prometheus-cpp's Summary with
// its default five 12 s windows) that takes n equal observations in one call: the relay
// observes every message of a publish, and every row of an outcome write, with the same time.
// prometheus-cpp's Summary inserts each observation into five CKMS estimators (about 5 % of the
// relay's CPU at two observations per message). Here the observations go into cells 1 % wide
// in log scale, with their count and sum: a quantile is the mean of its cell's values (exact
// when the cell holds one distinct value), within 1 % of the value at its rank.
class WeightedSummary {
 public:
  void Observe(double v, int64_t n) {
    if (n <= 0) return;
    const int64_t epoch = Epoch(Clock::now());
    std::lock_guard<std::mutex> lock(mu_);
    count_ += static_cast<uint64_t>(n);
    sum_ += v * static_cast<double>(n);
    Window& w = windows_[static_cast<size_t>(epoch % kWindows)];
    if (w.epoch != epoch) {
      w.epoch = epoch;
      w.cells.clear();
    }
    Cell& c = w.cells[CellOf(v)];
    c.count += static_cast<double>(n);
    c.sum += v * static_cast<double>(n);
  }

  prometheus::ClientMetric Collect(const prometheus::Labels& labels) {
    prometheus::ClientMetric m;
    for (const auto& [name, value] : labels) m.label.push_back({name, value});
    std::map<int, Cell> merged;
    {
      const int64_t epoch = Epoch(Clock::now());
      std::lock_guard<std::mutex> lock(mu_);
      m.summary.sample_count = count_;
      m.summary.sample_sum = sum_;
      for (const Window& w : windows_) {
        if (w.epoch <= epoch - kWindows) continue;  // older than five windows
        for (const auto& [cell, c] : w.cells) {
          Cell& to = merged[cell];
          to.count += c.count;
          to.sum += c.sum;
        }
      }
    }
    double total = 0;
    for (const auto& [cell, c] : merged) total += c.count;
    for (double q : {0.5, 0.95, 0.99}) {
      double value = std::numeric_limits<double>::quiet_NaN();  // none in the window
      double seen = 0;
      for (const auto& [cell, c] : merged) {
        seen += c.count;
        if (seen >= q * total) {
          value = c.sum / c.count;
          break;
        }
      }
      m.summary.quantile.push_back({q, value});
    }
    return m;
  }

 private:
  static constexpr int64_t kWindows = 5;
  static constexpr auto kWindow = std::chrono::seconds(12);
  struct Cell {
    double count = 0, sum = 0;
  };
  struct Window {
    int64_t epoch = -kWindows;  // kWindow periods since the clock's epoch
    std::map<int, Cell> cells;
  };
  static int64_t Epoch(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count() /
           kWindow.count();
  }
  static int CellOf(double v) {
    if (!(v > 0)) return std::numeric_limits<int>::min();  // zero, negative, NaN
    if (std::isinf(v)) return std::numeric_limits<int>::max();
    static const double kStep = std::log1p(0.01);
    return static_cast<int>(std::floor(std::log(v) / kStep));  // within +-75,000 for finite v > 0
  }

  std::mutex mu_;
  uint64_t count_ = 0;
  double sum_ = 0;
  std::array<Window, kWindows> windows_;
};

}  // namespace

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  Clock::time_point started = Clock::now();

  // QueueBox registers `queuebox_info`; its exporter drops the `_info` suffix, so dashboards
  // and its upgrade guide read `queuebox{version="..."}`.
  prometheus::Family<prometheus::Gauge>& info = prometheus::BuildGauge()
                                                    .Name("queuebox")
                                                    .Help("QueueBox build information; value 1")
                                                    .Register(*registry);
  prometheus::Gauge& uptime = prometheus::BuildGauge()
                                  .Name("queuebox_uptime_seconds")
                                  .Help("Seconds since the process started")
                                  .Register(*registry)
                                  .Add({});
  prometheus::Family<prometheus::Counter>& messages =
      prometheus::BuildCounter()
          .Name("queuebox_outbox_messages_total")
          .Help("Outbox messages by outcome: sent, failed (retry scheduled), dead")
          .Register(*registry);
  prometheus::Gauge& pending = prometheus::BuildGauge()
                                   .Name("queuebox_outbox_messages_pending")
                                   .Help("Outbox rows in state pending")
                                   .Register(*registry)
                                   .Add({});
  prometheus::Gauge& oldest_pending =
      prometheus::BuildGauge()
          .Name("queuebox_outbox_oldest_pending_age_seconds")
          .Help("Age of the oldest pending outbox row on the database clock; 0 when none")
          .Register(*registry)
          .Add({});
  // outbox.ordering: strict (docs/claim.md, "Strict order"); 0 when none or in sequence mode.
  prometheus::Gauge& strict_blocking_age =
      prometheus::BuildGauge()
          .Name("queuebox_outbox_strict_blocking_transaction_age_seconds")
          .Help(
              "Strict order: age of the oldest open transaction holding keyed rows back "
              "(database clock); 0 when none")
          .Register(*registry)
          .Add({});
  prometheus::Gauge& strict_blocking_pid =
      prometheus::BuildGauge()
          .Name("queuebox_outbox_strict_blocking_transaction_pid")
          .Help("Strict order: backend pid of that transaction; 0 when none")
          .Register(*registry)
          .Add({});
  prometheus::Counter& reclaimed = prometheus::BuildCounter()
                                       .Name("queuebox_outbox_messages_reclaimed_total")
                                       .Help("Rows moved back to pending after lease expiry")
                                       .Register(*registry)
                                       .Add({});
  prometheus::Family<prometheus::Counter>& claims_lost =
      prometheus::BuildCounter()
          .Name("queuebox_claims_lost_total")
          .Help("Terminal writes that matched no row because the claim was lost")
          .Register(*registry);
  prometheus::Counter& process_errors = prometheus::BuildCounter()
                                            .Name("queuebox_outbox_process_errors_total")
                                            .Help("Unexpected errors while processing a message")
                                            .Register(*registry)
                                            .Add({});
  // queuebox_outbox_processing_duration_seconds and queuebox_outbox_publish_duration_seconds
  // (summaries, rendered from WeightedSummary in Render).
  WeightedSummary processing_all;
  std::mutex publish_mu;
  std::map<std::string, std::unique_ptr<WeightedSummary>> publish_by_type;  // by destination_type
  prometheus::Family<prometheus::Gauge>& processing_max_family =
      prometheus::BuildGauge()
          .Name("queuebox_outbox_processing_duration_seconds_max")
          .Help("Largest processing duration of the recent window")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& publish_max_family =
      prometheus::BuildGauge()
          .Name("queuebox_outbox_publish_duration_seconds_max")
          .Help("Largest publish duration of the recent window, by destination type")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& destination_messages =
      prometheus::BuildCounter()
          .Name("queuebox_outbox_destination_messages_total")
          .Help("Publishes per destination by outcome: success, failure")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& queue_depth =
      prometheus::BuildGauge()
          .Name("queuebox_outbox_queue_depth")
          .Help("Publishes in flight per destination")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& circuit_state =
      prometheus::BuildGauge()
          .Name("queuebox_destination_circuit_state")
          .Help("Circuit breaker state per destination: 0 closed, 1 open, 2 half-open")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& throttled_seconds =
      prometheus::BuildCounter()
          .Name("queuebox_destination_throttled_seconds_total")
          .Help("Seconds during which rows of the destination waited for its rateLimit's tokens")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& http_responses =
      prometheus::BuildCounter()
          .Name("queuebox_http_publish_responses_total")
          .Help("HTTP destination responses by status class: 1xx..5xx, other")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& transform_failures =
      prometheus::BuildCounter()
          .Name("queuebox_transform_failures_total")
          .Help("Route and destination transform failures by onError strategy: fail, skip, dead")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& cleanup_deleted =
      prometheus::BuildCounter()
          .Name("queuebox_cleanup_messages_deleted_total")
          .Help("Rows deleted by retention, by table")
          .Register(*registry);
  prometheus::Family<prometheus::Summary>& cleanup_duration =
      prometheus::BuildSummary()
          .Name("queuebox_cleanup_duration_seconds")
          .Help("Duration of one retention run, by table")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& cleanup_max_family =
      prometheus::BuildGauge()
          .Name("queuebox_cleanup_duration_seconds_max")
          .Help("Largest retention run duration of the recent window, by table")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& cleanup_last_run =
      prometheus::BuildGauge()
          .Name("queuebox_cleanup_last_run_timestamp")
          .Help("Unix time (seconds) of the last retention run, by table")
          .Register(*registry);

  prometheus::Family<prometheus::Counter>& inbox_messages =
      prometheus::BuildCounter()
          .Name("queuebox_inbox_messages_total")
          .Help("Inbox messages by status: new (stored), duplicate, forwarded (into the outbox)")
          .Register(*registry);
  prometheus::Counter& inbox_relay_errors =
      prometheus::BuildCounter()
          .Name("queuebox_inbox_relay_errors_total")
          .Help("Failed inbox relay cycles and inbox rows whose topic rendered empty")
          .Register(*registry)
          .Add({});
  prometheus::Gauge& inbox_oldest_pending =
      prometheus::BuildGauge()
          .Name("queuebox_inbox_oldest_pending_age_seconds")
          .Help(
              "Age of the oldest pending push row of the inbox on the database clock; 0 when "
              "none or the relay is off")
          .Register(*registry)
          .Add({});
  // The inbox's HTTP intake (src/sources).
  prometheus::Family<prometheus::Counter>& inbox_rejections =
      prometheus::BuildCounter()
          .Name("queuebox_inbox_rejections_total")
          .Help("Messages a source refused, by reason")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& inbox_filtered =
      prometheus::BuildCounter()
          .Name("queuebox_inbox_filtered_total")
          .Help("Messages a source's header filter dropped, by source")
          .Register(*registry);
  Children<prometheus::Counter> inbox_rejections_by{
      [this](const std::vector<std::string>& v) -> prometheus::Counter& {
        return inbox_rejections.Add({{"reason", v[0]}});
      }};
  Children<prometheus::Counter> inbox_filtered_by{
      [this](const std::vector<std::string>& v) -> prometheus::Counter& {
        return inbox_filtered.Add({{"source", v[0]}});
      }};

  WindowMax processing_max{processing_max_family};
  WindowMax publish_max{publish_max_family};
  WeightedSummary& PublishSummary(std::string_view type) {
    std::lock_guard<std::mutex> lock(publish_mu);
    auto it = publish_by_type.find(std::string(type));
    if (it == publish_by_type.end()) {
      it = publish_by_type.emplace(std::string(type), std::make_unique<WeightedSummary>()).first;
    }
    return *it->second;
  }
  // The two summary families, placed after queuebox_outbox_process_errors_total.
  void AddSummaries(std::vector<prometheus::MetricFamily>& families) {
    prometheus::MetricFamily processing{"queuebox_outbox_processing_duration_seconds",
                                        "Time from claim to written outcome per message",
                                        prometheus::MetricType::Summary,
                                        {processing_all.Collect({})}};
    prometheus::MetricFamily publish{"queuebox_outbox_publish_duration_seconds",
                                     "Time to publish one message, by destination type",
                                     prometheus::MetricType::Summary,
                                     {}};
    {
      std::lock_guard<std::mutex> lock(publish_mu);
      for (auto& [type, summary] : publish_by_type) {
        publish.metric.push_back(summary->Collect({{"destination_type", type}}));
      }
    }
    auto at = std::find_if(families.begin(), families.end(), [](const auto& f) {
      return f.name == "queuebox_outbox_process_errors_total";
    });
    at = at == families.end() ? families.end() : at + 1;
    at = families.insert(at, std::move(processing)) + 1;
    if (!publish.metric.empty()) families.insert(at, std::move(publish));
  }
  Children<prometheus::Counter> destination_messages_by{
      [this](const std::vector<std::string>& v) -> prometheus::Counter& {
        return destination_messages.Add({{"destination", v[0]}, {"outcome", v[1]}});
      }};
  Children<prometheus::Counter> http_responses_by{
      [this](const std::vector<std::string>& v) -> prometheus::Counter& {
        return http_responses.Add({{"status_class", v[0]}});
      }};
  std::array<std::atomic<prometheus::Counter*>, 6> http_response_counters{};
  WindowMax cleanup_max{cleanup_max_family};

  std::atomic<int64_t> last_poll_ns{-1};

  // Change capture (SetCaptureProbe).
  // The console's overview (Activity, CircuitStates) and admin.auth refusals.
  ActivityWindow activity;
  mutable std::mutex circuits_mu;
  std::map<std::string, int> circuits;
  prometheus::Counter& admin_auth_failures =
      prometheus::BuildCounter()
          .Name("queuebox_admin_auth_failures_total")
          .Help("Admin and console requests refused by admin.auth")
          .Register(*registry)
          .Add({});
  mutable std::mutex capture_mu;
  std::function<CaptureReading()> capture_probe;
  prometheus::Gauge* capture_streaming = nullptr;
  prometheus::Counter* capture_wakeups = nullptr;
  prometheus::Gauge* capture_retained = nullptr;
  int64_t capture_wakeups_seen = 0;
  // queuebox_telemetry_* (SetTelemetryProbe); built on first use.
  std::mutex telemetry_mu;
  std::function<TelemetryReading()> telemetry_probe;
  prometheus::Counter* spans_recorded = nullptr;
  prometheus::Counter* spans_exported = nullptr;
  prometheus::Counter* spans_dropped = nullptr;
  prometheus::Counter* export_failures = nullptr;
  TelemetryReading telemetry_seen;

  // hikaricp_connections_* of the database pool (ExportConnectionPool); built on first use.
  std::mutex pool_mu;
  std::function<ConnectionPoolStats()> read_pool;
  prometheus::Gauge* pool_total = nullptr;
  prometheus::Gauge* pool_active = nullptr;
  prometheus::Gauge* pool_idle = nullptr;
  prometheus::Gauge* pool_pending = nullptr;
  prometheus::Gauge* pool_min = nullptr;
  prometheus::Gauge* pool_max = nullptr;
  prometheus::Counter* pool_timeouts = nullptr;
  int64_t pool_timeouts_seen = 0;

  // Pending refresher state.
  std::mutex pending_mu;  // serialises Stats() calls
  OutboxOperations* store = nullptr;
  std::chrono::milliseconds interval{5000};
  std::chrono::milliseconds wait{5000};  // interval, or kPendingCostFactor x the last query
  Clock::time_point last_refresh{};
  bool refreshed_once = false;
  log::RateLimiter stats_errors{std::chrono::seconds(30)};
};

Metrics::Metrics(std::string version) : impl_(std::make_unique<Impl>()) {
  impl_->info.Add({{"version", std::move(version)}}).Set(1);
  // Counters whose label values are known at start are exported at 0 from the first scrape,
  // so increase() and rate() see their first event (a series that appears with 1 does not).
  for (const char* status : {"sent", "failed", "dead", "released"}) {
    impl_->messages.Add({{"status", status}});
  }
  for (const char* component : {"outbox", "inbox"}) {
    impl_->claims_lost.Add({{"component", component}});
  }
  for (const char* cls : {"1xx", "2xx", "3xx", "4xx", "5xx", "other"}) {
    impl_->http_responses_by.Get({cls});
  }
  // Every strategy from the start, at 0, so a rate() over it works before the first failure.
  for (const char* strategy : {"fail", "skip", "dead"}) {
    impl_->transform_failures.Add({{"strategy", strategy}});
  }
}

void Metrics::ExportDestinations(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    impl_->destination_messages_by.Get({name, "success"});
    impl_->destination_messages_by.Get({name, "failure"});
    impl_->queue_depth.Add({{"destination", name}});
  }
}

void Metrics::ExportCleanup(std::string_view table) {
  impl_->cleanup_deleted.Add({{"table", std::string(table)}});
}

void Metrics::ExportConnectionPool(const std::string& pool,
                                   std::function<ConnectionPoolStats()> read) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.pool_mu);
  if (m.read_pool) return;  // one pool per process
  prometheus::Labels labels{{"pool", pool}};
  auto gauge = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(*m.registry).Add(labels);
  };
  m.pool_total = gauge("hikaricp_connections", "Open connections of the pool: idle and active");
  m.pool_active = gauge("hikaricp_connections_active", "Connections a caller holds");
  m.pool_idle = gauge("hikaricp_connections_idle", "Open connections no caller holds");
  m.pool_pending = gauge("hikaricp_connections_pending", "Callers waiting for a connection");
  m.pool_min = gauge("hikaricp_connections_min", "Connections the pool keeps open when idle");
  m.pool_max = gauge("hikaricp_connections_max", "Largest pool size (database.poolSize)");
  m.pool_timeouts = &prometheus::BuildCounter()
                         .Name("hikaricp_connections_timeout_total")
                         .Help(
                             "Connection requests that waited database.connectionTimeoutMs "
                             "in vain")
                         .Register(*m.registry)
                         .Add(labels);
  m.read_pool = std::move(read);
}

void Metrics::RefreshPool() {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.pool_mu);
  if (!m.read_pool) return;
  ConnectionPoolStats s = m.read_pool();
  m.pool_total->Set(static_cast<double>(s.active + s.idle));
  m.pool_active->Set(static_cast<double>(s.active));
  m.pool_idle->Set(static_cast<double>(s.idle));
  m.pool_pending->Set(static_cast<double>(s.pending));
  m.pool_min->Set(static_cast<double>(s.min));
  m.pool_max->Set(static_cast<double>(s.max));
  if (s.timeouts > m.pool_timeouts_seen) {
    m.pool_timeouts->Increment(static_cast<double>(s.timeouts - m.pool_timeouts_seen));
    m.pool_timeouts_seen = s.timeouts;
  }
}

Metrics::~Metrics() { StopPendingRefresher(); }

prometheus::Registry& Metrics::registry() { return *impl_->registry; }

void Metrics::OnMessages(std::string_view status, int64_t n) {
  impl_->messages.Add({{"status", std::string(status)}}).Increment(static_cast<double>(n));
  impl_->activity.Add(status, n);
}

void Metrics::OnAdminAuthFailure() { impl_->admin_auth_failures.Increment(); }

std::vector<ActivityWindow::Minute> Metrics::Activity() const { return impl_->activity.Last(); }

ActivityWindow& Metrics::activity_window() { return impl_->activity; }

std::map<std::string, int> Metrics::CircuitStates() const {
  std::lock_guard<std::mutex> lock(impl_->circuits_mu);
  return impl_->circuits;
}

std::optional<Metrics::CaptureReading> Metrics::Capture() const {
  std::lock_guard<std::mutex> lock(impl_->capture_mu);
  if (!impl_->capture_probe) return std::nullopt;
  return impl_->capture_probe();
}

void Metrics::OnReclaimed(int64_t n) { impl_->reclaimed.Increment(static_cast<double>(n)); }

void Metrics::OnClaimsLost(int64_t n) { OnClaimsLost("outbox", n); }

void Metrics::OnInboxRejection(std::string_view reason) {
  impl_->inbox_rejections_by.Get({std::string(reason)}).Increment();
}

void Metrics::OnInboxFiltered(std::string_view source) {
  impl_->inbox_filtered_by.Get({std::string(source)}).Increment();
}

void Metrics::OnClaimsLost(std::string_view component, int64_t n) {
  impl_->claims_lost.Add({{"component", std::string(component)}}).Increment(static_cast<double>(n));
}

void Metrics::OnProcessError() { impl_->process_errors.Increment(); }

void Metrics::OnInboxForwarded(int64_t n) { OnInboxMessages("forwarded", n); }

void Metrics::OnInboxRelayError() { impl_->inbox_relay_errors.Increment(); }

void Metrics::OnInboxClaimsLost(int64_t n) { OnClaimsLost("inbox", n); }

void Metrics::OnInboxOldestPendingAge(double seconds) { impl_->inbox_oldest_pending.Set(seconds); }

void Metrics::OnInboxMessages(std::string_view status, int64_t n) {
  impl_->inbox_messages.Add({{"status", std::string(status)}}).Increment(static_cast<double>(n));
}

void Metrics::OnProcessingDuration(double seconds) { OnProcessingDurations(seconds, 1); }

// n observations of one value: one summary update, one label lookup, one window-max update.
void Metrics::OnProcessingDurations(double seconds, int64_t n) {
  if (n <= 0) return;
  impl_->processing_all.Observe(seconds, n);
  impl_->processing_max.Observe({}, seconds);
}

void Metrics::OnPublish(const Destination& d, bool success, double seconds) {
  OnPublishes(d, success ? 1 : 0, success ? 0 : 1, seconds);
}

void Metrics::OnPublishes(const Destination& d, int64_t successes, int64_t failures,
                          double seconds) {
  if (successes + failures <= 0) return;
  impl_->PublishSummary(d.type()).Observe(seconds, successes + failures);
  impl_->publish_max.Observe({{"destination_type", std::string(d.type())}}, seconds);
  if (successes > 0) {
    impl_->destination_messages_by.Get({d.name(), "success"})
        .Increment(static_cast<double>(successes));
  }
  if (failures > 0) {
    impl_->destination_messages_by.Get({d.name(), "failure"})
        .Increment(static_cast<double>(failures));
  }
}

void Metrics::OnTransformFailure(std::string_view strategy) {
  impl_->transform_failures.Add({{"strategy", std::string(strategy)}}).Increment();
}

void Metrics::OnQueueDepth(const std::string& destination, int64_t delta) {
  impl_->queue_depth.Add({{"destination", destination}}).Increment(static_cast<double>(delta));
}

void Metrics::OnCircuitState(const std::string& destination, int state) {
  impl_->circuit_state.Add({{"destination", destination}}).Set(static_cast<double>(state));
  std::lock_guard<std::mutex> lock(impl_->circuits_mu);
  impl_->circuits[destination] = state;
}

void Metrics::OnThrottled(const std::string& destination, double seconds) {
  impl_->throttled_seconds.Add({{"destination", destination}}).Increment(seconds);
}

void Metrics::OnPollCycle(bool /*ok*/) {
  impl_->last_poll_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

double Metrics::SecondsSinceLastPollCycle() const {
  int64_t ns = impl_->last_poll_ns.load();
  if (ns < 0) return 1e9;
  auto now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  return static_cast<double>(now - ns) / 1e9;
}

void Metrics::OnHttpResponse(int status) {
  // Per response: the class's counter is looked up once (0: other, 1-5: 1xx-5xx).
  const int index = status >= 100 && status <= 599 ? status / 100 : 0;
  prometheus::Counter* counter = impl_->http_response_counters[index].load();
  if (counter == nullptr) {
    std::string cls = index == 0 ? "other" : std::to_string(index) + "xx";
    counter = &impl_->http_responses_by.Get({cls});
    impl_->http_response_counters[index].store(counter);
  }
  counter->Increment();
}

void Metrics::OnCleanup(std::string_view table, int64_t deleted, double seconds) {
  prometheus::Labels labels{{"table", std::string(table)}};
  impl_->cleanup_deleted.Add(labels).Increment(static_cast<double>(deleted));
  impl_->cleanup_duration.Add(labels, TimerQuantiles()).Observe(seconds);
  impl_->cleanup_max.Observe(labels, seconds);
  auto now = std::chrono::system_clock::now().time_since_epoch();
  impl_->cleanup_last_run.Add(labels).Set(
      static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()) /
      1000.0);
}

void Metrics::SetPending(int64_t pending, double oldest_pending_age_seconds) {
  impl_->pending.Set(static_cast<double>(pending));
  impl_->oldest_pending.Set(oldest_pending_age_seconds);
}

void Metrics::RefreshPending(bool only_if_stale) {
  std::lock_guard<std::mutex> lock(impl_->pending_mu);
  if (impl_->store == nullptr) return;
  auto now = Clock::now();
  if (only_if_stale && impl_->refreshed_once && now - impl_->last_refresh < impl_->wait) return;
  auto stats = impl_->store->PendingGauges();
  impl_->last_refresh = Clock::now();
  impl_->refreshed_once = true;
  // A slow count waits longer (kPendingCostFactor), a failed one does not: the values must not
  // stay stale once the database answers again.
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(impl_->last_refresh - now);
  impl_->wait = stats.ok() ? std::clamp(took * kPendingCostFactor, impl_->interval,
                                        std::max(impl_->interval, kPendingWaitCap))
                           : impl_->interval;
  if (!stats.ok()) {
    int64_t suppressed = 0;
    if (impl_->stats_errors.Allow(&suppressed)) {
      log::Warn(
          "The pending gauges could not be refreshed. The next refresh retries.",
          {{"reason", stats.status().ToString()}, {"suppressed", std::to_string(suppressed)}});
    }
    return;
  }
  auto it = stats->rows_by_state.find(kStatePending);
  SetPending(it == stats->rows_by_state.end() ? 0 : it->second, stats->oldest_pending_age_seconds);
  const std::optional<StrictBlocker>& blocker = stats->strict_blocker;
  impl_->strict_blocking_age.Set(blocker ? blocker->age_seconds.value_or(0) : 0);
  impl_->strict_blocking_pid.Set(blocker ? static_cast<double>(blocker->pid) : 0);
}

void Metrics::StartPendingRefresher(OutboxOperations* store, std::chrono::milliseconds interval) {
  StopPendingRefresher();
  {
    std::lock_guard<std::mutex> lock(impl_->pending_mu);
    impl_->store = store;
    impl_->interval = std::max(interval, std::chrono::milliseconds(1));
    impl_->wait = impl_->interval;
    impl_->refreshed_once = false;
  }
  std::lock_guard<std::mutex> lock(refresher_mu_);
  refresher_stop_ = false;
  refresher_ = std::thread([this] { RefresherLoop(); });
}

void Metrics::RefresherLoop() {
  std::unique_lock<std::mutex> lock(refresher_mu_);
  while (!refresher_stop_) {
    lock.unlock();
    RefreshPending(/*only_if_stale=*/true);
    lock.lock();
    refresher_cv_.wait_for(lock, PendingWait(), [this] { return refresher_stop_; });
  }
}

std::chrono::milliseconds Metrics::PendingWait() {
  std::lock_guard<std::mutex> lock(impl_->pending_mu);
  return impl_->wait;
}

void Metrics::StopPendingRefresher() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(refresher_mu_);
    refresher_stop_ = true;
    t = std::move(refresher_);
  }
  refresher_cv_.notify_all();
  if (t.joinable()) t.join();
  std::lock_guard<std::mutex> lock(impl_->pending_mu);
  impl_->store = nullptr;
}

void Metrics::SetCaptureProbe(std::function<CaptureReading()> probe) {
  std::lock_guard<std::mutex> lock(impl_->capture_mu);
  auto& registry = *impl_->registry;
  if (impl_->capture_streaming == nullptr) {
    impl_->capture_streaming =
        &prometheus::BuildGauge()
             .Name("queuebox_capture_streaming")
             .Help("1 while change capture streams from its replication slot, else 0")
             .Register(registry)
             .Add({});
    impl_->capture_wakeups = &prometheus::BuildCounter()
                                  .Name("queuebox_capture_wakeups_total")
                                  .Help("Delivery wake-ups sent by change capture")
                                  .Register(registry)
                                  .Add({});
    impl_->capture_retained =
        &prometheus::BuildGauge()
             .Name("queuebox_capture_slot_retained_bytes")
             .Help("WAL bytes the capture slot retains: pg_current_wal_lsn() - confirmed_flush_lsn")
             .Register(registry)
             .Add({});
  }
  impl_->capture_probe = std::move(probe);
}

void Metrics::SetTelemetryProbe(std::function<TelemetryReading()> probe) {
  std::lock_guard<std::mutex> lock(impl_->telemetry_mu);
  Impl& m = *impl_;
  if (m.spans_recorded == nullptr) {
    auto& spans = prometheus::BuildCounter()
                      .Name("queuebox_telemetry_spans_total")
                      .Help(
                          "Spans by outcome: recorded, exported (the collector took them), "
                          "dropped (queue full or export failed)")
                      .Register(*m.registry);
    m.spans_recorded = &spans.Add({{"outcome", "recorded"}});
    m.spans_exported = &spans.Add({{"outcome", "exported"}});
    m.spans_dropped = &spans.Add({{"outcome", "dropped"}});
    m.export_failures = &prometheus::BuildCounter()
                             .Name("queuebox_telemetry_export_failures_total")
                             .Help("OTLP export requests that failed (no answer, or not 2xx)")
                             .Register(*m.registry)
                             .Add({});
  }
  m.telemetry_probe = std::move(probe);
}

void Metrics::RefreshTelemetry() {
  std::lock_guard<std::mutex> lock(impl_->telemetry_mu);
  Impl& m = *impl_;
  if (!m.telemetry_probe) return;
  const TelemetryReading r = m.telemetry_probe();
  TelemetryReading& seen = m.telemetry_seen;
  auto add = [](prometheus::Counter* c, uint64_t now, uint64_t& before) {
    if (now > before) c->Increment(static_cast<double>(now - before));
    before = std::max(before, now);
  };
  add(m.spans_recorded, r.recorded, seen.recorded);
  add(m.spans_exported, r.exported, seen.exported);
  add(m.spans_dropped, r.dropped, seen.dropped);
  add(m.export_failures, r.failed_exports, seen.failed_exports);
}

std::string Metrics::Render() {
  RefreshPending(/*only_if_stale=*/true);
  RefreshTelemetry();
  {
    std::lock_guard<std::mutex> lock(impl_->capture_mu);
    if (impl_->capture_probe) {
      CaptureReading r = impl_->capture_probe();
      impl_->capture_streaming->Set(r.streaming ? 1 : 0);
      if (r.wakeups > impl_->capture_wakeups_seen) {
        impl_->capture_wakeups->Increment(
            static_cast<double>(r.wakeups - impl_->capture_wakeups_seen));
        impl_->capture_wakeups_seen = r.wakeups;
      }
      if (r.slot_retained_bytes >= 0) {
        impl_->capture_retained->Set(static_cast<double>(r.slot_retained_bytes));
      }
    }
  }
  impl_->uptime.Set(std::chrono::duration<double>(Clock::now() - impl_->started).count());
  impl_->processing_max.Refresh();
  impl_->publish_max.Refresh();
  impl_->cleanup_max.Refresh();
  RefreshPool();
  std::vector<prometheus::MetricFamily> families = impl_->registry->Collect();
  impl_->AddSummaries(families);
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace queuebox
