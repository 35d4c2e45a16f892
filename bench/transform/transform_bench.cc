// transform_bench: JSONata evaluations on the embedded engine (src/transform), per stage.
//
//   transform_bench [--evaluations N] [--warmup N] [--threads N] [--out FILE]
//
// Scenarios: a path lookup and a 30-field reshape of a ~1 KiB order payload, each with the
// variables of the route/destination stage, of the source stage and of a key expression (none).
// Every evaluation is timed on its own (steady_clock): evaluations/s, p50/p99/p99.9/max in µs.
// Memory: RSS of this process before the engine loads (it is linked, not loaded: a relay without
// transforms), right after the first engine loads, and after the run (with the high-water mark).
// With --threads N > 1 the scenarios also run on N threads at once (one engine each).
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "queuebox/transform/jsonata.h"

namespace {

using queuebox::transform::Bindings;
using queuebox::transform::Expression;
using queuebox::transform::Limits;
using Clock = std::chrono::steady_clock;

std::string FirstLine(const char* file, const char* prefix) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (prefix == nullptr || line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

std::string Quoted(std::string s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c != '\t') out.push_back(c);
  }
  return out + "\"";
}

// VmRSS or VmHWM of this process, KiB.
long StatusKib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::string(field).size() + 1);
  }
  return -1;
}

const char kPayload[] =
    R"({"order":{"id":"A-1001","createdAt":"2024-05-01T10:30:00.000Z","status":"paid",)"
    R"("channel":"web","currency":"EUR","customer":{"id":"c-9","name":"Ada Lovelace",)"
    R"("email":"ada@example.com","tier":"gold","phone":"+47 555 01234","marketingOptIn":true,)"
    R"("address":{"street":"Storgata 1","city":"Oslo","zip":"0155","country":"NO"}},)"
    R"("items":[{"sku":"X1","name":"Widget","price":9.99,"qty":2,"tags":["tools","sale"]},)"
    R"({"sku":"Y2","name":"Gadget","price":24.5,"qty":1,"tags":["tech"]},)"
    R"({"sku":"Z3","name":"Doohickey","price":3.25,"qty":4,"tags":[]}],)"
    R"("shipping":{"method":"express","cost":7.5,"carrier":"postnord","eta":"2024-05-03"},)"
    R"("payment":{"method":"card","brand":"visa","last4":"4242","authorized":true,)"
    R"("transactionId":"tx-7781-ab"},"discount":{"code":"SPRING10","percent":10},)"
    R"("notes":"Leave at the door, please. Ring twice.","giftWrap":false,"source":"campaign-42",)"
    R"("metadata":{"ip":"203.0.113.7","userAgent":"Mozilla/5.0","sessionId":"s-19f2c"}}})";

const char kPath[] = "order.customer.address.city";

// 30 output fields.
const char kReshape[] = R"({
  "orderId": order.id,
  "messageId": $messageId,
  "topic": $topic,
  "attempt": $attempt,
  "createdAt": order.createdAt,
  "createdMillis": $toMillis(order.createdAt),
  "status": $uppercase(order.status),
  "channel": order.channel,
  "currency": order.currency,
  "customerId": order.customer.id,
  "customerName": order.customer.name,
  "email": $lowercase(order.customer.email),
  "tier": order.customer.tier,
  "vip": order.customer.tier = "gold",
  "city": order.customer.address.city,
  "country": order.customer.address.country,
  "zip": order.customer.address.zip,
  "lineCount": $count(order.items),
  "units": $sum(order.items.qty),
  "skus": order.items.sku,
  "subtotal": $round($sum(order.items.(price * qty)), 2),
  "shippingCost": order.shipping.cost,
  "total": $round($sum(order.items.(price * qty)) * (1 - order.discount.percent / 100) + order.shipping.cost, 2),
  "discountCode": order.discount.code,
  "carrier": order.shipping.carrier,
  "express": order.shipping.method = "express",
  "paymentMethod": order.payment.method & "/" & order.payment.brand,
  "card": "**** " & order.payment.last4,
  "tags": $distinct(order.items.tags),
  "source": order.source
})";

struct Stage {
  const char* name;
  Bindings bindings;
};

std::vector<Stage> Stages() {
  Bindings route;
  route.SetString("messageId", "6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f")
      .SetString("topic", "order.created")
      .SetInt("attempt", 0)
      .SetString("timestamp", "2024-05-01T10:30:00.000Z");
  Bindings source = route;
  source.SetString("source", "shop-webhook")
      .SetJson("headers", R"({"x-tenant":"acme","Content-Type":"application/json"})")
      .SetString("idempotencyKey", "idem-1")
      .SetNull("eventType");
  return {{"route", route}, {"source", source}, {"key", Bindings()}};
}

