// receive: a minimal HTTP destination stand-in for an end-to-end check (a canary route). It
// answers every POST or PUT with 204 and appends one JSON line per delivery to --out, from the
// headers QueueBox sends (QueueBox reference §6.1): {"id": X-Message-Id, "key": X-Message-Key or
// null, "topic": X-Topic, "attempt": X-Attempt, "time": ISO-8601 UTC, "path": the request path}.
// `queuebox verify --received FILE` reads the lines back.
#include <fcntl.h>
#include <httplib.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "commands.h"

namespace queuebox::app {
namespace {

std::string NowIso() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
  char millis[8];
  std::snprintf(millis, sizeof(millis), ".%03dZ", static_cast<int>(ms % 1000));
  return std::string(text) + millis;
}

// One JSON line of a delivery.
std::string ReceiptLine(const httplib::Request& req) {
  nlohmann::ordered_json line;
  line["id"] = req.get_header_value("X-Message-Id");
  if (req.has_header("X-Message-Key")) {
    line["key"] = req.get_header_value("X-Message-Key");
  } else {
    line["key"] = nullptr;
  }
  line["topic"] = req.get_header_value("X-Topic");
  const std::string attempt = req.get_header_value("X-Attempt");
  int64_t n = 0;
  auto [end, ec] = std::from_chars(attempt.data(), attempt.data() + attempt.size(), n);
  if (ec == std::errc() && end == attempt.data() + attempt.size()) {
    line["attempt"] = n;
  } else {
    line["attempt"] = nullptr;
  }
  line["time"] = NowIso();
  line["path"] = req.path;
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// "host:port" (an IPv6 host in brackets); false when malformed.
bool SplitListen(const std::string& listen, std::string& host, int& port) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) return false;
  host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string p = listen.substr(colon + 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  return !host.empty() && ec == std::errc() && end == p.data() + p.size() && port >= 0 &&
         port <= 65535;
}

}  // namespace

int Receive(const ReceiveOptions& options, const sigset_t& stop_signals) {
  std::string host;
  int port = 0;
  if (!SplitListen(options.listen, host, port)) {
    std::cerr << "--listen takes host:port, e.g. 127.0.0.1:8080 (port 0: any free port).\n";
    return 2;
  }
  int fd = ::open(options.out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::cerr << "Cannot open " << options.out << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  std::mutex mu;  // one line at a time, in the order the deliveries are answered
  httplib::Server server;
  // Each keep-alive connection holds a thread while it is open. cpp-httplib's default pool (8
  // threads on 2 cores) is fewer than three relay replicas open, and a connection past it waits
  // unserved until the relay's request timeout.
  server.new_task_queue = [] { return new httplib::ThreadPool(256); };
  auto record = [&](const httplib::Request& req, httplib::Response& res) {
    const std::string line = ReceiptLine(req);
    std::lock_guard<std::mutex> lock(mu);
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      res.status = 500;  // not recorded: QueueBox retries it
      return;
    }
    res.status = 204;
  };
  server.Post(".*", record);
  server.Put(".*", record);
  int bound =
      port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    std::cerr << "Cannot listen on " << options.listen << "\n";
    ::close(fd);
    return 1;
  }
  std::cout << "Listening on " << host << ":" << bound << ", recording to " << options.out
            << std::endl;
  std::thread serving([&] { server.listen_after_bind(); });
  int signal = 0;
  sigwait(&stop_signals, &signal);
  server.stop();
  serving.join();
  ::close(fd);
  return 0;
}

}  // namespace queuebox::app
