// http_receiver.cc: cpp-httplib server recording requests for tests.
#include "testing/http_receiver.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <mutex>
#include <random>

namespace queuebox::testing {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// cpp-httplib is compiled (Debian) with a listen backlog of 5: a client that opens a hundred
// connections at once sees dropped SYNs and multi-second stalls. Listening again on the same
// socket raises the backlog; the socket is found by its port.
void RaiseListenBacklog(int port) {
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) continue;
    if (addr.sin_family != AF_INET || ntohs(addr.sin_port) != port) continue;
    int listening = 0;
    socklen_t opt_len = sizeof(listening);
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &opt_len) == 0 && listening) {
      ::listen(fd, 1024);
      return;
    }
  }
}

}  // namespace

std::string ReceivedRequest::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreCase(n, name)) return v;
  }
  return "";
}

std::vector<std::string> ReceivedRequest::HeaderValues(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreCase(n, name)) out.push_back(v);
  }
  return out;
}

HttpReceiver::HttpReceiver(int threads) : threads_(threads) {}

HttpReceiver::~HttpReceiver() { Stop(); }

Status HttpReceiver::Start(int port) {
  if (server_) return FailedPrecondition("receiver already started");
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  server_ = std::make_unique<httplib::Server>();
  const size_t threads = static_cast<size_t>(threads_);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_keep_alive_max_count(100000);
  server_->set_keep_alive_timeout(1);  // seconds; keeps Stop() quick
  // cpp-httplib's default sets SO_REUSEPORT alone; SO_REUSEADDR too lets a restarted receiver
  // bind its port past the connections the stopped one left in TIME_WAIT.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEPORT, &yes, sizeof(yes));
  });
  auto handler = [this](const httplib::Request& req, httplib::Response& res) {
    ReceivedRequest r;
    r.method = req.method;
    r.target = req.target;
    r.body = req.body;
    r.remote_port = req.remote_port;
    for (const auto& [name, value] : req.headers) {
      // cpp-httplib adds these itself; they are not on the wire.
      if (name == "REMOTE_ADDR" || name == "REMOTE_PORT" || name == "LOCAL_ADDR" ||
          name == "LOCAL_PORT") {
        continue;
      }
      r.headers.emplace_back(name, value);
    }
    ReceiverResponse answer = Handle(std::move(r));
    res.status = answer.status;
    for (const auto& [name, value] : answer.headers) res.set_header(name, value);
    if (!answer.body.empty()) res.set_content(answer.body, answer.content_type.c_str());
  };
  const char* kAny = ".*";
  server_->Get(kAny, handler);
  server_->Post(kAny, handler);
  server_->Put(kAny, handler);
  server_->Patch(kAny, handler);
  server_->Delete(kAny, handler);
  if (port == 0) {
    port_ = server_->bind_to_any_port("127.0.0.1");
  } else {
    port_ = server_->bind_to_port("127.0.0.1", port) ? port : -1;
  }
  if (port_ <= 0) {
    server_.reset();
    return Unavailable("cannot bind 127.0.0.1:" + std::to_string(port));
  }
  RaiseListenBacklog(port_);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!server_->is_running()) {
    if (std::chrono::steady_clock::now() > deadline) return Unavailable("receiver did not start");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::Ok();
}

void HttpReceiver::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

std::string HttpReceiver::BaseUrl() const { return "http://127.0.0.1:" + std::to_string(port_); }

void HttpReceiver::SetDefaultResponse(ReceiverResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  default_response_ = std::move(response);
}

void HttpReceiver::EnqueueResponse(ReceiverResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  queued_.push_back(std::move(response));
}

void HttpReceiver::SetResponder(std::function<ReceiverResponse(const ReceivedRequest&)> responder) {
  std::lock_guard<std::mutex> lock(mu_);
  responder_ = std::move(responder);
}

ReceiverResponse HttpReceiver::Handle(ReceivedRequest request) {
  ReceiverResponse answer;
  std::function<ReceiverResponse(const ReceivedRequest&)> responder;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++active_;
    max_active_ = std::max(max_active_, active_);
    if (!queued_.empty()) {
      answer = std::move(queued_.front());
      queued_.pop_front();
    } else if (responder_) {
      responder = responder_;
    } else {
      answer = default_response_;
    }
  }
  if (responder) answer = responder(request);
  std::unique_lock<std::mutex> lock(mu_);
  requests_.push_back(std::move(request));
  changed_.notify_all();
  if (answer.delay.count() > 0) {
    changed_.wait_for(lock, answer.delay, [this] { return stopping_; });
  }
  --active_;
  return answer;
}

std::vector<ReceivedRequest> HttpReceiver::Requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

std::size_t HttpReceiver::RequestCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_.size();
}

bool HttpReceiver::WaitForRequests(std::size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, timeout, [&] { return requests_.size() >= n; });
}

int HttpReceiver::MaxConcurrent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_active_;
}

void HttpReceiver::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  requests_.clear();
  max_active_ = active_;
}

namespace {

// True when 127.0.0.1:<port> can be bound now (port 0: any; *port gets the one bound).
bool CanBind(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(*port));
  socklen_t len = sizeof(addr);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
            ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (ok) *port = ntohs(addr.sin_port);
  ::close(fd);
  return ok;
}

// The first port of the kernel's ephemeral range (outgoing connections take their local port
// from there).
int EphemeralLow() {
  int low = 32768, high = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    std::fclose(f);
  }
  return low;
}

}  // namespace

int UnusedLoopbackPort() {
  // Below the ephemeral range: a server stopped and restarted on this port cannot find it taken
  // by some outgoing connection meanwhile, nor a retrying client connected to itself.
  const int low = 20000, high = std::min(EphemeralLow(), 32768) - 1;
  static std::mutex mu;
  static std::mt19937 random(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
  std::lock_guard<std::mutex> lock(mu);
  if (high > low) {
    std::uniform_int_distribution<int> pick(low, high);
    for (int i = 0; i < 200; ++i) {
      int port = pick(random);
      if (CanBind(&port)) return port;
    }
  }
  int port = 0;  // the range is full or absent: any free port
  return CanBind(&port) ? port : 0;
}

}  // namespace queuebox::testing
