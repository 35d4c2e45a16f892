#include "telemetry/tracer.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "telemetry/otlp.h"

namespace queuebox::telemetry {
namespace {

size_t DiscardBody(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

// The export thread's one curl handle and header list, made once: the connection to the collector
// is kept between exports (a handle per export connected anew each time).
struct Tracer::Poster {
  explicit Poster(const TracerOptions& options) : curl(curl_easy_init()) {
    headers = curl_slist_append(nullptr, "Content-Type: application/x-protobuf");
    for (const auto& [name, value] : options.headers) {
      headers = curl_slist_append(headers, (name + ": " + value).c_str());
    }
    headers = curl_slist_append(headers, "Expect:");
    if (curl == nullptr) return;
    curl_easy_setopt(curl, CURLOPT_URL, options.endpoint.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(options.timeout_ms));
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.timeout_ms));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &DiscardBody);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  }
  ~Poster() {
    if (curl != nullptr) curl_easy_cleanup(curl);
    curl_slist_free_all(headers);
  }
  Poster(const Poster&) = delete;
  Poster& operator=(const Poster&) = delete;

  // POSTs one export request; true on a 2xx answer.
  bool Post(const std::string& body) {
    if (curl == nullptr || headers == nullptr) return false;
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    long status = 0;
    const CURLcode rc = curl_easy_perform(curl);
    if (rc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    return rc == CURLE_OK && status >= 200 && status < 300;
  }

  CURL* curl;
  curl_slist* headers = nullptr;
};

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

Tracer::Tracer(TracerOptions options) : options_(std::move(options)) {
  if (!options_.endpoint.empty()) thread_ = std::thread([this] { Run(); });
}

Tracer::~Tracer() { Stop(); }

void Tracer::Record(const SpanStart& start, const SpanEnd& end) {
  recorded_.fetch_add(1, std::memory_order_relaxed);
  if (options_.endpoint.empty()) return;
  // Encoded outside the lock into this thread's buffer (kept: no allocation once grown).
  thread_local std::string encoded;
  encoded.clear();
  AppendSpan(encoded, start, end, UnixNanoNow());
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_ends_.size() >= static_cast<size_t>(options_.queue_size)) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.append(encoded);
    queue_ends_.push_back(queue_.size());
    wake = queue_ends_.size() == static_cast<size_t>(options_.batch_size);
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
// copy, and get the emptied buffers back with their capacity) and exports it in batches of
// batch_size; at stop, one last batch and the rest dropped.
void Tracer::Run() {
  Poster poster(options_);
  std::string taken;
  std::vector<size_t> ends;
  const size_t batch = static_cast<size_t>(options_.batch_size);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, std::chrono::milliseconds(options_.export_interval_ms),
                 [this, batch] { return stopping_ || queue_ends_.size() >= batch; });
    const bool last = stopping_;
    taken.clear();
    ends.clear();
    taken.swap(queue_);
    ends.swap(queue_ends_);
    lock.unlock();
    for (size_t i = 0; i < ends.size(); i += batch) {
      const size_t n = std::min(batch, ends.size() - i);
      const size_t from = i == 0 ? 0 : ends[i - 1];
      Export(poster, std::string_view(taken).substr(from, ends[i + n - 1] - from), n);
      if (last) {
        dropped_.fetch_add(ends.size() - n, std::memory_order_relaxed);
        break;
      }
    }
    if (last) return;
    lock.lock();
  }
}

void Tracer::Export(Poster& poster, std::string_view spans, size_t count) {
  EncodeExportRequest(spans, options_.service_name, options_.service_version, body_);
  if (poster.Post(body_)) {
    exported_.fetch_add(count, std::memory_order_relaxed);
  } else {
    failed_exports_.fetch_add(1, std::memory_order_relaxed);
    dropped_.fetch_add(count, std::memory_order_relaxed);
  }
}

}  // namespace queuebox::telemetry
