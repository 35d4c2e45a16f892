// http1_client.cc: HTTP/1.1 exchanges over kept-alive non-blocking sockets (http1_client.h).
#include "destinations/http/http1_client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>

#include "destinations/http/http1_response.h"

namespace queuebox {

// ---- Endpoint -------------------------------------------------------------------------------

namespace {

struct Http1UrlDeleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};

std::string Http1UrlPart(CURLU* u, CURLUPart part) {
  char* value = nullptr;
  if (curl_url_get(u, part, &value, 0) != CURLUE_OK || value == nullptr) return {};
  std::string out(value);
  curl_free(value);
  return out;
}

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string SocketErrorText(int err) {
  char buf[128];
  // The GNU strerror_r returns the text (maybe not in buf).
  return std::string(strerror_r(err, buf, sizeof buf));
}

void CloseSocket(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Result<Http1Endpoint> ParseHttp1Endpoint(std::string_view url) {
  std::unique_ptr<CURLU, Http1UrlDeleter> u(curl_url());
  if (!u) return Internal("out of memory parsing the URL");
  std::string text(url);
  if (curl_url_set(u.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK ||
      Http1UrlPart(u.get(), CURLUPART_SCHEME) != "http") {
    return InvalidArgument("not an absolute http:// URL");
  }
  Http1Endpoint e;
  e.host = Http1UrlPart(u.get(), CURLUPART_HOST);
  if (e.host.empty()) return InvalidArgument("not an absolute http:// URL");
  e.host_header = e.host;
  if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']') {
    e.host = e.host.substr(1, e.host.size() - 2);  // an IPv6 literal
  }
  std::string port = Http1UrlPart(u.get(), CURLUPART_PORT);
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgument("not a valid port");
    }
    e.port = static_cast<uint16_t>(value);
    e.host_header += ":" + port;
  }
  e.target = Http1UrlPart(u.get(), CURLUPART_PATH);
  if (e.target.empty()) e.target = "/";
  std::string query = Http1UrlPart(u.get(), CURLUPART_QUERY);
  if (!query.empty()) e.target += "?" + query;
  return e;
}

// ---- Client: addresses and idle connections -------------------------------------------------

struct Http1Client::Addresses {
  struct One {
    sockaddr_storage addr{};
    socklen_t len = 0;
    int family = AF_INET;
  };
  std::vector<One> all;
};

Http1Client::Http1Client(Options options) : options_(std::move(options)) {
  head_prefix_ = "POST " + options_.endpoint.target +
                 " HTTP/1.1\r\nHost: " + options_.endpoint.host_header +
                 "\r\nUser-Agent: " + options_.user_agent + "\r\nAccept: */*\r\n";
}

Http1Client::~Http1Client() { CloseIdle(); }

int Http1Client::TakeIdle() {
  for (;;) {
    int fd = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (idle_.empty()) return -1;
      fd = idle_.back();
      idle_.pop_back();
    }
    // An idle connection has nothing to read. Bytes there belong to no request (a receiver that
    // answered twice, a stray line end): the next request would take them for its answer. An
    // end of stream is a receiver that closed it (keep-alive timeout). Either way it is dropped,
    // as curl does with a kept connection that turned readable.
    char byte;
    ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return fd;
    ::close(fd);
  }
}

void Http1Client::GiveBack(int fd) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < options_.max_idle) {
      idle_.push_back(fd);
      return;
    }
  }
  ::close(fd);
}

void Http1Client::CloseIdle() {
  std::vector<int> idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle.swap(idle_);
  }
  for (int fd : idle) ::close(fd);
}

void Http1Client::ForgetAddresses() {
  std::lock_guard<std::mutex> lock(mu_);
  // At most once a second: a receiver that is down would otherwise cost a lookup per message.
  if (addrs_ && SteadyNowMs() - resolved_ms_ >= 1000) addrs_.reset();
}

