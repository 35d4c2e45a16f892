#include "admin/http_server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/log.h"

namespace queuebox {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// A request whose handler has not answered yet. The Responder and the server share it; `mu`
// orders the answer, the parking of the connection and the shutdown.
struct Pending {
  std::mutex mu;
  MHD_Connection* connection = nullptr;
  std::optional<HttpResponse> response;
  bool parked = false;     // the connection is suspended until the answer
  bool abandoned = false;  // the server stopped: the connection is gone
};

struct RouteEntry {
  std::string method, path;
  HttpHandler handler;
  int64_t max_body_bytes = 0;
  std::function<HttpResponse(int64_t)> too_large;
};

// One request on a connection (MHD's con_cls).
struct RequestState {
  HttpRequest request;
  const RouteEntry* route = nullptr;
  int64_t cap = 0;
  uint64_t received = 0;
  bool too_large = false;
  std::shared_ptr<Pending> pending;
};

MHD_Result Queue(MHD_Connection* connection, const HttpResponse& r) {
  MHD_Response* m = MHD_create_response_from_buffer(
      r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
  if (m == nullptr) return MHD_NO;
  if (!r.content_type.empty()) MHD_add_response_header(m, "Content-Type", r.content_type.c_str());
  for (const auto& [name, value] : r.headers) {
    MHD_add_response_header(m, name.c_str(), value.c_str());
  }
  if (r.close) MHD_add_response_header(m, "Connection", "close");
  MHD_Result q = MHD_queue_response(connection, static_cast<unsigned>(r.status), m);
  MHD_destroy_response(m);
  return q;
}

MHD_Result CollectHeader(void* cls, MHD_ValueKind, const char* key, const char* value) {
  auto* headers = static_cast<std::vector<std::pair<std::string, std::string>>*>(cls);
  headers->emplace_back(key != nullptr ? key : "", value != nullptr ? value : "");
  return MHD_YES;
}

void MhdLog(void*, const char* fmt, va_list ap) {
  char line[512];
  std::vsnprintf(line, sizeof(line), fmt, ap);
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  log::Debug("HTTP server", {{"detail", text}});
}

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  for (auto it = headers.rbegin(); it != headers.rend(); ++it) {
    if (EqualsIgnoreCase(it->first, name)) return it->second;
  }
  return std::string();
}

bool HttpRequest::HasHeader(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return EqualsIgnoreCase(h.first, name); });
}

HttpResponse HttpResponse::Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::Error(int status, std::string_view message) {
  return Json(status, nlohmann::json{{"error", message}}.dump(
                          -1, ' ', false, nlohmann::json::error_handler_t::replace));
}

HttpResponse HttpServer::TooLarge(int64_t cap) {
  return HttpResponse::Error(413, "Request body exceeds " + std::to_string(cap) + " bytes");
}

std::string ListenFailureReason(int err) {
  switch (err) {
    case EADDRINUSE:
      return "the port is already in use (another process, perhaps another QueueBox relay, "
             "listens on it)";
    case EACCES:
      return "permission denied (ports below 1024 need privileges)";
    case EADDRNOTAVAIL:
      return "the address is not one of this host's";
    default:
      return std::string("the bind failed (errno ") + std::to_string(err) + ")";
  }
}

struct HttpServer::Impl {
  HttpServerOptions options;
  std::vector<std::unique_ptr<RouteEntry>> routes;
  std::function<std::optional<HttpResponse>(const HttpRequest&)> gate;
  MHD_Daemon* daemon = nullptr;
  int listen_fd = -1;
  int port = -1;

  mutable std::mutex mu;  // guards `pending` and `stopped`
  std::set<std::shared_ptr<Pending>> pending;
  bool stopped = false;

  const RouteEntry* Find(const std::string& method, const std::string& path) const {
    for (const auto& r : routes) {
      if (r->method == method && r->path == path) return r.get();
    }
    return nullptr;
  }

  void Forget(const std::shared_ptr<Pending>& p) {
    std::lock_guard<std::mutex> lock(mu);
    pending.erase(p);
  }

