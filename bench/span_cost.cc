// span_cost: the CPU of one publish span as PublishStage makes it (the row's trace lookup,
// Begin, the traceparent, the end with the nine publish attributes, Record) and the export
// thread's share (the request and its POST to a collector): process CPU (all threads) / spans.
// Not built by CMake; against a build's telemetry library and a running collector stand-in
// (node build/tests/judges/otel/npm/collector.js --port-file F --out /dev/null --decode off):
//
//   g++ -std=c++20 -O3 -Isrc bench/span_cost.cc build/src/telemetry/libqb_telemetry.a
//       -lcurl -lpthread -o /tmp/span_cost && /tmp/span_cost http://127.0.0.1:PORT/v1/traces
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "telemetry/tracer.h"

using namespace queuebox::telemetry;  // NOLINT: a benchmark's one file

static double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int main(int argc, char** argv) {
  const long n = argc > 2 ? std::atol(argv[2]) : 200000;
  TracerOptions o;
  o.endpoint = argv[1];
  o.queue_size = 1 << 20;
  Tracer tracer(o);
  const std::string id = "0193a5f2-7c1e-7b3a-9d4e-5f6a7b8c9d0e", topic = "bench.event",
                    dest = "sink", headers = "{}";
  std::string sink;
  const double t0 = CpuSeconds();
  for (long i = 0; i < n; ++i) {
    auto parent = FromHeadersJson(headers);
    SpanStart s = Begin(parent);
    std::string tp = s.traceparent();
    sink.assign(tp);
    const Attribute a[] = {
        {"messaging.system", std::string_view("http")},
        {"messaging.operation.name", std::string_view("publish")},
        {"messaging.operation.type", std::string_view("send")},
        {"messaging.destination.name", std::string_view(dest)},
        {"messaging.message.id", std::string_view(id)},
        {"queuebox.topic", std::string_view(topic)},
        {"queuebox.destination", std::string_view(dest)},
        {"queuebox.attempt", static_cast<int64_t>(1)},
        {"queuebox.outcome", std::string_view("sent")},
    };
    tracer.Record(s, {.name_prefix = "publish ",
                      .name = dest,
                      .kind = SpanKind::kProducer,
                      .attributes = a,
                      .encoded_attributes = {},
                      .error = false,
                      .status_message = {}});
    // Keep the export in step (a relay records far slower): waiting costs no CPU.
    while (tracer.recorded() - tracer.exported() - tracer.dropped() > 4096) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  while (tracer.exported() + tracer.dropped() < tracer.recorded()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double t1 = CpuSeconds();
  tracer.Stop();
  std::printf("spans=%ld exported=%llu dropped=%llu cpu_us_per_span=%.3f\n", n,
              static_cast<unsigned long long>(tracer.exported()),
              static_cast<unsigned long long>(tracer.dropped()), 1e6 * (t1 - t0) / n);
}
