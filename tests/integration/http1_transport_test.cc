// The http destination's own HTTP/1.1 transport (src/destinations/http/http1_client.h) against
// raw TCP servers on loopback that answer exactly as scripted: kept connections a receiver
// closes, chunked and unbounded answers, interim answers, empty replies, a host with several
// addresses. What every http receiver sees is in http_destination_test.cc.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "destinations/http/http_destination.h"
#include "testing/broker_testing.h"

namespace queuebox {
namespace {

using ::queuebox::testing::BatchOf;
using ::queuebox::testing::CollectingSink;
using ::testing::HasSubstr;

// What the server does with one request: the bytes it answers (may be empty), then whether it
// closes the connection.
struct Reply {
  Reply(std::string b, bool c = false, std::string l = {}, int l_ms = 0)
      : bytes(std::move(b)), close(c), later(std::move(l)), later_ms(l_ms) {}
  std::string bytes;
  bool close = false;
  std::string later;  // written later_ms after `bytes` (bytes that belong to no request)
  int later_ms = 0;
};

// A listening socket on 127.0.0.1 at a port the kernel picks (set in `port`; 0 when a call
// failed). A backlog of 512: a batch opens up to maxInFlight connections at once.
int ListenOnLoopback(int& port) {
  port = 0;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(fd, 512) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  return fd;
}

// A raw HTTP server on 127.0.0.1: reads each request (head and Content-Length body) and answers
// with script(request number, connection number). Counts connections and requests.
class ScriptedServer {
 public:
  using Script = std::function<Reply(int request, int connection)>;
  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    fd_ = ListenOnLoopback(port_);
    if (port_ == 0) return;
    accept_ = std::thread([this] { AcceptLoop(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    if (accept_.joinable()) accept_.join();
    {
      // Only sockets still open are in open_ (Close takes them out), so no number is shut
      // down after the kernel gave it to another descriptor.
      std::lock_guard<std::mutex> lock(mu_);
      for (int c : open_) ::shutdown(c, SHUT_RDWR);
    }
    for (auto& t : serving_) t.join();
  }
  int port() const { return port_; }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }
  // The head (request line and header lines) of each request, in arrival order.
  std::vector<std::string> heads() {
    std::lock_guard<std::mutex> lock(mu_);
    return heads_;
  }

 private:
  void AcceptLoop() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      int n = connections_.fetch_add(1);
      std::lock_guard<std::mutex> lock(mu_);
      open_.push_back(c);
      serving_.emplace_back([this, c, n] { Serve(c, n); });
    }
  }
  void Close(int c) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase(open_, c);
    ::close(c);
  }
  // MSG_NOSIGNAL: a client that went away must not kill the test with SIGPIPE.
  static bool Send(int c, const std::string& bytes) {
    return ::send(c, bytes.data(), bytes.size(), MSG_NOSIGNAL) >= 0;
  }
  void Serve(int c, int connection) {
    std::string data;
    char buf[65536];
    for (;;) {
      size_t head_end = data.find("\r\n\r\n");
      while (head_end == std::string::npos) {
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) return Close(c);
        data.append(buf, static_cast<size_t>(n));
        head_end = data.find("\r\n\r\n");
      }
      size_t length = 0;
      size_t cl = data.find("Content-Length: ");
      if (cl != std::string::npos && cl < head_end) length = std::stoul(data.substr(cl + 16));
      while (data.size() < head_end + 4 + length) {
        ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) return Close(c);
        data.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        heads_.push_back(data.substr(0, head_end + 2));
      }
      data.erase(0, head_end + 4 + length);
      Reply reply = script_(requests_.fetch_add(1), connection);
      if (!reply.bytes.empty() && !Send(c, reply.bytes)) {
        return Close(c);
      }
      if (!reply.later.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(reply.later_ms));
        if (!Send(c, reply.later)) return Close(c);
      }
      if (reply.close) {
        ::shutdown(c, SHUT_RDWR);
        return Close(c);
      }
    }
  }

  Script script_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_{0};
  std::thread accept_;
  std::mutex mu_;
  std::vector<int> open_;
  std::vector<std::thread> serving_;
  std::vector<std::string> heads_;  // guarded by mu_
};

