// tracer.h: where finished spans go. Record encodes the span (OTLP protobuf, otlp.h) on the
// recording thread and appends it to a bounded queue of encoded spans in front of one export
// thread that sends them in batches over OTLP/HTTP to telemetry.otlp.endpoint, on one kept
// connection. Record never waits on the export: a full queue drops the span, and a batch the
// collector refuses, answers late or cannot take (down, 5xx, timeout) is dropped too; both are
// counted (queuebox_telemetry_spans_total). Without an endpoint spans are counted as recorded and
// not kept (propagation only).
//
// Thread-safety: Record and the counters from any thread; Stop once from the owner.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "telemetry/span.h"

namespace queuebox::telemetry {

struct TracerOptions {
  bool start_traces = true;  // a message without a trace context starts a new trace
  std::string endpoint;      // OTLP/HTTP traces URL; empty: no export
  std::map<std::string, std::string> headers;  // sent with every export (auth)
  std::string service_name = "queuebox";
  std::string service_version;
  int queue_size = 4096;              // spans held for export at most; more are dropped
  int batch_size = 512;               // spans per export request at most
  int64_t export_interval_ms = 1000;  // longest wait before a partial batch goes
  int64_t timeout_ms = 5000;          // one export request, connect included
};

class Tracer {
 public:
  // Starts the export thread when `options.endpoint` is set.
  explicit Tracer(TracerOptions options);
  ~Tracer();  // Stop()
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  const TracerOptions& options() const { return options_; }
  bool start_traces() const { return options_.start_traces; }

  // Queues the span `start` opened, ending now with `end`, for export (encoded at once: nothing
  // of `end` is kept); drops it (counted) when the queue is full. Never blocks on the export.
  void Record(const SpanStart& start, const SpanEnd& end);

  // Sends what is queued (one last attempt within timeout_ms) and ends the export thread.
  void Stop();

  // Counters since start: spans handed to Record, exported (the collector answered 2xx), and
  // dropped (queue full, or their batch failed).
  uint64_t recorded() const { return recorded_.load(std::memory_order_relaxed); }
  uint64_t exported() const { return exported_.load(std::memory_order_relaxed); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Export requests that failed (no answer, or not 2xx).
  uint64_t failed_exports() const { return failed_exports_.load(std::memory_order_relaxed); }

 private:
  struct Poster;  // the export thread's curl handle (tracer.cc)
  void Run();
  // Sends `count` encoded spans (`spans`) in one request.
  void Export(Poster& poster, std::string_view spans, size_t count);

  const TracerOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string queue_;               // encoded spans end to end; guarded by mu_
  std::vector<size_t> queue_ends_;  // where each queued span ends in queue_; guarded by mu_
  bool stopping_ = false;           // guarded by mu_
  std::atomic<uint64_t> recorded_{0}, exported_{0}, dropped_{0}, failed_exports_{0};
  std::string body_;  // the export thread's request buffer, kept between exports
  std::thread thread_;
};

// The process's tracer (telemetry.enabled), set once by the composition root before the parts
// built far from it (the sources' intake) are made; they read it when built. Null: off.
void SetProcessTracer(std::shared_ptr<Tracer> tracer);
std::shared_ptr<Tracer> ProcessTracer();

}  // namespace queuebox::telemetry
