#include "telemetry/tracer.h"

#include <curl/curl.h>

#include <chrono>
#include <utility>

#include "telemetry/otlp.h"

namespace queuebox::telemetry {
namespace {

size_t DiscardBody(char*, size_t size, size_t n, void*) { return size * n; }

// POSTs one export request; true on a 2xx answer.
bool PostSpans(const TracerOptions& options, const std::string& body) {
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return false;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/x-protobuf");
  for (const auto& [name, value] : options.headers) {
    headers = curl_slist_append(headers, (name + ": " + value).c_str());
  }
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(curl, CURLOPT_URL, options.endpoint.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout_ms));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.timeout_ms));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &DiscardBody);
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  long status = 0;
  const CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return rc == CURLE_OK && status >= 200 && status < 300;
}

}  // namespace

namespace {
std::mutex process_tracer_mu;
std::shared_ptr<Tracer>& ProcessTracerSlot() {
  static std::shared_ptr<Tracer>* slot = new std::shared_ptr<Tracer>();
  return *slot;
}
}  // namespace

void SetProcessTracer(std::shared_ptr<Tracer> tracer) {
  std::lock_guard<std::mutex> lock(process_tracer_mu);
  ProcessTracerSlot() = std::move(tracer);
}

std::shared_ptr<Tracer> ProcessTracer() {
  std::lock_guard<std::mutex> lock(process_tracer_mu);
  return ProcessTracerSlot();
}

uint64_t UnixNanoNow() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

SpanStart Begin(const std::optional<TraceContext>& parent) {
  SpanStart s;
  if (parent) {
    s.context.trace_id = parent->trace_id;
    s.context.flags = parent->flags;
    s.context.tracestate = parent->tracestate;
    s.parent = parent->span_id;
  } else {
    s.context.trace_id = NewTraceId();
    s.context.flags = kSampled;
  }
  s.context.span_id = NewSpanId();
  s.start_unix_nano = UnixNanoNow();
  return s;
}

Span Finish(const SpanStart& start, std::string name, SpanKind kind, Attributes attributes,
            bool error, std::string status_message) {
  Span s;
  s.trace_id = start.context.trace_id;
  s.span_id = start.context.span_id;
  s.parent_span_id = start.parent;
  s.flags = start.context.flags;
  s.tracestate = start.context.tracestate;
  s.name = std::move(name);
  s.kind = kind;
  s.start_unix_nano = start.start_unix_nano;
  s.end_unix_nano = UnixNanoNow();
  s.attributes = std::move(attributes);
  s.error = error;
  s.status_message = std::move(status_message);
  return s;
}

Tracer::Tracer(TracerOptions options) : options_(std::move(options)) {
  if (!options_.endpoint.empty()) thread_ = std::thread([this] { Run(); });
}

Tracer::~Tracer() { Stop(); }

void Tracer::Record(Span span) {
  recorded_.fetch_add(1, std::memory_order_relaxed);
  if (options_.endpoint.empty()) return;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() >= static_cast<size_t>(options_.queue_size)) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.push_back(std::move(span));
    wake = queue_.size() == static_cast<size_t>(options_.batch_size);
  }
  if (wake) cv_.notify_one();
}

void Tracer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

// Takes the whole queue at once (a swap under the lock: the recording threads never wait for a
// copy) and exports it in batches of batch_size; at stop, one last batch and the rest dropped.
void Tracer::Run() {
  std::vector<Span> taken;
  const size_t batch = static_cast<size_t>(options_.batch_size);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.export_interval_ms),
                 [this, batch] { return stopping_ || queue_.size() >= batch; });
    const bool last = stopping_;
    taken.clear();
    taken.swap(queue_);
    lock.unlock();
    const std::span<const Span> all(taken);
    for (size_t i = 0; i < all.size(); i += batch) {
      Export(all.subspan(i, std::min(batch, all.size() - i)));
      if (last) {
        dropped_.fetch_add(all.size() - std::min(batch, all.size()), std::memory_order_relaxed);
        break;
      }
    }
    if (last) return;
    lock.lock();
  }
}

void Tracer::Export(std::span<const Span> batch) {
  EncodeExportRequest(batch, options_.service_name, options_.service_version, body_);
  if (PostSpans(options_, body_)) {
    exported_.fetch_add(batch.size(), std::memory_order_relaxed);
  } else {
    failed_exports_.fetch_add(1, std::memory_order_relaxed);
    dropped_.fetch_add(batch.size(), std::memory_order_relaxed);
  }
}

}  // namespace queuebox::telemetry