std::shared_ptr<const Http1Client::Addresses> Http1Client::Resolve(std::string& error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (addrs_ && SteadyNowMs() - resolved_ms_ < kAddressTtlMs) return addrs_;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options_.endpoint.port);
  if (getaddrinfo(options_.endpoint.host.c_str(), port.c_str(), &hints, &found) != 0) {
    error = "Could not resolve host: " + options_.endpoint.host;
    return nullptr;
  }
  auto addrs = std::make_shared<Addresses>();
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    Addresses::One one;
    std::memcpy(&one.addr, ai->ai_addr, ai->ai_addrlen);
    one.len = ai->ai_addrlen;
    one.family = ai->ai_family;
    addrs->all.push_back(one);
  }
  freeaddrinfo(found);
  if (addrs->all.empty()) {
    error = "Could not resolve host: " + options_.endpoint.host;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  addrs_ = addrs;
  resolved_ms_ = SteadyNowMs();
  return addrs;
}

// ---- Exchanges ------------------------------------------------------------------------------

struct Http1Exchanges::Exchange {
  enum class Phase { kConnect, kWrite, kRead };
  size_t tag = 0;
  bool live = false;
  int fd = -1;
  bool reused = false;     // fd came from the pool
  bool retried = false;    // already replaced a kept connection that had died
  bool connected = false;  // fd is connected (for the timeout kinds)
  Phase phase = Phase::kConnect;
  int64_t connect_deadline_ms = 0;
  int64_t deadline_ms = 0;
  std::string head;  // request line, headers, blank line
  std::string_view body;
  size_t written = 0;  // of head then body
  CancelCheck cancel = nullptr;
  const void* cancel_context = nullptr;
  bool cancel_checked = false;
  std::shared_ptr<const Http1Client::Addresses> addrs;
  size_t next_addr = 0;
  std::string connect_error;
  Http1ResponseParser parser;
  bool got_any = false;  // a byte of the answer arrived
};

Http1Exchanges::Http1Exchanges(Http1Client& client) : client_(client) {}

Http1Exchanges::~Http1Exchanges() {
  for (auto& x : exchanges_) CloseSocket(x->fd);
}

