// http1_client.h: the `http` destination's transport for plain http:// receivers: HTTP/1.1 over
// kept-alive TCP connections, many requests in flight from one thread (non-blocking sockets and
// poll). https:// stays on libcurl (http_destination.cc). Why not curl for plain HTTP too: curl
// spent 62 % of the relay's instructions a message, most of it on generic header handling
// (bench/README.md, "Relay CPU a message"); here a request is one buffer written with the body.
//
// What a request is: "POST <target> HTTP/1.1", Host, User-Agent, Accept, the caller's header
// lines, Content-Length, then the body, written with one sendmsg when the socket takes it. A
// caller's Host, User-Agent or Accept line replaces the transport's own (as curl does).
// What is read: the status line and headers of the answer (1xx answers skipped), the body by
// Content-Length, chunked, or to the end of the connection, keeping its first body_cap bytes.
// Connections: an answer that leaves the connection usable (HTTP/1.1 without "Connection: close",
// HTTP/1.0 with keep-alive, the whole body read, nothing extra) gives it back to the pool; a
// kept connection the receiver closed before answering (idle timeout, restart) is replaced once
// by a new one, with the request sent again (as curl does; the message is at least once).
// Timeouts (ms, from the moment the request starts): connect_timeout_ms to have a connection,
// timeout_ms for the whole exchange, connect included. A replacement for a dead kept connection
// has connect_timeout_ms from when it is opened (still within timeout_ms).
// An interim answer (1xx) while the body is being written does not stop the writing; a final
// answer does (the connection is then not kept).
#pragma once

#include <poll.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/status.h"

namespace queuebox {

// Where the requests go, from an http:// URL.
struct Http1Endpoint {
  std::string host;         // for the resolver: a name or an address (IPv6 without brackets)
  uint16_t port = 80;       //
  std::string host_header;  // the Host header: the URL's host (IPv6 in brackets) and its port
  std::string target;       // the request target: path and query ("/hooks?a=1")
};

// Parses an absolute http:// URL (as JoinHttpUrl makes it). kInvalidArgument for any other
// scheme or a URL without a host.
Result<Http1Endpoint> ParseHttp1Endpoint(std::string_view url);

// What one exchange came to.
struct Http1Answer {
  enum class Kind {
    kAnswered,        // a whole answer was read: status, reason, body, retry_after_s
    kCancelled,       // the cancel check said so before a byte of the request was written
    kConnectTimeout,  // no connection within connect_timeout_ms (or timeout_ms)
    kTimeout,         // connected, but the exchange did not end within timeout_ms
    kFailed,          // error (and outage) say what failed
  };
  Kind kind = Kind::kFailed;
  int status = 0;
  std::string reason;         // the status line's reason phrase, first 200 bytes; may be empty
  std::string body;           // the first body_cap bytes of the body
  int64_t retry_after_s = 0;  // Retry-After (seconds, or an HTTP date from now); 0 when absent
  // kFailed: "Could not resolve host: <host>", "Failed to connect to <host> port <port>:
  // <errno text>", "Empty reply from server", "Send failure: ...", "Recv failure: ...",
  // "Invalid response: ...".
  std::string error;
  bool outage = false;  // kFailed: the receiver is out (no connection, or it broke unanswered)
};

// The endpoint, the timeouts and the pool of idle kept-alive connections. Thread-safe: several
// Http1Exchanges (one per PublishBatch call) share one client. Owns the idle sockets.
class Http1Client {
 public:
  struct Options {
    Http1Endpoint endpoint;
    std::string user_agent;          // the User-Agent header
    int64_t timeout_ms = 30000;      // whole exchange (ms, > 0)
    int64_t connect_timeout_ms = 0;  // connection set-up (ms, > 0)
    size_t max_idle = 256;           // idle connections kept at most
  };
  explicit Http1Client(Options options);
  ~Http1Client();
  Http1Client(const Http1Client&) = delete;
  Http1Client& operator=(const Http1Client&) = delete;

  const Options& options() const { return options_; }
  // The head of a request up to its caller's header lines: request line, Host, User-Agent,
  // Accept, each line ending in CRLF.
  const std::string& head_prefix() const { return head_prefix_; }

  // An idle connection (a socket), or -1. Idle connections with bytes to read (stray bytes that
  // belong to no request, or the receiver's close) are closed, not handed out.
  int TakeIdle();
  // Keeps `fd` for the next request, or closes it when max_idle are kept.
  void GiveBack(int fd);
  // The resolved addresses of the endpoint: kept for kAddressTtlMs, and resolved again on the
  // next use after ForgetAddresses (a failed connect). So a receiver that moved is found, and a
  // batch to a receiver that is down looks its name up at most once a second, not per message.
  // nullptr with `error` set when the host does not resolve (nothing is kept). Blocking (DNS):
  // it runs on the publishing thread, once per TTL while the receiver answers.
  static constexpr int64_t kAddressTtlMs = 30000;
  struct Addresses;
  std::shared_ptr<const Addresses> Resolve(std::string& error);
  void ForgetAddresses();
  // Closes every idle connection.
  void CloseIdle();

 private:
  Options options_;
  std::string head_prefix_;
  std::mutex mu_;
  std::vector<int> idle_;                   // guarded by mu_
  std::shared_ptr<const Addresses> addrs_;  // guarded by mu_
  int64_t resolved_ms_ = 0;                 // when addrs_ was resolved; guarded by mu_
};

// Many requests at once over one client, driven by one thread (not thread-safe; one per
// PublishBatch call). Each request is identified by the tag given to Start.
class Http1Exchanges {
 public:
  // True when the request must not be sent: checked right before its first byte is written.
  using CancelCheck = bool (*)(const void* context);

  explicit Http1Exchanges(Http1Client& client);
  ~Http1Exchanges();  // closes the connections of unfinished exchanges
  Http1Exchanges(const Http1Exchanges&) = delete;
  Http1Exchanges& operator=(const Http1Exchanges&) = delete;

  // Starts a request. `headers`: the caller's header lines, each ending in CRLF (no framing
  // headers: Content-Length is added here). `body` is not copied: it must outlive the exchange.
  void Start(size_t tag, std::string_view headers, std::string_view body, size_t body_cap,
             CancelCheck cancel, const void* cancel_context);
  // Advances every exchange, waiting up to wait_ms (ms) for a socket or a deadline; appends the
  // finished ones as (tag, answer) to `done`.
  void Poll(int wait_ms, std::vector<std::pair<size_t, Http1Answer>>& done);
  size_t in_flight() const { return live_; }

 private:
  struct Exchange;
  // What a phase of Step left: wait for the socket, go on at once, or the exchange finished.
  enum class Next { kWait, kAgain, kDone };
  void Step(Exchange& x, short revents);
  Next OpenConnection(Exchange& x);
  Next FinishConnect(Exchange& x, short revents);
  Next Write(Exchange& x, short revents);
  Next Read(Exchange& x);
  bool ReplaceDeadConnection(Exchange& x);
  void Finish(Exchange& x, Http1Answer answer);

  Http1Client& client_;
  std::vector<std::unique_ptr<Exchange>> exchanges_;  // every exchange made, live or spare
  std::vector<Exchange*> spare_;                      // finished ones, reused by Start
  size_t live_ = 0;
  std::vector<std::pair<size_t, Http1Answer>> finished_;  // not yet handed to Poll's caller
  std::vector<pollfd> fds_;                               // Poll's, kept between rounds
  std::vector<Exchange*> owners_;                         // the exchange of each of fds_
};

}  // namespace queuebox
