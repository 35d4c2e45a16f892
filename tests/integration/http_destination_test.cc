// The http destination against a real HTTP server on loopback (QueueBox reference §7.1, §9.1):
// statuses, outages, the request on the wire, requests in flight. What every destination does is
// in tests/contract/destination_contract_test.cc.
#include "destinations/http/http_destination.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "testing/broker_testing.h"
#include "testing/http_receiver.h"

namespace queuebox {
namespace {

using ::queuebox::testing::BatchOf;
using ::queuebox::testing::CollectingSink;
using ::queuebox::testing::HttpReceiver;
using ::queuebox::testing::ReceivedRequest;
using ::queuebox::testing::ReceiverResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

OutboxRow Row(std::string id, std::optional<std::string> key = std::nullopt,
              std::string headers = "{}", std::string payload = R"({"n":1})") {
  return ::queuebox::testing::BrokerRow(std::move(id), "orders.created", std::move(key),
                                        std::move(payload), std::move(headers));
}

struct DestOptions {
  std::string path = "/hooks";
  int64_t timeout_ms = 10000;
  std::map<std::string, std::string> headers = {};
  int max_error_body_bytes = 2048;
  int max_in_flight = 256;
  std::optional<DestinationAuthConfig> auth = std::nullopt;
};

std::unique_ptr<HttpDestination> MakeDestination(const std::string& base_url, DestOptions o = {}) {
  HttpDestinationSettings s;
  s.name = "webhook";
  s.base_url = base_url;
  s.path = o.path;
  s.timeout_ms = o.timeout_ms;
  s.static_headers = o.headers;
  s.max_error_body_bytes = o.max_error_body_bytes;
  s.max_in_flight = o.max_in_flight;
  s.auth = o.auth;
  Result<std::unique_ptr<HttpDestination>> d = HttpDestination::Create(std::move(s));
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (!d.ok()) return nullptr;
  EXPECT_TRUE((*d)->Start().ok());
  return std::move(d).value();
}

class HttpDestinationTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(receiver_.Start().ok()); }
  void TearDown() override { receiver_.Stop(); }

  // Publishes one row and returns its outcome.
  Outcome PublishOne(HttpDestination& d, const OutboxRow& row) {
    std::vector<OutboxRow> rows = {row};
    std::vector<OutboundMessage> batch = BatchOf(rows);
    CollectingSink sink;
    d.PublishBatch(batch, sink);
    EXPECT_EQ(sink.outcomes().size(), 1u);
    return sink.at(0);
  }

  HttpReceiver receiver_{256};
};

TEST_F(HttpDestinationTest, AnyTwoHundredStatusIsDelivered) {
  // The row's header x-want says which status the receiver answers.
  receiver_.SetResponder([](const ReceivedRequest& r) {
    return ReceiverResponse{.status = std::stoi(r.Header("x-want"))};
  });
  auto d = MakeDestination(receiver_.BaseUrl());
  std::vector<OutboxRow> rows = {Row("a", std::nullopt, R"({"x-want":"200"})"),
                                 Row("b", std::nullopt, R"({"x-want":"202"})"),
                                 Row("c", std::nullopt, R"({"x-want":"204"})")};
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d->PublishBatch(batch, sink);
  ASSERT_EQ(sink.outcomes().size(), 3u);
  for (const auto& [i, o] : sink.outcomes()) {
    EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << i << ": " << o.error;
    EXPECT_EQ(o.error, "");
  }
  EXPECT_EQ(receiver_.RequestCount(), 3u);
}

TEST_F(HttpDestinationTest, ClientErrorIsRetryWithRedactedBody) {
  receiver_.EnqueueResponse(
      {.status = 400, .body = "invalid field; password=hunter2 token: abc123\n"});
  auto d = MakeDestination(receiver_.BaseUrl());
  Outcome o = PublishOne(*d, Row("id-1"));
  EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(o.error,
            "HTTP 400: Bad Request - invalid field; password=[REDACTED] token=[REDACTED]\n");
  EXPECT_THAT(o.error, Not(HasSubstr("hunter2")));
  EXPECT_THAT(o.error, Not(HasSubstr("abc123")));
}

TEST_F(HttpDestinationTest, ServerErrorWithoutBody) {
  receiver_.EnqueueResponse({.status = 500});
  auto d = MakeDestination(receiver_.BaseUrl());
  Outcome o = PublishOne(*d, Row("id-1"));
  EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(o.error, "HTTP 500: Internal Server Error");
}

