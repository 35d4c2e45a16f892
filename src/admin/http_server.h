// http_server.h: the one HTTP/1.1 server of QueueBox C++ (data port and management port), on
// libmicrohttpd 0.9.75 (issue 14; the measurements behind the choice are in bench/README.md).
//
// Connections are multiplexed with epoll over a few threads (no thread per connection), idle
// keep-alive connections are closed after `idle_timeout_s`, and request bodies arrive
// incrementally, so the body cap holds before and while reading:
//   - a declared Content-Length over the route's cap is answered 413 before one byte is read
//     (the connection is closed after the answer);
//   - a chunked body is counted as it arrives; past the cap its bytes are dropped, and the
//     request is answered 413 when the body ends. The server never holds more than the cap.
//
// Handlers are asynchronous: a handler receives the request and a Responder, and may answer
// inline or later from any thread (the connection is parked meanwhile and serves nothing else;
// other connections are unaffected). A Responder must be called exactly once.
//
// Ownership: the server owns its sockets and threads. Thread-safety: Route/SetGate before Start;
// Start and Stop from one controlling thread; Responders from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "queuebox/status.h"

namespace queuebox {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query
  // As received, in order; names keep their letter case.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The last value of header `name` (any letter case); "" when absent.
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";  // "" sends none
  std::vector<std::pair<std::string, std::string>> headers;
  bool close = false;  // Connection: close after this response

  static HttpResponse Json(int status, std::string body);
  // {"error": message}
  static HttpResponse Error(int status, std::string_view message);
};

using Responder = std::function<void(HttpResponse)>;
using HttpHandler = std::function<void(HttpRequest, Responder)>;

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  int port = 0;                          // 0: an ephemeral port (read it with port())
  std::string port_key = "server.httpPort";  // the setting the port comes from, for messages
  int threads = 2;                       // epoll threads
  int64_t max_body_bytes = 1048576;      // cap of every route without its own
  unsigned idle_timeout_s = 30;          // an idle connection is closed after this
  unsigned connection_limit = 16000;     // more are refused at accept
  int listen_backlog = 1024;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Serves `method` on `path` (exact match). `max_body_bytes` > 0 narrows the cap for this
  // route; `too_large` builds its 413 (default: 413 {"error":"Request body exceeds <n> bytes"}).
  void Route(std::string method, std::string path, HttpHandler handler,
             int64_t max_body_bytes = 0,
             std::function<HttpResponse(int64_t cap)> too_large = nullptr);

  // Runs before routing, on the headers alone; a response answers the request (e.g. 503 while
  // draining). Optional.
  void SetGate(std::function<std::optional<HttpResponse>(const HttpRequest&)> gate);

  // Binds (exclusive: SO_REUSEADDR, never SO_REUSEPORT) and serves. kUnavailable "Cannot listen
  // on <address>:<port> (<port_key>): <reason>. Set '<port_key>' to a free port, or stop the
  // process that holds it." on any bind failure.
  Status Start();
  int port() const;

  // Requests whose handler has not answered yet (parked connections).
  int InFlight() const;

  // Answers every request still parked with 503 {"error":"QueueBox is shutting down"}, closes
  // every connection and joins the threads. A Responder called later does nothing. Idempotent.
  void Stop();

  // The default 413 of QueueBox: {"error":"Request body exceeds <cap> bytes"}.
  static HttpResponse TooLarge(int64_t cap);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Why `address`:`port` cannot be bound, for the messages above.
std::string ListenFailureReason(int err);

}  // namespace queuebox
