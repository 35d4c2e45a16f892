// bench_receiver: a local HTTP receiver for benchmarks. Answers every POST with 204 (keep-alive)
// and measures, per message, the time from the row's insert to its receipt: the payload carries
// "ts": the insert time in Unix microseconds (written by the benchmark's INSERT). When it has
// received --expect messages (or on SIGTERM/SIGINT) it prints one JSON object and exits.
//
//   bench_receiver --port 18181 --expect 100000
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The value of "ts": in the body, or -1.
int64_t InsertTsUs(const std::string& body) {
  auto p = body.find("\"ts\":");
  if (p == std::string::npos) return -1;
  p += 5;
  while (p < body.size() && body[p] == ' ') ++p;
  int64_t v = 0;
  bool any = false;
  while (p < body.size() && body[p] >= '0' && body[p] <= '9') {
    v = v * 10 + (body[p++] - '0');
    any = true;
  }
  return any ? v : -1;
}

double Percentile(std::vector<int64_t>& v, double q) {
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
  return static_cast<double>(v[i]) / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"benchmark HTTP receiver"};
  int port = 18181;
  int64_t expect = 0;
  int threads = 64;
  app.add_option("--port", port);
  app.add_option("--expect", expect, "exit after this many messages (0: run until a signal)");
  app.add_option("--threads", threads);
  CLI11_PARSE(app, argc, argv);

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  std::mutex mu;
  std::vector<int64_t> latencies;
  latencies.reserve(static_cast<size_t>(std::max<int64_t>(expect, 1024)));
  std::set<std::string> ids;
  int64_t total = 0, duplicates = 0, first_us = 0, last_us = 0;
  std::atomic<bool> done{false};

  httplib::Server server;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_keep_alive_max_count(1000000);
  // Debian's cpp-httplib listens with a backlog of 5: the relay opening its connections at once
  // would see dropped SYNs, retried after 1 s, and that second would land in the latency tail.
  int listen_socket = -1;
  server.set_socket_options([&listen_socket](socket_t sock) {
    int yes = 1;
    (void)setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    (void)setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    listen_socket = sock;
  });
  server.Post(".*", [&](const httplib::Request& req, httplib::Response& res) {
    int64_t now = NowUs();
    int64_t ts = InsertTsUs(req.body);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (total == 0) first_us = now;
      last_us = now;
      ++total;
      if (!ids.insert(req.get_header_value("X-Message-Id")).second) ++duplicates;
      if (ts > 0) latencies.push_back(now - ts);
      if (expect > 0 && static_cast<int64_t>(ids.size()) >= expect) done = true;
    }
    res.status = 204;
  });
  if (!server.bind_to_port("127.0.0.1", port)) {
    std::fprintf(stderr, "bench_receiver: cannot listen on 127.0.0.1:%d\n", port);
    return 1;
  }
  if (listen_socket >= 0) (void)::listen(listen_socket, 1024);
  std::thread t([&] { server.listen_after_bind(); });
  timespec slice{0, 50 * 1000 * 1000};
  while (!done) {
    if (sigtimedwait(&stop, nullptr, &slice) > 0) break;
  }
  server.stop();
  t.join();
  std::lock_guard<std::mutex> lock(mu);
  double seconds = static_cast<double>(last_us - first_us) / 1e6;
  nlohmann::json out = {
      {"received", total},
      {"unique", ids.size()},
      {"duplicates", duplicates},
      {"first_to_last_s", seconds},
      {"receive_rate_per_s", seconds > 0 ? static_cast<double>(total) / seconds : 0},
      {"insert_to_receipt_p50_ms", Percentile(latencies, 0.50)},
      {"insert_to_receipt_p99_ms", Percentile(latencies, 0.99)},
  };
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