  // The last call for a request: answer it, or run its handler and park the connection.
  MHD_Result Finish(MHD_Connection* connection, RequestState& state) {
    if (state.pending) {  // resumed: the answer is there
      std::shared_ptr<Pending> p = state.pending;
      std::unique_lock<std::mutex> lock(p->mu);
      if (!p->response) {  // not answered yet (should not happen): park again
        p->parked = true;
        MHD_suspend_connection(connection);
        return MHD_YES;
      }
      HttpResponse r = std::move(*p->response);
      p->parked = false;
      lock.unlock();
      Forget(p);
      return Queue(connection, r);
    }
    if (state.too_large) {
      return Queue(connection, state.route && state.route->too_large
                                   ? state.route->too_large(state.cap)
                                   : TooLarge(state.cap));
    }
    if (state.route == nullptr) {
      HttpResponse r;
      r.status = 404;
      r.content_type.clear();
      return Queue(connection, r);
    }
    auto p = std::make_shared<Pending>();
    p->connection = connection;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (stopped) return Queue(connection, HttpResponse::Error(503, "QueueBox is shutting down"));
      pending.insert(p);
    }
    state.pending = p;
    Responder respond = [p](HttpResponse r) {
      std::lock_guard<std::mutex> lock(p->mu);
      if (p->abandoned || p->response) return;
      p->response = std::move(r);
      if (p->parked) MHD_resume_connection(p->connection);
    };
    try {
      state.route->handler(std::move(state.request), respond);
    } catch (const std::exception& e) {
      log::Error("An HTTP handler failed.", {{"reason", e.what()}});
      respond(HttpResponse::Error(500, "Internal error"));
    }
    std::unique_lock<std::mutex> lock(p->mu);
    if (p->response) {  // answered inline
      HttpResponse r = std::move(*p->response);
      lock.unlock();
      Forget(p);
      return Queue(connection, r);
    }
    p->parked = true;
    MHD_suspend_connection(connection);
    return MHD_YES;
  }

  static MHD_Result Access(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char*, const char* upload,
                           size_t* upload_size, void** con_cls) {
    auto* self = static_cast<Impl*>(cls);
    auto* state = static_cast<RequestState*>(*con_cls);
    if (state == nullptr) {
      state = new RequestState;
      *con_cls = state;
      state->request.method = method;
      state->request.path = url;
      MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectHeader,
                                &state->request.headers);
      // A response queued before the body is read closes the connection afterwards: right
      // for a refusal, so only refusals are answered here.
      if (self->gate) {
        if (std::optional<HttpResponse> r = self->gate(state->request)) {
          r->close = true;
          return Queue(connection, *r);
        }
      }
      state->route = self->Find(state->request.method, state->request.path);
      state->cap = self->options.max_body_bytes;
      if (state->route != nullptr && state->route->max_body_bytes > 0) {
        state->cap = std::min(state->cap, state->route->max_body_bytes);
      }
      std::string declared = state->request.Header("Content-Length");
      if (!declared.empty() && std::strtoull(declared.c_str(), nullptr, 10) >
                                   static_cast<uint64_t>(state->cap)) {
        HttpResponse r = state->route && state->route->too_large
                             ? state->route->too_large(state->cap)
                             : TooLarge(state->cap);
        r.close = true;
        return Queue(connection, r);
      }
      return MHD_YES;
    }
    if (*upload_size != 0) {
      state->received += *upload_size;
      if (state->received > static_cast<uint64_t>(state->cap)) {
        if (!state->too_large) {
          state->too_large = true;
          std::string().swap(state->request.body);
        }
      } else {
        state->request.body.append(upload, *upload_size);
      }
      *upload_size = 0;
      return MHD_YES;
    }
    return self->Finish(connection, *state);
  }

  static void Completed(void* cls, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode) {
    auto* self = static_cast<Impl*>(cls);
    auto* state = static_cast<RequestState*>(*con_cls);
    if (state == nullptr) return;
    if (state->pending) self->Forget(state->pending);
    delete state;
    *con_cls = nullptr;
  }
};

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Route(std::string method, std::string path, HttpHandler handler,
                       int64_t max_body_bytes, std::function<HttpResponse(int64_t)> too_large) {
  auto r = std::make_unique<RouteEntry>();
  r->method = std::move(method);
  r->path = std::move(path);
  r->handler = std::move(handler);
  r->max_body_bytes = max_body_bytes;
  r->too_large = std::move(too_large);
  impl_->routes.push_back(std::move(r));
}

