// http_receiver.h: a real HTTP server on loopback for tests (cpp-httplib), the receiving end of
// the http destination and of end-to-end runs.
//
// It binds 127.0.0.1 on a free port (port 0), records every request (method, target, headers,
// body) in arrival order, and answers each with a programmable response: a queue of one-shot
// responses first, then a responder function if set, else the default response (204).
// A response may be delayed; Stop() cuts every delay short.
// It measures how many requests were being handled at the same time (MaxConcurrent), which
// proves that a client keeps several requests in flight.
//
// Usage:
//   HttpReceiver receiver;
//   ASSERT_TRUE(receiver.Start().ok());
//   receiver.EnqueueResponse({.status = 500, .body = "busy"});
//   ... post to receiver.BaseUrl() + "/hooks" ...
//   ASSERT_TRUE(receiver.WaitForRequests(1, std::chrono::seconds(10)));
//   EXPECT_EQ(receiver.Requests()[0].Header("X-Topic"), "orders");
//
// Thread-safety: every method may be called from any thread while the server runs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "queuebox/status.h"

namespace httplib {
class Server;
}

namespace queuebox::testing {

struct ReceivedRequest {
  std::string method;  // "POST"
  std::string target;  // the request target as sent: path and query ("/hooks?a=1")
  // Headers grouped by name in case-insensitive name order (cpp-httplib does not keep the wire
  // order across names); the values of one name keep their wire order.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;     // exact bytes
  int remote_port = 0;  // the client's port: equal ports = one reused (keep-alive) connection

  // The first value of header `name` (case-insensitive); "" when absent.
  std::string Header(std::string_view name) const;
  // Every value of header `name` in wire order.
  std::vector<std::string> HeaderValues(std::string_view name) const;
  bool HasHeader(std::string_view name) const { return !HeaderValues(name).empty(); }
};

struct ReceiverResponse {
  int status = 204;
  std::string body = {};
  std::string content_type = "text/plain";
  std::vector<std::pair<std::string, std::string>> headers = {};  // extra response headers
  std::chrono::milliseconds delay{0};  // wait before answering (cut short by Stop)
};

class HttpReceiver {
 public:
  // threads: requests handled at the same time (each keep-alive connection holds one thread
  // while it is open, so give at least as many as the client opens connections).
  explicit HttpReceiver(int threads = 64);
  ~HttpReceiver();  // Stop()
  HttpReceiver(const HttpReceiver&) = delete;
  HttpReceiver& operator=(const HttpReceiver&) = delete;

  // Binds 127.0.0.1:<port> (0: a free port) and serves on a background thread. kUnavailable
  // when it cannot bind. After Stop(), Start(port()) serves again on the same port (a receiver
  // restart); the requests recorded before stay.
  Status Start(int port = 0);
  // Stops serving (idempotent); pending delays end at once. Afterwards connections are refused.
  void Stop();

  int port() const { return port_; }
  // "http://127.0.0.1:<port>"
  std::string BaseUrl() const;

  // The answer when no queued response and no responder applies. Default: 204, empty body.
  void SetDefaultResponse(ReceiverResponse response);
  // One-shot responses, used in order by the next requests before anything else.
  void EnqueueResponse(ReceiverResponse response);
  // Decides the response from the request (after the queue is empty). Called on server threads.
  void SetResponder(std::function<ReceiverResponse(const ReceivedRequest&)> responder);

  // Every request received so far, in arrival order (a copy).
  std::vector<ReceivedRequest> Requests() const;
  std::size_t RequestCount() const;
  // Waits until at least n requests arrived. False when `timeout` passed first.
  bool WaitForRequests(std::size_t n, std::chrono::milliseconds timeout) const;
  // The most requests that were inside the handler at the same time since start (or Clear).
  int MaxConcurrent() const;
  // Forgets recorded requests and the concurrency peak (queued responses stay).
  void Clear();

 private:
  ReceiverResponse Handle(ReceivedRequest request);

  const int threads_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::vector<ReceivedRequest> requests_;
  std::deque<ReceiverResponse> queued_;
  std::function<ReceiverResponse(const ReceivedRequest&)> responder_;
  ReceiverResponse default_response_;
  int active_ = 0;
  int max_active_ = 0;
  bool stopping_ = false;
};

// A loopback TCP port on which nothing listens (bound, then closed), for "connection refused"
// or a server a test starts on it (and may restart): below the kernel's ephemeral range.
int UnusedLoopbackPort();

}  // namespace queuebox::testing