TEST_F(HttpDestinationTest, RedirectIsNotFollowed) {
  receiver_.EnqueueResponse(
      {.status = 302, .headers = {{"Location", receiver_.BaseUrl() + "/elsewhere"}}});
  auto d = MakeDestination(receiver_.BaseUrl());
  Outcome o = PublishOne(*d, Row("id-1"));
  EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(o.error, "HTTP 302: Found");
  ASSERT_EQ(receiver_.RequestCount(), 1u);
  EXPECT_EQ(receiver_.Requests()[0].target, "/hooks");
}

TEST_F(HttpDestinationTest, LongBodyIsCutRedactedAndCutAgain) {
  // The secret sits at the start of the body, so it falls inside the kept part.
  std::string body = "password=hunter2 " + std::string(5000, 'x');
  receiver_.EnqueueResponse({.status = 503, .body = body});
  auto d = MakeDestination(receiver_.BaseUrl(), {.max_error_body_bytes = 100});
  Outcome o = PublishOne(*d, Row("id-1"));
  EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable);  // 503: the receiver is out
  // "HTTP 503: Service Unavailable - " is 32 characters; 100 - 14 (marker) = 86 kept.
  std::string prefix = "HTTP 503: Service Unavailable - password=[REDACTED] ";
  std::string expected = prefix + std::string(86 - prefix.size(), 'x') + "...[truncated]";
  EXPECT_EQ(o.error, expected);
  EXPECT_EQ(o.error.size(), 100u);
}

TEST_F(HttpDestinationTest, ErrorBodyLongerThanOneReadIsKeptWhole) {
  // The receive buffer is 1 KiB: a 1,800-character body arrives in several reads.
  std::string body = std::string(900, 'a') + std::string(900, 'b');
  receiver_.EnqueueResponse({.status = 422, .body = body});
  auto d = MakeDestination(receiver_.BaseUrl());
  Outcome o = PublishOne(*d, Row("id-1"));
  EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(o.error, "HTTP 422: Unprocessable Entity - " + body);
}

// The destination's fault (docs/guarantees.md §8): 408, 429, 502, 503, 504 are outages, with
// Retry-After (seconds) read; every other status spends an attempt.
TEST_F(HttpDestinationTest, OutageStatusesAreUnavailableWithRetryAfter) {
  auto d = MakeDestination(receiver_.BaseUrl());
  receiver_.EnqueueResponse({.status = 429, .headers = {{"Retry-After", "7"}}});
  Outcome o = PublishOne(*d, Row("id-1"));
  EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable);
  EXPECT_EQ(o.retry_after_ms, 7000);
  EXPECT_EQ(o.error, "HTTP 429: Too Many Requests");
  for (int status : {408, 502, 503, 504}) {
    receiver_.EnqueueResponse({.status = status});
    o = PublishOne(*d, Row("id-1"));
    EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable) << status;
    EXPECT_EQ(o.retry_after_ms, 0) << status;
  }
  for (int status : {400, 404, 409, 413, 500}) {
    receiver_.EnqueueResponse({.status = status});
    o = PublishOne(*d, Row("id-1"));
    EXPECT_EQ(o.kind, Outcome::Kind::kRetry) << status;
  }
}

TEST_F(HttpDestinationTest, TimeoutIsRetry) {
  receiver_.EnqueueResponse({.status = 204, .delay = std::chrono::seconds(60)});
  auto d = MakeDestination(receiver_.BaseUrl(), {.timeout_ms = 300});
  Outcome o = PublishOne(*d, Row("id-1"));
  EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
  EXPECT_EQ(o.error, "Request timeout after 300ms");
}