void HttpServer::SetGate(std::function<std::optional<HttpResponse>(const HttpRequest&)> gate) {
  impl_->gate = std::move(gate);
}

Status HttpServer::Start() {
  Impl& m = *impl_;
  const HttpServerOptions& o = m.options;
  auto fail = [&](const std::string& reason) {
    return Unavailable("Cannot listen on " + o.address + ":" + std::to_string(o.port) + " (" +
                       o.port_key + "): " + reason + ". Set '" + o.port_key +
                       "' to a free port, or stop the process that holds it.");
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(o.address.c_str(), std::to_string(o.port).c_str(), &hints, &found);
      rc != 0) {
    return fail(std::string("the address does not resolve (") + gai_strerror(rc) + ")");
  }
  int err = 0;
  for (addrinfo* ai = found; ai != nullptr && m.listen_fd < 0; ai = ai->ai_next) {
    int sock = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (sock < 0) {
      err = errno;
      continue;
    }
    // SO_REUSEADDR lets a restarted relay bind while old connections sit in TIME_WAIT and still
    // refuses a port with a live listener; SO_REUSEPORT would let two relays share one port.
    int yes = 1;
    (void)setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(sock, ai->ai_addr, ai->ai_addrlen) != 0 || listen(sock, o.listen_backlog) != 0) {
      err = errno;
      close(sock);
      continue;
    }
    m.listen_fd = sock;
  }
  freeaddrinfo(found);
  if (m.listen_fd < 0) return fail(ListenFailureReason(err));
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(m.listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  m.port = bound.ss_family == AF_INET6
               ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
               : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  m.daemon = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, nullptr,
      nullptr, &Impl::Access, &m, MHD_OPTION_LISTEN_SOCKET, m.listen_fd,
      MHD_OPTION_THREAD_POOL_SIZE, static_cast<unsigned>(std::max(1, o.threads)),
      MHD_OPTION_CONNECTION_TIMEOUT, o.idle_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
      o.connection_limit, MHD_OPTION_NOTIFY_COMPLETED, &Impl::Completed, &m,
      MHD_OPTION_EXTERNAL_LOGGER, &MhdLog, nullptr, MHD_OPTION_END);
  if (m.daemon == nullptr) {
    close(m.listen_fd);
    m.listen_fd = -1;
    return fail("the HTTP server did not start");
  }
  m.listen_fd = -1;  // MHD owns the socket now and closes it when it stops
  return Status::Ok();
}

int HttpServer::port() const { return impl_->port; }

int HttpServer::InFlight() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<int>(impl_->pending.size());
}

void HttpServer::Stop() {
  Impl& m = *impl_;
  std::set<std::shared_ptr<Pending>> left;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (m.stopped) return;
    m.stopped = true;
    left = m.pending;
  }
  if (m.daemon != nullptr) {
    // Every parked connection must be resumed before the daemon stops; it gets the 503.
    for (const auto& p : left) {
      std::lock_guard<std::mutex> lock(p->mu);
      if (!p->response) p->response = HttpResponse::Error(503, "QueueBox is shutting down");
      p->abandoned = true;
      if (p->parked) MHD_resume_connection(p->connection);
    }
    // Give the resumed connections a moment to send their answers.
    for (int i = 0; i < 100 && InFlight() > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    MHD_stop_daemon(m.daemon);
    m.daemon = nullptr;
  }
  if (m.listen_fd >= 0) {
    close(m.listen_fd);
    m.listen_fd = -1;
  }
}

}  // namespace queuebox