struct Stats {
  double evaluations_per_s = 0;
  double p50_us = 0, p99_us = 0, p999_us = 0, max_us = 0, mean_us = 0;
};

Stats Summarize(std::vector<double>& us, double wall_s, std::size_t evaluations) {
  std::sort(us.begin(), us.end());
  auto at = [&](double q) {
    return us[std::min(us.size() - 1, static_cast<std::size_t>(q * us.size()))];
  };
  Stats s;
  s.evaluations_per_s = static_cast<double>(evaluations) / wall_s;
  s.p50_us = at(0.50);
  s.p99_us = at(0.99);
  s.p999_us = at(0.999);
  s.max_us = us.back();
  double sum = 0;
  for (double v : us) sum += v;
  s.mean_us = sum / static_cast<double>(us.size());
  return s;
}

// This thread's CPU time, µs: unlike wall time, it leaves out the time the scheduler gave the
// core to another process (the machines are shared).
double ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// Runs `n` evaluations on the calling thread; appends each one's wall and CPU µs when given.
bool Run(const Expression& expr, const Bindings& bindings, int n, std::vector<double>* us,
         std::vector<double>* cpu_us = nullptr) {
  for (int i = 0; i < n; ++i) {
    const double c0 = cpu_us != nullptr ? ThreadCpuUs() : 0;
    const auto t0 = Clock::now();
    auto out = expr.Evaluate(kPayload, bindings);
    const auto t1 = Clock::now();
    if (cpu_us != nullptr) cpu_us->push_back(ThreadCpuUs() - c0);
    if (!out.ok() || !out.value()) {
      std::fprintf(stderr, "evaluation failed: %s\n",
                   out.ok() ? "no value" : out.error().ToString().c_str());
      return false;
    }
    if (us != nullptr) us->push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return true;
}

std::string Json(const Stats& s) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "\"evaluations_per_s\": %.0f, \"mean_us\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f, "
      "\"p999_us\": %.1f, \"max_us\": %.1f",
      s.evaluations_per_s, s.mean_us, s.p50_us, s.p99_us, s.p999_us, s.max_us);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int evaluations = 20000;
  int warmup = 2000;
  int threads = 2;
  std::string out_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--evaluations")
      evaluations = std::atoi(argv[i + 1]);
    else if (flag == "--warmup")
      warmup = std::atoi(argv[i + 1]);
    else if (flag == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (flag == "--out")
      out_path = argv[i + 1];
  }

  const long rss_before_kib = StatusKib("VmRSS:");
  const bool loaded_before = queuebox::transform::EnginesLoaded();
  Limits limits;
  limits.timeout = std::chrono::milliseconds(1000);  // the bench measures, it does not limit
  const auto load0 = Clock::now();
  auto path = Expression::Compile(kPath, limits);
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load0).count();
  const long rss_loaded_kib = StatusKib("VmRSS:");
  const auto compile0 = Clock::now();
  auto reshape = Expression::Compile(kReshape, limits);
  const double compile_reshape_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - compile0).count();
  if (!path.ok() || !reshape.ok()) {
    std::fprintf(stderr, "compile failed\n");
    return 1;
  }
  {
    auto sample = reshape.value().Evaluate(kPayload, Stages()[0].bindings);
    std::printf("payload %zu bytes; reshape output %zu bytes: %s\n", sizeof kPayload - 1,
                sample.ok() && sample.value() ? sample.value()->size() : 0,
                sample.ok() && sample.value() ? sample.value()->c_str() : "?");
  }

  std::ostringstream json;
  json << "{\n  \"benchmark\": \"JSONata evaluations on the embedded engine (SpiderMonkey 102, "
          "jsonata 2.2.2 made synchronous), ~1 KiB payload, JSON text in and out\",\n";
  json << "  \"command\": \"bash bench/transform_bench.sh\",\n";
  json << "  \"machine\": {\"cpu\": " << Quoted(FirstLine("/proc/cpuinfo", "model name"))
       << ", \"cores\": " << std::thread::hardware_concurrency()
       << ", \"loadavg_at_start\": " << Quoted(FirstLine("/proc/loadavg", nullptr)) << "},\n";
  json << "  \"payload_bytes\": " << sizeof kPayload - 1 << ",\n";
  json << "  \"evaluations_per_case\": " << evaluations << ", \"warmup\": " << warmup << ",\n";
  json << "  \"engine_loaded_before\": " << (loaded_before ? "true" : "false") << ",\n";
  json << "  \"rss_before_engine_kib\": " << rss_before_kib << ",\n";
  json << "  \"rss_after_engine_load_kib\": " << rss_loaded_kib << ",\n";
  json << "  \"engine_load_ms\": " << load_ms << ",\n";
  json << "  \"compile_reshape_ms\": " << compile_reshape_ms << ",\n";
  json << "  \"cases\": [\n";

  struct Case {
    const char* name;
    const Expression* expr;
  };
  const Case cases[] = {{"path_lookup", &path.value()}, {"reshape_30_fields", &reshape.value()}};
  const std::vector<Stage> stages = Stages();
  bool first = true;
  std::printf("%-20s %-7s %12s %9s %9s %9s %9s\n", "case", "stage", "evals/s", "p50 us", "p99 us",
              "p99.9 us", "max us");
  for (const Case& c : cases) {
    for (const Stage& stage : stages) {
      std::vector<double> us;
      std::vector<double> cpu_us;
      us.reserve(evaluations);
      if (!Run(*c.expr, stage.bindings, warmup, nullptr)) return 1;
      const auto t0 = Clock::now();
      if (!Run(*c.expr, stage.bindings, evaluations, &us)) return 1;
      const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
      Stats s = Summarize(us, wall_s, us.size());
      // A second pass timed by CPU time (separate, so the wall pass has no clock syscalls).
      if (!Run(*c.expr, stage.bindings, evaluations, nullptr, &cpu_us)) return 1;
      const double cpu_total_s = [&] {
        double sum = 0;
        for (double v : cpu_us) sum += v;
        return sum / 1e6;
      }();
      Stats cpu = Summarize(cpu_us, cpu_total_s, cpu_us.size());
      std::printf("%-20s %-7s %12.0f %9.1f %9.1f %9.1f %9.1f | cpu %9.0f %7.1f %7.1f %7.1f\n",
                  c.name, stage.name, s.evaluations_per_s, s.p50_us, s.p99_us, s.p999_us, s.max_us,
                  cpu.evaluations_per_s, cpu.p50_us, cpu.p99_us, cpu.p999_us);
      json << (first ? "" : ",\n") << "    {\"case\": \"" << c.name << "\", \"stage\": \""
           << stage.name << "\", \"threads\": 1, \"wall\": {" << Json(s) << "}, \"cpu\": {"
           << Json(cpu) << "}}";
      first = false;
    }
  }

  if (threads > 1) {
    for (const Case& c : cases) {
      std::vector<std::vector<double>> per_thread(threads);
      std::atomic<bool> failed{false};
      const auto t0 = Clock::now();
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          // Each thread compiles on its own engine (loaded here, the first time).
          auto expr = Expression::Compile(c.expr->text(), limits);
          if (!expr.ok() || !Run(expr.value(), stages[0].bindings, warmup, nullptr) ||
              !Run(expr.value(), stages[0].bindings, evaluations, &per_thread[t])) {
            failed = true;
          }
        });
      }
      for (auto& th : pool) th.join();
      const double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (failed) return 1;
      std::vector<double> all;
      for (auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
      // Throughput over the wall time including each thread's warm-up and engine load.
      Stats s = Summarize(all, wall_s, static_cast<std::size_t>(threads) * (evaluations + warmup));
      std::printf("%-20s %-7s %12.0f %9.1f %9.1f %9.1f %9.1f  (%d threads, wall incl. load)\n",
                  c.name, "route", s.evaluations_per_s, s.p50_us, s.p99_us, s.p999_us, s.max_us,
                  threads);
      json << ",\n    {\"case\": \"" << c.name
           << "\", \"stage\": \"route\", \"threads\": " << threads << ", " << Json(s) << "}";
    }
  }
  const long rss_after_kib = StatusKib("VmRSS:");
  const long hwm_kib = StatusKib("VmHWM:");
  json << "\n  ],\n";
  json << "  \"threads\": " << threads << ",\n";
  json << "  \"rss_after_run_kib\": " << rss_after_kib << ",\n";
  json << "  \"rss_high_water_kib\": " << hwm_kib << "\n}\n";
  std::printf(
      "RSS: %ld KiB before the engine, %ld KiB after it loaded (%.1f ms), %ld KiB after "
      "the run (%d engine(s)), high-water %ld KiB\n",
      rss_before_kib, rss_loaded_kib, load_ms, rss_after_kib, threads > 1 ? threads + 1 : 1,
      hwm_kib);
  if (!out_path.empty()) {
    std::ofstream(out_path) << json.str();
  } else {
    std::fputs(json.str().c_str(), stdout);
  }
  return 0;
}