TEST_F(HttpDestinationTest, HeadersValuesAndOverrides) {
  auto d = MakeDestination(
      receiver_.BaseUrl() + "/api/",
      {.path = "/v1//hooks", .headers = {{"X-Static", "static"}, {"X-Other", "kept"}}});
  OutboxRow row = Row("0b9a7e51-6a43-4f1e-9d0a-6d7e0c3a1f00", "customer-7",
                      R"({"x-static":"row-wins","X-Num":"5"})");
  row.attempt = 3;
  Outcome o = PublishOne(*d, row);
  ASSERT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
  ASSERT_EQ(receiver_.RequestCount(), 1u);
  ReceivedRequest r = receiver_.Requests()[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/api/v1/hooks");
  EXPECT_THAT(r.HeaderValues("Content-Type"), ElementsAre("application/json"));
  EXPECT_THAT(r.HeaderValues("X-Message-Id"), ElementsAre("0b9a7e51-6a43-4f1e-9d0a-6d7e0c3a1f00"));
  EXPECT_THAT(r.HeaderValues("X-Topic"), ElementsAre("orders.created"));
  EXPECT_THAT(r.HeaderValues("X-Attempt"), ElementsAre("3"));
  EXPECT_THAT(r.HeaderValues("X-Message-Key"), ElementsAre("customer-7"));
  EXPECT_THAT(r.HeaderValues("X-Static"), ElementsAre("row-wins"));
  EXPECT_THAT(r.HeaderValues("X-Other"), ElementsAre("kept"));
  EXPECT_THAT(r.HeaderValues("X-Num"), ElementsAre("5"));
}

TEST_F(HttpDestinationTest, RowHeaderNamedLikeAStandardHeaderAddsASecondValue) {
  auto d = MakeDestination(receiver_.BaseUrl());
  Outcome o = PublishOne(*d, Row("id-1", std::nullopt, R"({"X-Topic":"forged"})"));
  ASSERT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
  EXPECT_THAT(receiver_.Requests()[0].HeaderValues("X-Topic"),
              ElementsAre("orders.created", "forged"));
}

// A large body goes whole, without an Expect: 100-continue round trip (the contract suite sends
// the small ones).
TEST_F(HttpDestinationTest, ALargeBodyIsSentWhole) {
  auto d = MakeDestination(receiver_.BaseUrl());
  std::string big = "{\"s\":\"" + std::string(3 * 1024 * 1024, 'y') + "\"}";
  Outcome o = PublishOne(*d, Row("id-2", std::nullopt, "{}", big));
  ASSERT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
  EXPECT_EQ(receiver_.Requests()[0].body, big);
}

TEST_F(HttpDestinationTest, InvalidRowHeadersAreRejectedWithoutARequest) {
  auto d = MakeDestination(receiver_.BaseUrl());
  std::vector<OutboxRow> rows = {Row("bad-json", std::nullopt, "{not json"),
                                 Row("array", std::nullopt, "[1,2]"),
                                 Row("crlf", std::nullopt, R"({"X-A":"v\r\nX-Injected: 1"})"),
                                 Row("number", std::nullopt, R"({"X-Num":5})"), Row("good")};
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d->PublishBatch(batch, sink);
  ASSERT_EQ(sink.outcomes().size(), 5u);
  EXPECT_EQ(sink.at(0).kind, Outcome::Kind::kReject);
  EXPECT_EQ(sink.at(0).error, "invalid row headers: expected a JSON object of string values");
  EXPECT_EQ(sink.at(1).kind, Outcome::Kind::kReject);
  EXPECT_EQ(sink.at(2).kind, Outcome::Kind::kReject);
  EXPECT_EQ(sink.at(2).error, "invalid value of header \"X-A\": it contains a line break");
  EXPECT_EQ(sink.at(3).kind, Outcome::Kind::kReject);
  EXPECT_EQ(sink.at(3).error,
            "invalid row headers: the value of \"X-Num\" is not a string (expected a JSON object "
            "of string values)");
  EXPECT_EQ(sink.at(4).kind, Outcome::Kind::kDelivered);
  ASSERT_EQ(receiver_.RequestCount(), 1u);
  EXPECT_EQ(receiver_.Requests()[0].Header("X-Message-Id"), "good");
}

TEST_F(HttpDestinationTest, ManyMessagesInFlightAtOnce) {
  // Each answer takes a moment, so a client that sends one at a time is seen at 1.
  receiver_.SetDefaultResponse({.status = 202, .delay = std::chrono::milliseconds(20)});
  auto d = MakeDestination(receiver_.BaseUrl());
  std::vector<OutboxRow> rows;
  for (int i = 0; i < 200; ++i) rows.push_back(Row("m-" + std::to_string(i)));
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d->PublishBatch(batch, sink);
  ASSERT_EQ(sink.outcomes().size(), 200u);
  for (const auto& [i, o] : sink.outcomes()) {
    EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << i << ": " << o.error;
  }
  std::set<std::string> ids;
  for (const ReceivedRequest& r : receiver_.Requests()) ids.insert(r.Header("X-Message-Id"));
  EXPECT_EQ(ids.size(), 200u);
  EXPECT_GT(receiver_.MaxConcurrent(), 1);
}

// Publishes `threads` batches of `per_thread` rows at once, one per thread, and expects every row
// delivered and every request received.
void PublishFromThreadsAllDelivered(Destination& d, int threads, int per_thread,
                                    const HttpReceiver& receiver) {
  std::vector<std::vector<OutboxRow>> rows(threads);
  std::vector<CollectingSink> sinks(threads);
  for (int t = 0; t < threads; ++t) {
    for (int i = 0; i < per_thread; ++i) {
      rows[t].push_back(Row("t" + std::to_string(t) + "-" + std::to_string(i)));
    }
  }
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<OutboundMessage> batch = BatchOf(rows[t]);
      d.PublishBatch(batch, sinks[t]);
    });
  }
  for (std::thread& th : workers) th.join();
  for (int t = 0; t < threads; ++t) {
    ASSERT_EQ(sinks[t].outcomes().size(), static_cast<size_t>(per_thread));
    for (const auto& [i, o] : sinks[t].outcomes()) {
      EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
    }
  }
  EXPECT_EQ(receiver.RequestCount(), static_cast<size_t>(threads * per_thread));
}

