// The http destination's own HTTP/1.1 transport (src/destinations/http/http1_client.h) against
// raw TCP servers on loopback that answer exactly as scripted: kept connections a receiver
// closes, chunked and unbounded answers, interim answers, empty replies, a host with several
// addresses. What every http receiver sees is in http_destination_test.cc.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
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
  std::string bytes;
  bool close = false;
};

// A raw HTTP server on 127.0.0.1: reads each request (head and Content-Length body) and answers
// with script(request number, connection number). Counts connections and requests.
class ScriptedServer {
 public:
  using Script = std::function<Reply(int request, int connection)>;
  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(fd_, 512) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
    accept_ = std::thread([this] { AcceptLoop(); });
  }
  ~ScriptedServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    if (accept_.joinable()) accept_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (int c : open_) ::shutdown(c, SHUT_RDWR);
    for (auto& t : serving_) t.join();
  }
  int port() const { return port_; }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }

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
  static void Close(int c) { ::close(c); }
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
      data.erase(0, head_end + 4 + length);
      Reply reply = script_(requests_.fetch_add(1), connection);
      if (!reply.bytes.empty() && ::write(c, reply.bytes.data(), reply.bytes.size()) < 0) {
        return Close(c);
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
};

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

TEST(Http1TransportTest, InterimAnswersAreSkipped) {
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

}  // namespace
}  // namespace queuebox