// A raw server on 127.0.0.1 that hands each accepted connection to `serve` (on its own thread),
// for receivers that do not follow the request-then-answer rhythm of ScriptedServer.
class RawServer {
 public:
  using Serve = std::function<void(int fd, int connection)>;
  explicit RawServer(Serve serve) : serve_(std::move(serve)) {
    fd_ = ListenOnLoopback(port_);
    if (port_ == 0) return;
    accept_ = std::thread([this] {
      for (int n = 0;; ++n) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::lock_guard<std::mutex> lock(mu_);
        open_.push_back(c);
        threads_.emplace_back([this, c, n] {
          serve_(c, n);
          std::lock_guard<std::mutex> closing(mu_);
          std::erase(open_, c);
          ::close(c);
        });
      }
    });
  }
  ~RawServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    if (accept_.joinable()) accept_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int c : open_) ::shutdown(c, SHUT_RDWR);
    }
    for (auto& t : threads_) t.join();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  Serve serve_;
  int fd_ = -1;
  int port_ = 0;
  std::thread accept_;
  std::mutex mu_;
  std::vector<int> open_;
  std::vector<std::thread> threads_;
};

// Reads from c until `data` holds a request head; returns its Content-Length (-1 on EOF).
long ReadHead(int c, std::string& data) {
  char buf[65536];
  while (data.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = ::read(c, buf, sizeof buf);
    if (n <= 0) return -1;
    data.append(buf, static_cast<size_t>(n));
  }
  size_t head_end = data.find("\r\n\r\n");
  size_t cl = data.find("Content-Length: ");
  long length = cl != std::string::npos && cl < head_end ? std::stol(data.substr(cl + 16)) : 0;
  data.erase(0, head_end + 4);
  return length;
}

// Reads and drops `length` bytes of body (some may be in `data` already). False on EOF.
bool ReadBody(int c, std::string& data, long length) {
  char buf[65536];
  while (static_cast<long>(data.size()) < length) {
    ssize_t n = ::read(c, buf, sizeof buf);
    if (n <= 0) return false;
    data.append(buf, static_cast<size_t>(n));
  }
  data.erase(0, static_cast<size_t>(length));
  return true;
}