TEST_F(HttpDestinationTest, MaxInFlightBoundsAllBatchesTogether) {
  // Four batches at once share three permits: the receiver never sees a fourth request.
  receiver_.SetDefaultResponse({.status = 204, .delay = std::chrono::milliseconds(20)});
  auto d = MakeDestination(receiver_.BaseUrl(), {.max_in_flight = 3});
  PublishFromThreadsAllDelivered(*d, 4, 15, receiver_);
  EXPECT_LE(receiver_.MaxConcurrent(), 3);
}

TEST_F(HttpDestinationTest, RejectedRowsGiveTheirPermitBack) {
  // One permit: a rejected row that kept it would leave the next rows waiting forever.
  auto d = MakeDestination(receiver_.BaseUrl(), {.max_in_flight = 1});
  std::vector<OutboxRow> rows = {Row("bad-1", std::nullopt, "[1]"), Row("good-1"),
                                 Row("bad-2", std::nullopt, "{\"X-A\":\"a\\nb\"}"), Row("good-2")};
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d->PublishBatch(batch, sink);
  ASSERT_EQ(sink.outcomes().size(), 4u);
  EXPECT_EQ(sink.at(0).kind, Outcome::Kind::kReject);
  EXPECT_EQ(sink.at(1).kind, Outcome::Kind::kDelivered) << sink.at(1).error;
  EXPECT_EQ(sink.at(2).kind, Outcome::Kind::kReject);
  EXPECT_EQ(sink.at(3).kind, Outcome::Kind::kDelivered) << sink.at(3).error;
  EXPECT_EQ(receiver_.RequestCount(), 2u);
}

TEST(HttpDestinationSettingsTest, MaxInFlightMustBePositive) {
  HttpDestinationSettings s;
  s.name = "webhook";
  s.base_url = "http://127.0.0.1:1";
  s.max_in_flight = 0;
  Result<std::unique_ptr<HttpDestination>> d = HttpDestination::Create(std::move(s));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.status().message(), "destinations.webhook.maxInFlight: must be > 0");
}

TEST_F(HttpDestinationTest, KeepsTheConnectionAliveBetweenBatches) {
  auto d = MakeDestination(receiver_.BaseUrl());
  ASSERT_EQ(PublishOne(*d, Row("one")).kind, Outcome::Kind::kDelivered);
  ASSERT_EQ(PublishOne(*d, Row("two")).kind, Outcome::Kind::kDelivered);
  std::vector<ReceivedRequest> r = receiver_.Requests();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].remote_port, r[1].remote_port);
}

TEST_F(HttpDestinationTest, StoppedReceiverIsAnOutage) {
  auto d = MakeDestination(receiver_.BaseUrl());
  ASSERT_EQ(PublishOne(*d, Row("before")).kind, Outcome::Kind::kDelivered);
  receiver_.Stop();  // the kept-alive connection dies with it
  Outcome down = PublishOne(*d, Row("during"));
  EXPECT_EQ(down.kind, Outcome::Kind::kUnavailable);
  EXPECT_THAT(down.error, StartsWith("Publish failed: "));
}