namespace {

// Opens a non-blocking socket to the next address of x and starts connecting. False when no
// address is left (x.connect_error says why the last one failed).
template <typename X>
bool ConnectNext(X& x) {
  while (x.addrs && x.next_addr < x.addrs->all.size()) {
    const auto& a = x.addrs->all[x.next_addr++];
    x.fd = ::socket(a.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (x.fd < 0) {
      x.connect_error = SocketErrorText(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(x.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(x.fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    if (::connect(x.fd, reinterpret_cast<const sockaddr*>(&a.addr), a.len) == 0) {
      x.connected = true;
      x.phase = X::Phase::kWrite;
      return true;
    }
    if (errno == EINPROGRESS) {
      x.phase = X::Phase::kConnect;
      return true;
    }
    x.connect_error = SocketErrorText(errno);
    CloseSocket(x.fd);
  }
  return false;
}

}  // namespace

namespace {

// Whether a header line ("Name: value") names `name` (any letter case).
bool NamesField(std::string_view line, std::string_view name) {
  return line.size() > name.size() && line[name.size()] == ':' &&
         std::equal(name.begin(), name.end(), line.begin(),
                    [](char a, char b) { return (a | 0x20) == (b | 0x20); });
}

// The request line and the transport's Host, User-Agent and Accept, but not those the caller's
// `headers` set themselves (a row's virtual Host, a destination's own User-Agent): curl sent
// those instead of its own, and two Host fields make a receiver answer 400 (RFC 9112 3.2).
void AppendHeadPrefix(const Http1Client& client, std::string_view headers, std::string& head) {
  bool host = false, agent = false, accept = false;
  for (size_t at = 0; at < headers.size();) {  // one pass over the lines
    const size_t end = std::min(headers.find('\n', at), headers.size());
    const std::string_view line = headers.substr(at, end - at);
    host = host || NamesField(line, "host");
    agent = agent || NamesField(line, "user-agent");
    accept = accept || NamesField(line, "accept");
    at = end + 1;
  }
  if (!host && !agent && !accept) {
    head.assign(client.head_prefix());
    return;
  }
  const Http1Client::Options& o = client.options();
  head.assign("POST ").append(o.endpoint.target).append(" HTTP/1.1\r\n");
  if (!host) head.append("Host: ").append(o.endpoint.host_header).append("\r\n");
  if (!agent) head.append("User-Agent: ").append(o.user_agent).append("\r\n");
  if (!accept) head.append("Accept: */*\r\n");
}

}  // namespace

void Http1Exchanges::Start(size_t tag, std::string_view headers, std::string_view body,
                           size_t body_cap, CancelCheck cancel, const void* cancel_context) {
  Exchange* x = nullptr;
  if (!spare_.empty()) {
    x = spare_.back();
    spare_.pop_back();
  } else {
    exchanges_.push_back(std::make_unique<Exchange>());
    x = exchanges_.back().get();
  }
  const Http1Client::Options& o = client_.options();
  const int64_t now = SteadyNowMs();
  x->tag = tag;
  x->live = true;
  ++live_;
  x->fd = -1;
  x->reused = x->retried = x->connected = x->cancel_checked = x->got_any = false;
  x->connect_deadline_ms = now + std::min(o.connect_timeout_ms, o.timeout_ms);
  x->deadline_ms = now + o.timeout_ms;
  AppendHeadPrefix(client_, headers, x->head);
  x->head.append(headers);
  x->head.append("Content-Length: ");
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, body.size());
  (void)ec;
  x->head.append(digits, end);
  x->head.append("\r\n\r\n");
  x->body = body;
  x->written = 0;
  x->cancel = cancel;
  x->cancel_context = cancel_context;
  x->addrs.reset();
  x->next_addr = 0;
  x->connect_error.clear();
  x->parser.Reset(body_cap);

  x->fd = client_.TakeIdle();
  if (x->fd >= 0) {
    x->reused = x->connected = true;
    x->phase = Exchange::Phase::kWrite;
  }
  // Done here: the first write goes out now, without a round of poll.
  Step(*x, 0);
}

void Http1Exchanges::Finish(Exchange& x, Http1Answer answer) {
  CloseSocket(x.fd);
  x.live = false;
  --live_;
  x.addrs.reset();
  spare_.push_back(&x);
  finished_.emplace_back(x.tag, std::move(answer));
}

namespace {

Http1Answer FailedAnswer(std::string error, bool outage) {
  Http1Answer a;
  a.kind = Http1Answer::Kind::kFailed;
  a.error = std::move(error);
  a.outage = outage;
  return a;
}

}  // namespace

// A kept connection the receiver closed before answering is replaced by a new one, once. True
// when x was reset for a new connection (its socket closed: the caller connects again).
bool Http1Exchanges::ReplaceDeadConnection(Exchange& x) {
  if (!x.reused || x.retried || x.got_any) return false;
  CloseSocket(x.fd);
  x.reused = false;
  x.retried = true;
  x.connected = false;
  // The new connection gets its own connect time (within the exchange's deadline): the kept
  // one may have died after longer than connect_timeout_ms, which says nothing of this one.
  const Http1Client::Options& o = client_.options();
  x.connect_deadline_ms =
      std::min(SteadyNowMs() + std::min(o.connect_timeout_ms, o.timeout_ms), x.deadline_ms);
  x.written = 0;
  x.cancel_checked = false;  // a new send: the claim is checked again
  x.parser.Reset(x.parser.body_cap());
  return true;
}

// x has no socket: resolves the name (once) and connects to its next address.
Http1Exchanges::Next Http1Exchanges::OpenConnection(Exchange& x) {
  if (!x.addrs) {
    std::string error;
    x.addrs = client_.Resolve(error);
    if (!x.addrs) {
      Finish(x, FailedAnswer(std::move(error), /*outage=*/true));
      return Next::kDone;
    }
  }
  if (!ConnectNext(x)) {
    const Http1Endpoint& e = client_.options().endpoint;
    client_.ForgetAddresses();  // the next connection resolves afresh
    Finish(x, FailedAnswer("Failed to connect to " + e.host + " port " + std::to_string(e.port) +
                               ": " + x.connect_error,
                           /*outage=*/true));
    return Next::kDone;
  }
  // Connected at once, or poll says when it is.
  return x.phase == Exchange::Phase::kConnect ? Next::kWait : Next::kAgain;
}

// A connect in progress: done, failed (the next address), or not yet.
Http1Exchanges::Next Http1Exchanges::FinishConnect(Exchange& x, short revents) {
  if (revents == 0) return Next::kWait;
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(x.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == EINPROGRESS || err == EALREADY) return Next::kWait;
  if (err != 0) {
    x.connect_error = SocketErrorText(err);
    CloseSocket(x.fd);  // OpenConnection tries the next address, or fails
    return Next::kAgain;
  }
  x.connected = true;
  x.phase = Exchange::Phase::kWrite;
  return Next::kAgain;
}

// Writes what the socket takes of the request; checks the claim before its first byte.
Http1Exchanges::Next Http1Exchanges::Write(Exchange& x, short revents) {
  if (!x.cancel_checked) {
    x.cancel_checked = true;
    if (x.cancel != nullptr && x.cancel(x.cancel_context)) {
      Http1Answer a;
      a.kind = Http1Answer::Kind::kCancelled;
      client_.GiveBack(x.fd);  // connected and unused: good for the next request
      x.fd = -1;
      Finish(x, std::move(a));
      return Next::kDone;
    }
  }
  if ((revents & POLLIN) != 0 && x.written > 0) {
    // The receiver speaks before taking the whole request: read what it says (an interim
    // answer sends the reader back here, a final one ends the writing).
    x.phase = Exchange::Phase::kRead;
    return Next::kAgain;
  }
  const size_t total = x.head.size() + x.body.size();
  while (x.written < total) {
    iovec iov[2];
    int n = 0;
    if (x.written < x.head.size()) {
      iov[n++] = {x.head.data() + x.written, x.head.size() - x.written};
      if (!x.body.empty()) iov[n++] = {const_cast<char*>(x.body.data()), x.body.size()};
    } else {
      const size_t off = x.written - x.head.size();
      iov[n++] = {const_cast<char*>(x.body.data()) + off, x.body.size() - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t sent = ::sendmsg(x.fd, &msg, MSG_NOSIGNAL);
    if (sent > 0) {
      x.written += static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Next::kWait;
    if (sent < 0 && errno == EINTR) continue;
    const int err = sent < 0 ? errno : EPIPE;
    if (ReplaceDeadConnection(x)) return Next::kAgain;
    Finish(x, FailedAnswer("Send failure: " + SocketErrorText(err), /*outage=*/true));
    return Next::kDone;
  }
  // The answer is read when poll says it is there: a receiver seldom answers within the send,
  // and a read tried right away came back empty (EAGAIN) for most requests, a system call a
  // message for nothing.
  x.phase = Exchange::Phase::kRead;
  return Next::kWait;
}

// Reads what the socket holds of the answer; finishes x when it is whole or cannot be.
Http1Exchanges::Next Http1Exchanges::Read(Exchange& x) {
  const size_t total = x.head.size() + x.body.size();
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(x.fd, buf, sizeof buf, 0);
    if (n > 0) {
      x.got_any = true;
      std::string problem;
      size_t used = x.parser.Feed(std::string_view(buf, static_cast<size_t>(n)), problem);
      if (!problem.empty()) {
        Finish(x, FailedAnswer("Invalid response: " + problem, /*outage=*/false));
        return Next::kDone;
      }
      if (!x.parser.done()) continue;
      // A connection whose request was not written whole cannot carry the next one.
      const bool keep =
          x.written == total && x.parser.keep_alive() && used == static_cast<size_t>(n);
      Http1Answer a = x.parser.TakeAnswer();
      if (keep) {
        client_.GiveBack(x.fd);
        x.fd = -1;
      }
      Finish(x, std::move(a));
      return Next::kDone;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Still writing, and no final answer has begun (only an interim one, 100 Continue sent
      // unasked, RFC 9110 15.2): the body is written on, poll watches both ways again.
      if (x.written < total && !x.parser.has_status()) x.phase = Exchange::Phase::kWrite;
      return Next::kWait;
    }
    if (n < 0 && errno == EINTR) continue;
    const int err = n < 0 ? errno : 0;
    if (n == 0 && x.parser.EndOfStream()) {
      Finish(x, x.parser.TakeAnswer());
      return Next::kDone;
    }
    if (ReplaceDeadConnection(x)) return Next::kAgain;
    if (!x.got_any) {
      Finish(x, err == 0 ? FailedAnswer("Empty reply from server", /*outage=*/true)
                         : FailedAnswer("Recv failure: " + SocketErrorText(err), true));
    } else {
      // Part of an answer, then the end: curl's "transfer closed" (spends an attempt).
      Finish(x, FailedAnswer(err == 0 ? "Connection closed before the whole answer"
                                      : "Recv failure: " + SocketErrorText(err),
                             /*outage=*/!x.parser.has_status()));
    }
    return Next::kDone;
  }
}

// Advances one exchange as far as its socket allows. revents: poll's events for its socket (0
// when called without a poll, e.g. right after Start, or after a phase moved on). Each pass
// moves one phase on; a kept connection is replaced at most once and each address tried once,
// so this ends.
void Http1Exchanges::Step(Exchange& x, short revents) {
  for (;;) {
    Next next = Next::kAgain;
    if (x.fd < 0) {
      next = OpenConnection(x);
      revents = 0;
      if (next != Next::kAgain) return;
    }
    switch (x.phase) {
      case Exchange::Phase::kConnect:
        next = FinishConnect(x, revents);
        break;
      case Exchange::Phase::kWrite:
        next = Write(x, revents);
        break;
      case Exchange::Phase::kRead:
        next = Read(x);
        break;
    }
    if (next != Next::kAgain) return;
    revents = 0;
  }
}

void Http1Exchanges::Poll(int wait_ms, std::vector<std::pair<size_t, Http1Answer>>& done) {
  if (!finished_.empty()) wait_ms = 0;  // finished in Start: report them without waiting
  std::vector<pollfd>& fds = fds_;      // kept: no allocation a round
  std::vector<Exchange*>& owners = owners_;
  fds.clear();
  owners.clear();
  int64_t now = SteadyNowMs();
  int64_t wake = now + wait_ms;
  for (auto& x : exchanges_) {
    if (!x->live) continue;
    wake = std::min(
        wake, x->connected ? x->deadline_ms : std::min(x->connect_deadline_ms, x->deadline_ms));
    if (x->fd < 0) continue;
    short events = x->phase == Exchange::Phase::kConnect ? POLLOUT
                   : x->phase == Exchange::Phase::kWrite ? (POLLOUT | POLLIN)
                                                         : POLLIN;
    fds.push_back({x->fd, events, 0});
    owners.push_back(x.get());
  }
  int timeout = static_cast<int>(std::clamp<int64_t>(wake - now, 0, wait_ms));
  int ready = ::poll(fds.data(), fds.size(), timeout);
  now = SteadyNowMs();
  if (ready > 0) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents != 0 && owners[i]->live) Step(*owners[i], fds[i].revents);
    }
  }
  for (auto& x : exchanges_) {
    if (!x->live) continue;
    if (!x->connected && now >= std::min(x->connect_deadline_ms, x->deadline_ms)) {
      Http1Answer a;
      a.kind = Http1Answer::Kind::kConnectTimeout;
      Finish(*x, std::move(a));
    } else if (x->connected && now >= x->deadline_ms) {
      Http1Answer a;
      a.kind = Http1Answer::Kind::kTimeout;
      Finish(*x, std::move(a));
    }
  }
  for (auto& f : finished_) done.push_back(std::move(f));
  finished_.clear();
}

}  // namespace queuebox