bool WriteAll(int c, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(c, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

size_t OpenFds() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

OutboxRow Row(std::string id) {
  return ::queuebox::testing::BrokerRow(std::move(id), "orders.created", std::string("k"),
                                        R"({"n":1})", "{}");
}

std::unique_ptr<HttpDestination> Make(const std::string& base_url, int64_t timeout_ms = 10000) {
  HttpDestinationSettings s;
  s.name = "webhook";
  s.base_url = base_url;
  s.path = "/hooks";
  s.timeout_ms = timeout_ms;
  Result<std::unique_ptr<HttpDestination>> d = HttpDestination::Create(std::move(s));
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (!d.ok()) return nullptr;
  EXPECT_TRUE((*d)->Start().ok());
  return std::move(d).value();
}

Outcome PublishOne(HttpDestination& d, const std::string& id,
                   const std::atomic<bool>* cancel = nullptr) {
  std::vector<OutboxRow> rows = {Row(id)};
  std::vector<OutboundMessage> batch = BatchOf(rows);
  batch[0].cancel = cancel;
  CollectingSink sink;
  d.PublishBatch(batch, sink);
  EXPECT_EQ(sink.outcomes().size(), 1u);
  return sink.at(0);
}

const std::string kNoContent = "HTTP/1.1 204 No Content\r\n\r\n";

TEST(Http1TransportTest, AKeptConnectionIsReusedForTheNextRequests) {
  ScriptedServer server([](int, int) { return Reply{kNoContent}; });
  auto d = Make(server.Url());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(PublishOne(*d, "id-" + std::to_string(i)).kind, Outcome::Kind::kDelivered);
  }
  EXPECT_EQ(server.requests(), 5);
  EXPECT_EQ(server.connections(), 1);
}

TEST(Http1TransportTest, AKeptConnectionTheReceiverClosedIsReplacedOnce) {
  // Each connection answers one request, then the receiver closes it (an idle timeout, a restart).
  ScriptedServer server([](int, int) { return Reply{kNoContent, /*close=*/true}; });
  auto d = Make(server.Url());
  ASSERT_EQ(PublishOne(*d, "one").kind, Outcome::Kind::kDelivered);
  // The kept connection is dead by now: the request goes out again on a new one.
  Outcome two = PublishOne(*d, "two");
  EXPECT_EQ(two.kind, Outcome::Kind::kDelivered) << two.error;
  EXPECT_EQ(server.requests(), 2);
  EXPECT_EQ(server.connections(), 2);
}

TEST(Http1TransportTest, ConnectionCloseInTheAnswerIsHonoured) {
  ScriptedServer server([](int, int) {
    return Reply{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"};
  });
  auto d = Make(server.Url());
  EXPECT_EQ(PublishOne(*d, "one").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(PublishOne(*d, "two").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(server.connections(), 2);  // the first was not kept, though the server left it open
}

TEST(Http1TransportTest, AChunkedErrorAnswerIsReadWholeAndTheConnectionKept) {
  ScriptedServer server([](int request, int) {
    if (request == 0) {
      return Reply{
          "HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n"
          "4\r\nboom\r\n6\r\n, gone\r\n0\r\n\r\n"};
    }
    return Reply{kNoContent};
  });
  auto d = Make(server.Url());
  Outcome failed = PublishOne(*d, "one");
  EXPECT_EQ(failed.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(failed.error, "HTTP 500: Internal Server Error - boom, gone");
  EXPECT_EQ(PublishOne(*d, "two").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(server.connections(), 1);
}

TEST(Http1TransportTest, AnAnswerWithoutLengthEndsWithTheConnection) {
  ScriptedServer server([](int, int) {
    return Reply{"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 7\r\n\r\nbusy", true};
  });
  auto d = Make(server.Url());
  Outcome o = PublishOne(*d, "one");
  EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable);
  EXPECT_EQ(o.retry_after_ms, 7000);
  EXPECT_EQ(o.error, "HTTP 503: Service Unavailable - busy");
}

TEST(Http1TransportTest, InterimAnswersArePassedOver) {
  ScriptedServer server([](int, int) {
    return Reply{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"};
  });
  auto d = Make(server.Url());
  Outcome o = PublishOne(*d, "one");
  EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
  EXPECT_EQ(o.answer, "HTTP 202");
}

TEST(Http1TransportTest, AnEmptyReplyOnANewConnectionIsAnOutage) {
  ScriptedServer server([](int, int) { return Reply{"", /*close=*/true}; });
  auto d = Make(server.Url());
  Outcome o = PublishOne(*d, "one");
  EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable);
  EXPECT_EQ(o.error, "Publish failed: Empty reply from server");
  EXPECT_EQ(server.requests(), 1);  // a new connection is not tried again
}

TEST(Http1TransportTest, AMalformedAnswerSpendsAnAttempt) {
  ScriptedServer server([](int, int) { return Reply{"SSH-2.0-OpenSSH_9.2\r\n", true}; });
  auto d = Make(server.Url());
  Outcome o = PublishOne(*d, "one");
  EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(o.error, "Publish failed: Invalid response: not an HTTP/1.x status line");
}

TEST(Http1TransportTest, AnAnswerThatNeverEndsIsARequestTimeout) {
  ScriptedServer server(
      [](int, int) { return Reply{"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"}; });
  auto d = Make(server.Url(), /*timeout_ms=*/300);
  Outcome o = PublishOne(*d, "one");
  EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(o.error, "Request timeout after 300ms");
}

TEST(Http1TransportTest, ARefusedConnectionIsAnOutageNamingTheAddress) {
  int port = 0;
  {
    ScriptedServer gone([](int, int) { return Reply{kNoContent}; });
    port = gone.port();
  }
  auto d = Make("http://127.0.0.1:" + std::to_string(port));
  Outcome o = PublishOne(*d, "one");
  EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable);
  EXPECT_EQ(o.error, "Publish failed: Failed to connect to 127.0.0.1 port " + std::to_string(port) +
                         ": Connection refused");
}

TEST(Http1TransportTest, AHostNameIsResolvedAndEachAddressTried) {
  ScriptedServer server([](int, int) { return Reply{kNoContent}; });
  auto d = Make("http://localhost:" + std::to_string(server.port()));
  Outcome o = PublishOne(*d, "one");
  EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
}

TEST(Http1TransportTest, ACancelledMessageIsNeverWritten) {
  ScriptedServer server([](int, int) { return Reply{kNoContent}; });
  auto d = Make(server.Url());
  std::atomic<bool> cancel{true};
  Outcome o = PublishOne(*d, "one", &cancel);
  EXPECT_EQ(o.kind, Outcome::Kind::kCancelled);
  EXPECT_EQ(PublishOne(*d, "two").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(server.requests(), 1);
}

TEST(Http1TransportTest, ManyRequestsOfOneBatchShareTheKeptConnections) {
  ScriptedServer server([](int, int) { return Reply{kNoContent}; });
  auto d = Make(server.Url());
  std::vector<OutboxRow> rows;
  for (int i = 0; i < 200; ++i) rows.push_back(Row("id-" + std::to_string(i)));
  for (int round = 0; round < 3; ++round) {
    std::vector<OutboundMessage> batch = BatchOf(rows);
    CollectingSink sink;
    d->PublishBatch(batch, sink);
    ASSERT_EQ(sink.outcomes().size(), rows.size());
    for (const auto& [i, o] : sink.outcomes()) {
      EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << i << ": " << o.error;
    }
  }
  EXPECT_EQ(server.requests(), 600);
  EXPECT_LE(server.connections(), 200);  // the later rounds reuse the first round's
}

// ---- Review: hostile receivers the transport already handles --------------------------------

OutboxRow BigRow(std::string id, size_t bytes) {
  std::string payload = R"({"p":")" + std::string(bytes, 'x') + R"("})";
  return ::queuebox::testing::BrokerRow(std::move(id), "orders.created", std::string("k"),
                                        std::move(payload), "{}");
}

TEST(Http1TransportTest, AnAnswerSentOneByteAtATimeIsReadWhole) {
  const std::string answer =
      "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nbus\r\n1\r\ny\r\n0\r\n\r\n";
  RawServer server([&](int c, int) {
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::string data;
    for (;;) {
      long length = ReadHead(c, data);
      if (length < 0 || !ReadBody(c, data, length)) return;
      for (char b : answer) {
        if (!WriteAll(c, std::string_view(&b, 1))) return;
        std::this_thread::sleep_for(std::chrono::microseconds(300));
      }
    }
  });
  auto d = Make(server.Url(), /*timeout_ms=*/5000);
  for (int i = 0; i < 3; ++i) {
    Outcome o = PublishOne(*d, "id-" + std::to_string(i));
    EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable);
    EXPECT_EQ(o.error, "HTTP 503: Service Unavailable - busy");
    EXPECT_EQ(o.retry_after_ms, 2000);
  }
}

TEST(Http1TransportTest, ASlowLorisAnswerIsARequestTimeoutAtTimeoutMs) {
  RawServer server([](int c, int) {
    std::string data;
    long length = ReadHead(c, data);
    if (length < 0 || !ReadBody(c, data, length)) return;
    const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    for (char b : answer) {  // 100 ms a byte: 3.9 s in all
      if (!WriteAll(c, std::string_view(&b, 1))) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  auto d = Make(server.Url(), /*timeout_ms=*/800);
  auto start = std::chrono::steady_clock::now();
  Outcome o = PublishOne(*d, "one");
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(o.error, "Request timeout after 800ms");
  EXPECT_LT(took, std::chrono::milliseconds(3000));  // the whole answer would take 3.9 s
}

// The receiver refuses a large body after its head and closes (its kernel resets the connection,
// the body unread): the answer is what is reported, not the reset.
TEST(Http1TransportTest, AnEarlyAnswerToALargeBodyIsReported) {
  RawServer server([](int c, int) {
    std::string data;
    if (ReadHead(c, data) < 0) return;
    WriteAll(c,
             "HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbig");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  auto d = Make(server.Url(), /*timeout_ms=*/5000);
  std::vector<OutboxRow> rows = {BigRow("big", 8 << 20)};
  for (int i = 0; i < 5; ++i) {
    std::vector<OutboundMessage> batch = BatchOf(rows);
    CollectingSink sink;
    d->PublishBatch(batch, sink);
    EXPECT_EQ(sink.at(0).kind, Outcome::Kind::kRetry);
    EXPECT_EQ(sink.at(0).error, "HTTP 413: Payload Too Large - big");
  }
}

TEST(Http1TransportTest, AnHttp10ReceiverIsServedAndItsConnectionsNotKept) {
  ScriptedServer server([](int, int) {
    return Reply{"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", /*close=*/true};
  });
  auto d = Make(server.Url());
  for (int i = 0; i < 3; ++i) {
    Outcome o = PublishOne(*d, "id-" + std::to_string(i));
    EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
  }
  EXPECT_EQ(server.connections(), 3);
  EXPECT_EQ(server.requests(), 3);
}

TEST(Http1TransportTest, AHugeChunkSizeEndsInATimeoutAndAHugeRetryAfterIsCapped) {
  ScriptedServer server([](int request, int) {
    if (request == 0) {
      return Reply{
          "HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n"
          "7fffffffffffffff\r\nabc"};
    }
    return Reply{
        "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 99999999999999999999999\r\n"
        "Content-Length: 0\r\n\r\n"};
  });
  auto d = Make(server.Url(), /*timeout_ms=*/300);
  Outcome o = PublishOne(*d, "one");
  EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(o.error, "Request timeout after 300ms");
  Outcome two = PublishOne(*d, "two");
  EXPECT_EQ(two.kind, Outcome::Kind::kUnavailable);
  EXPECT_EQ(two.retry_after_ms, 24 * 3600 * 1000);
}

TEST(Http1TransportTest, AQueryInTheBaseUrlAndAnIpv6LiteralReachTheReceiver) {
  int v6 = ::socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  socklen_t len = sizeof a;
  if (v6 < 0 || ::bind(v6, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(v6, 8) != 0 || ::getsockname(v6, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (v6 >= 0) ::close(v6);
    GTEST_SKIP() << "no ::1";
  }
  const int port = ntohs(a.sin6_port);
  std::string head;
  std::thread t([&] {
    int c = ::accept(v6, nullptr, nullptr);
    if (c < 0) return;
    std::string data;
    char buf[4096];
    while (data.find("\r\n\r\n") == std::string::npos) {
      ssize_t got = ::read(c, buf, sizeof buf);
      if (got <= 0) break;
      data.append(buf, static_cast<size_t>(got));
    }
    head = data.substr(0, data.find("\r\n"));
    long length = ReadHead(c, data);
    if (length >= 0 && ReadBody(c, data, length)) WriteAll(c, kNoContent);
    ::close(c);
  });
  HttpDestinationSettings s;
  s.name = "webhook";
  s.base_url = "http://[::1]:" + std::to_string(port) + "/api?token=a%20b&x=1";
  s.path = "/hooks";
  auto d = std::move(HttpDestination::Create(std::move(s))).value();
  Outcome o = PublishOne(*d, "one");
  t.join();
  ::close(v6);
  EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
  EXPECT_EQ(head, "POST /api/hooks?token=a%20b&x=1 HTTP/1.1");
}

// nginx-like: a connection serves at most 7 requests (the 7th answer says Connection: close) and
// is closed after 30 ms idle, unannounced. Four threads publish batches at once on one destination
// (maxInFlight 16 shared): every message is delivered, none fails, no descriptor is left open.
TEST(Http1TransportTest, KeepAliveLimitsOfTheReceiverUnderLoadLoseNothing) {
  const size_t fds_before = OpenFds();
  std::atomic<int> answered{0};
  {
    RawServer server([&](int c, int) {
      std::string data;
      for (int served = 1;; ++served) {
        pollfd p{c, POLLIN, 0};
        if (data.empty() && ::poll(&p, 1, 30) == 0) return;  // keepalive_timeout
        long length = ReadHead(c, data);
        if (length < 0 || !ReadBody(c, data, length)) return;
        answered.fetch_add(1);
        if (served == 7) {
          WriteAll(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
          return;
        }
        if (!WriteAll(c, kNoContent)) return;
      }
    });
    {
      HttpDestinationSettings s;
      s.name = "webhook";
      s.base_url = server.Url();
      s.max_in_flight = 16;
      auto d = std::move(HttpDestination::Create(std::move(s))).value();
      std::atomic<int> delivered{0};
      std::atomic<int> failed{0};
      std::mutex mu;
      std::vector<std::string> errors;
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          for (int round = 0; round < 25; ++round) {
            std::vector<OutboxRow> rows;
            for (int i = 0; i < 20; ++i) {
              rows.push_back(
                  Row(std::to_string(t) + "-" + std::to_string(round) + "-" + std::to_string(i)));
            }
            std::vector<OutboundMessage> batch = BatchOf(rows);
            CollectingSink sink;
            d->PublishBatch(batch, sink);
            for (const auto& [i, o] : sink.outcomes()) {
              if (o.kind == Outcome::Kind::kDelivered) {
                delivered.fetch_add(1);
              } else {
                failed.fetch_add(1);
                std::lock_guard<std::mutex> lock(mu);
                errors.push_back(o.error);
              }
            }
            if (round % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(40));
          }
        });
      }
      for (auto& th : threads) th.join();
      EXPECT_EQ(delivered.load(), 4 * 25 * 20);
      EXPECT_EQ(failed.load(), 0) << (errors.empty() ? "" : errors[0]);
      d->Stop();
    }
  }
  EXPECT_EQ(OpenFds(), fds_before);
}

// Descriptors: thousands of requests, failures, timeouts, cancellations, then Stop() and the
// destination gone: as many descriptors open as before.
TEST(Http1TransportTest, NoDescriptorOutlivesTheDestination) {
  const size_t fds_before = OpenFds();
  {
    ScriptedServer server([&](int request, int) {
      switch (request % 5) {
        case 0:
          return Reply{"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1\r\n\r\nx"};
        case 1:
          return Reply{"", /*close=*/true};
        case 2:
          return Reply{"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"};  // times out
        default:
          return Reply{kNoContent};
      }
    });
    {
      auto d = Make(server.Url(), /*timeout_ms=*/200);
      std::atomic<bool> cancel{true};
      for (int round = 0; round < 20; ++round) {
        std::vector<OutboxRow> rows;
        for (int i = 0; i < 100; ++i) rows.push_back(Row("id-" + std::to_string(i)));
        std::vector<OutboundMessage> batch = BatchOf(rows);
        for (size_t i = 0; i < batch.size(); i += 7) batch[i].cancel = &cancel;
        CollectingSink sink;
        d->PublishBatch(batch, sink);
        ASSERT_EQ(sink.outcomes().size(), rows.size());
      }
      d->Stop();
    }
  }
  EXPECT_EQ(OpenFds(), fds_before);
}

// A listener whose backlog is full drops the SYN: the connect never completes.
TEST(Http1TransportTest, AConnectThatNeverCompletesIsAConnectTimeoutOfHalfTheTimeout) {
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(l, 0), 0);
  ASSERT_EQ(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    int f = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    (void)::connect(f, reinterpret_cast<sockaddr*>(&a), sizeof a);
    fillers.push_back(f);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // The connect timeout is half of timeoutMs; 1.5 s of room above it for a sanitizer run, and
  // still well short of the whole timeoutMs.
  auto d = Make("http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)), /*timeout_ms=*/4000);
  auto start = std::chrono::steady_clock::now();
  Outcome o = PublishOne(*d, "one");
  auto took = std::chrono::steady_clock::now() - start;
  for (int f : fillers) ::close(f);
  ::close(l);
  EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable);
  EXPECT_EQ(o.error, "Connect timeout after 2000ms");
  EXPECT_GE(took, std::chrono::milliseconds(1990));
  EXPECT_LT(took, std::chrono::milliseconds(3500));
}

// ---- Review: found defects ----------------------------------------------------------------------

// A row may name a virtual host (http_url_test.cc) and a destination may set its own User-Agent or
// Accept: curl sent those instead of its own. Two Host fields make a receiver answer 400 (RFC 9112
// 3.2), so the caller's Host, User-Agent and Accept replace the transport's.
TEST(Http1TransportTest, ARowHostOrStaticUserAgentReplacesTheTransportsOwn) {
  ScriptedServer server([](int, int) { return Reply{kNoContent}; });
  HttpDestinationSettings s;
  s.name = "webhook";
  s.base_url = server.Url();
  s.path = "/hooks";
  s.static_headers = {{"user-agent", "billing-relay/2"}, {"Accept", "application/json"}};
  auto d = std::move(HttpDestination::Create(std::move(s))).value();
  std::vector<OutboxRow> rows = {::queuebox::testing::BrokerRow(
      "one", "orders.created", std::string("k"), R"({"n":1})", R"({"Host":"orders.internal"})")};
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d->PublishBatch(batch, sink);
  ASSERT_EQ(sink.at(0).kind, Outcome::Kind::kDelivered) << sink.at(0).error;
  ASSERT_EQ(server.heads().size(), 1u);
  const std::string head = server.heads()[0];
  auto count = [&](const std::string& lower_name) {
    int n = 0;
    std::string lower = head;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (size_t p = lower.find("\r\n" + lower_name + ":"); p != std::string::npos;
         p = lower.find("\r\n" + lower_name + ":", p + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("host"), 1) << head;
  EXPECT_EQ(count("user-agent"), 1) << head;
  EXPECT_EQ(count("accept"), 1) << head;
  EXPECT_THAT(head, HasSubstr("\r\nHost: orders.internal\r\n"));
  EXPECT_THAT(head, HasSubstr("\r\nuser-agent: billing-relay/2\r\n"));
  EXPECT_THAT(head, HasSubstr("\r\nAccept: application/json\r\n"));
}

// A receiver that writes a second answer (or a stray line end) after the first one, a moment
// later, on a kept connection. Those bytes belong to no request: the next request on that
// connection must not take them for its answer. Here the stale answer is a 204 and the real answer
// to the next request a 500: reading the stale one would report a refused message Delivered.
TEST(Http1TransportTest, BytesAfterTheAnswerOnAKeptConnectionAreNotTheNextAnswer) {
  ScriptedServer server([](int request, int) {
    if (request == 0) {
      return Reply{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, kNoContent, 20};
    }
    return Reply{"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"};
  });
  auto d = Make(server.Url());
  ASSERT_EQ(PublishOne(*d, "one").kind, Outcome::Kind::kDelivered);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the stray answer arrives
  Outcome two = PublishOne(*d, "two");
  EXPECT_EQ(two.kind, Outcome::Kind::kRetry) << two.answer;
  EXPECT_EQ(two.error, "HTTP 500: Internal Server Error");
}

TEST(Http1TransportTest, AStrayLineEndAfterAnAnswerIsNotAnInvalidNextAnswer) {
  ScriptedServer server([](int request, int) {
    if (request == 0) return Reply{kNoContent, false, "\r\n", 20};
    return Reply{kNoContent};
  });
  auto d = Make(server.Url());
  ASSERT_EQ(PublishOne(*d, "one").kind, Outcome::Kind::kDelivered);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the stray line end arrives
  Outcome two = PublishOne(*d, "two");
  EXPECT_EQ(two.kind, Outcome::Kind::kDelivered) << two.error;
}

// A receiver may send an interim answer (100 Continue) unasked while it reads the body (RFC 9110
// 15.2: a client must be able to take 1xx answers it did not expect). The body must still be
// written whole, or the receiver waits for it and the exchange times out.
TEST(Http1TransportTest, AnInterimAnswerWhileTheBodyIsWrittenDoesNotStopTheBody) {
  RawServer server([](int c, int) {
    std::string data;
    long length = ReadHead(c, data);
    if (length < 0 || !WriteAll(c, "HTTP/1.1 100 Continue\r\n\r\n")) return;
    if (!ReadBody(c, data, length)) return;
    WriteAll(c, kNoContent);
    char b;
    (void)::read(c, &b, 1);  // until the client closes
  });
  auto d = Make(server.Url(), /*timeout_ms=*/3000);
  std::vector<OutboxRow> rows = {BigRow("big", 16 << 20)};
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d->PublishBatch(batch, sink);
  EXPECT_EQ(sink.at(0).kind, Outcome::Kind::kDelivered) << sink.at(0).error;
}

// A kept connection the receiver closes without answering after more than the connect timeout
// (timeoutMs / 2): the request goes out again on a new connection, which gets its own connect
// time. Before, the replacement was judged against the first connection's connect deadline and
// reported "Connect timeout" at once, though the receiver was up and never slow to accept.
TEST(Http1TransportTest, AKeptConnectionThatDiesLateIsReplacedWithItsOwnConnectTime) {
  RawServer server([](int c, int connection) {
    std::string data;
    for (int request = 0;; ++request) {
      long length = ReadHead(c, data);
      if (length < 0 || !ReadBody(c, data, length)) return;
      if (connection == 0 && request == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2500));
        return;  // closed unanswered, past the connect timeout (2 s)
      }
      if (!WriteAll(c, kNoContent)) return;
    }
  });
  auto d = Make(server.Url(), /*timeout_ms=*/4000);  // 1.5 s left for the replacement
  ASSERT_EQ(PublishOne(*d, "one").kind, Outcome::Kind::kDelivered);
  Outcome two = PublishOne(*d, "two");
  EXPECT_EQ(two.kind, Outcome::Kind::kDelivered) << two.error;
}

}  // namespace
}  // namespace queuebox