// The failures of an unreachable receiver that are outages (docs/guarantees.md §8), each produced
// for real on this machine alone. The destination carries credentials; no failure text names them.
constexpr char kOutageSecret[] = "qb-outage-s3cret";
constexpr char kOutageStaticSecret[] = "qb-static-s3cret";

DestOptions WithSecrets(DestOptions o = {}) {
  o.headers = {{"X-Api-Key", std::string(kOutageStaticSecret)}};
  o.auth = DestinationAuthConfig{
      "header",
      {{"headerName", "Authorization"}, {"headerValue", "Bearer " + std::string(kOutageSecret)}}};
  return o;
}

Outcome PublishAlone(HttpDestination& d, const OutboxRow& row) {
  std::vector<OutboxRow> rows = {row};
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d.PublishBatch(batch, sink);
  EXPECT_EQ(sink.outcomes().size(), 1u);
  return sink.at(0);
}

void ExpectNoSecret(const Outcome& o) {
  EXPECT_THAT(o.error, Not(HasSubstr(kOutageSecret)));
  EXPECT_THAT(o.error, Not(HasSubstr(kOutageStaticSecret)));
}

TEST(HttpDestinationNoServerTest, UnresolvableHostIsAnOutage) {
  // A label of 64 characters cannot be put in a DNS query, so the resolver fails without sending
  // one (glibc; nothing leaves the machine), and .invalid is reserved (RFC 6761) besides.
  const std::string host = std::string(64, 'q') + ".invalid";
  auto d = MakeDestination("http://" + host + ":8080", WithSecrets());
  ASSERT_NE(d, nullptr);
  const auto start = std::chrono::steady_clock::now();
  Outcome o = PublishAlone(*d, Row("id-1"));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable) << o.error;
  EXPECT_EQ(o.retry_after_ms, 0);
  EXPECT_EQ(o.error, "Publish failed: Could not resolve host: " + host);
  ExpectNoSecret(o);
  // The resolver answered (well within the 10 s timeout): the outcome is not a timeout.
  EXPECT_LT(took, std::chrono::seconds(5));
}

// A TCP socket listening on 127.0.0.1 at a port the kernel picks, with `backlog`: its address
// in `addr`, or -1 when a call failed.
int ListenOnLoopback(int backlog, sockaddr_in& addr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A loopback listener whose accept queue is full and never drained: the kernel drops further
// SYNs, so a connect to it neither succeeds nor is refused until the client gives up.
class FullBacklogListener {
 public:
  FullBacklogListener() {
    sockaddr_in addr{};
    fd_ = ListenOnLoopback(0, addr);
    if (fd_ < 0) return;
    // Backlog 0 queues one connection: the first connect completes and fills the queue; two
    // more (non-blocking) wait in SYN-SENT behind it.
    for (int i = 0; i < 3; ++i) {
      int c = ::socket(AF_INET, SOCK_STREAM | (i == 0 ? 0 : SOCK_NONBLOCK), 0);
      int rc = ::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      if (i == 0 && rc != 0) return;
      fillers_.push_back(c);
    }
    port_ = ntohs(addr.sin_port);
  }
  ~FullBacklogListener() {
    for (int c : fillers_) ::close(c);
    ::close(fd_);
  }
  FullBacklogListener(const FullBacklogListener&) = delete;
  FullBacklogListener& operator=(const FullBacklogListener&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::vector<int> fillers_;
};

TEST(HttpDestinationNoServerTest, ConnectTimeoutIsAnOutage) {
  FullBacklogListener listener;
  ASSERT_GT(listener.port(), 0);
  // timeoutMs 400: the connect gives up after 200 ms.
  auto d = MakeDestination("http://127.0.0.1:" + std::to_string(listener.port()),
                           WithSecrets({.timeout_ms = 400}));
  ASSERT_NE(d, nullptr);
  Outcome o = PublishAlone(*d, Row("id-1"));
  EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable) << o.error;
  EXPECT_EQ(o.retry_after_ms, 0);
  EXPECT_EQ(o.error, "Connect timeout after 200ms");
  ExpectNoSecret(o);
}

TEST_F(HttpDestinationTest, TlsFailureIsAnOutage) {
  // https:// to a plain-HTTP server: the TLS handshake fails (its answer is not a TLS record).
  std::string url = receiver_.BaseUrl();
  ASSERT_THAT(url, StartsWith("http://"));
  url.insert(4, "s");
  auto d = MakeDestination(url, WithSecrets());
  ASSERT_NE(d, nullptr);
  Outcome o = PublishOne(*d, Row("id-1"));
  EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable) << o.error;
  EXPECT_EQ(o.retry_after_ms, 0);
  EXPECT_THAT(o.error, StartsWith("Publish failed: "));
  EXPECT_THAT(o.error, HasSubstr("SSL"));
  ExpectNoSecret(o);
  EXPECT_EQ(receiver_.RequestCount(), 0u);  // no request reached it in clear text
}

// A one-shot raw TCP server: captures the request bytes exactly as sent and answers 204. Used
// where the header order on the wire matters (cpp-httplib sorts headers by name).
class RawCapture {
 public:
  RawCapture() {
    sockaddr_in addr{};
    fd_ = ListenOnLoopback(4, addr);
    if (fd_ < 0) return;
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~RawCapture() {
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  // The request head (request line and header lines), after the server answered.
  std::string Head() {
    if (thread_.joinable()) thread_.join();
    return head_;
  }

 private:
  void Serve() {
    int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    std::string data;
    char buf[4096];
    size_t head_end = std::string::npos;
    while (head_end == std::string::npos) {
      ssize_t n = ::read(c, buf, sizeof(buf));
      if (n <= 0) break;
      data.append(buf, static_cast<size_t>(n));
      head_end = data.find("\r\n\r\n");
    }
    head_ = data.substr(0, head_end);
    std::string answer = "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
    ssize_t written = ::write(c, answer.data(), answer.size());
    (void)written;
    ::close(c);
  }

  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::string head_;
};

TEST(HttpDestinationWireTest, HeaderOrderOnTheWire) {
  RawCapture capture;
  ASSERT_GT(capture.port(), 0);
  auto d = MakeDestination("http://127.0.0.1:" + std::to_string(capture.port()),
                           {.headers = {{"A-Static", "1"}, {"Z-Static", "2"}}});
  std::vector<OutboxRow> rows = {Row("id-9", "k", R"({"X-Row-2":"b","X-Row-1":"a","X-Empty":""})")};
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d->PublishBatch(batch, sink);
  ASSERT_EQ(sink.at(0).kind, Outcome::Kind::kDelivered) << sink.at(0).error;
  std::vector<std::string> names;
  std::string head = capture.Head();
  size_t pos = head.find("\r\n");  // skip the request line
  EXPECT_EQ(head.substr(0, pos), "POST /hooks HTTP/1.1");
  while (pos != std::string::npos && pos + 2 < head.size()) {
    size_t end = head.find("\r\n", pos + 2);
    std::string line = head.substr(pos + 2, end == std::string::npos ? end : end - pos - 2);
    std::string name = line.substr(0, line.find(':'));
    if (name != "Host" && name != "Accept" && name != "User-Agent" && name != "Content-Length") {
      names.push_back(line);
    }
    pos = end;
  }
  EXPECT_THAT(names,
              ElementsAre("Content-Type: application/json", "X-Message-Id: id-9",
                          "X-Topic: orders.created", "X-Attempt: 0", "X-Message-Key: k",
                          "A-Static: 1", "Z-Static: 2", "X-Row-2: b", "X-Row-1: a", "X-Empty:"));
}

// Found by fuzz/http_request_fuzz.cc: curl does not send "Name:" followed only by blanks, so a
// key or row header of blanks vanished; it is sent empty.
TEST(HttpDestinationWireTest, BlankKeyAndHeaderValuesAreSentEmpty) {
  RawCapture capture;
  ASSERT_GT(capture.port(), 0);
  auto d = MakeDestination("http://127.0.0.1:" + std::to_string(capture.port()));
  std::vector<OutboxRow> rows = {Row("id-9", " ", R"({"X-Blank":"  "})")};
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d->PublishBatch(batch, sink);
  ASSERT_EQ(sink.at(0).kind, Outcome::Kind::kDelivered) << sink.at(0).error;
  EXPECT_THAT(capture.Head(), HasSubstr("\r\nX-Message-Key:\r\n"));
  EXPECT_THAT(capture.Head(), HasSubstr("\r\nX-Blank:\r\n"));
}

}  // namespace
}  // namespace queuebox
