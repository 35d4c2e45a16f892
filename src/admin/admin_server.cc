#include "admin/admin_server.h"

#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "admin/console_api.h"
#include "admin/console_page.h"
#include "admin/elastic_pool.h"
#include "admin/metrics.h"
#include "admin/replay.h"
#include "auth/request_auth.h"
#include "auth/request_headers.h"
#include "core/log.h"
#include "core/router.h"

namespace queuebox {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr const char* kJson = "application/json";

void JsonError(httplib::Response& res, int status, const std::string& error) {
  res.status = status;
  res.set_content(json{{"error", error}}.dump(-1, ' ', false, json::error_handler_t::replace),
                  kJson);
}

// Pool threads of each HTTP server (data, management), and the listen backlog.
// Connections served at once (a thread each while open; more wait), and the threads kept idle.
constexpr size_t kMaxServerThreads = 4096;
constexpr size_t kMinServerThreads = 8;
constexpr int kListenBacklog = 1024;

constexpr const char* kTransformTestPath = "/admin/transform/test";

// The transform test endpoint's error shape (QueueBox's TransformTestResponse).
void TransformTestError(httplib::Response& res, int status, const std::string& error) {
  res.status = status;
  res.set_content(json{{"success", false}, {"error", error}}.dump(-1, ' ', false,
                                                                  json::error_handler_t::replace),
                  kJson);
}

bool IsBroker(std::string_view type) {
  return type == "rabbitmq" || type == "kafka" || type == "nats";
}

// Health checks still running (a check may outlive its request after the 3 s bound); Stop
// waits for them so no check touches a store that is gone.
struct CheckTracker {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
};

// cpp-httplib's default socket options set SO_REUSEPORT, which lets a second process bind a port
// that one already listens on: two relays would both report that they listen and the kernel
// would split probes and scrapes between them. SO_REUSEADDR alone still lets a restarted relay
// bind while its old connections sit in TIME_WAIT, and refuses a port with a live listener.
void ExclusiveSocketOptions(socket_t sock) {
  int yes = 1;
  (void)setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// Why `address`:`port` cannot be bound: cpp-httplib reports only failure, so bind a probe socket
// with the same options and read errno.
std::string ListenFailureReason(const std::string& address, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found);
      rc != 0) {
    return std::string("the address does not resolve (") + gai_strerror(rc) + ")";
  }
  int err = 0;
  for (addrinfo* ai = found; ai != nullptr && err != EADDRINUSE; ai = ai->ai_next) {
    int sock = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (sock < 0) continue;
    ExclusiveSocketOptions(sock);
    if (bind(sock, ai->ai_addr, ai->ai_addrlen) != 0 || listen(sock, 1) != 0) err = errno;
    close(sock);
  }
  freeaddrinfo(found);
  switch (err) {
    case EADDRINUSE:
      return "the port is already in use (another process, perhaps another QueueBox relay, "
             "listens on it)";
    case EACCES:
      return "permission denied (ports below 1024 need privileges)";
    case EADDRNOTAVAIL:
      return "the address is not one of this host's";
    case 0:
      return "the bind failed (the port may have been freed since)";
    default:
      return std::string("the bind failed (errno ") + std::to_string(err) + ")";
  }
}

}  // namespace

struct AdminServer::Impl {
  Config config;
  AdminServerDeps deps;
  Router router;
  std::unique_ptr<RequestAuth> auth;
  std::unique_ptr<ConsoleApi> console;  // admin.enabled and deps.console

  httplib::Server data;
  std::unique_ptr<httplib::Server> management;
  std::thread data_thread, management_thread;
  int data_port = -1;
  std::optional<int> management_port;

  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  std::mutex inflight_mu;
  std::condition_variable inflight_cv;
  int inflight = 0;
  std::shared_ptr<CheckTracker> checks = std::make_shared<CheckTracker>();
  // The socket the socket-options callback saw last: the one Bind just bound (Bind runs on the
  // controlling thread, one server after the other).
  socket_t last_socket = INVALID_SOCKET;

  explicit Impl(Router r) : router(std::move(r)) {}

  // Counts a request as in flight for the drain.
  class InFlight {
   public:
    explicit InFlight(Impl* impl) : impl_(impl) {
      std::lock_guard<std::mutex> lock(impl_->inflight_mu);
      ++impl_->inflight;
    }
    ~InFlight() {
      {
        std::lock_guard<std::mutex> lock(impl_->inflight_mu);
        --impl_->inflight;
      }
      impl_->inflight_cv.notify_all();
    }
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;

   private:
    Impl* impl_;
  };

  template <typename H>
  auto Guarded(H handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      InFlight f(this);
      try {
        handler(req, res);
      } catch (const std::exception& e) {
        log::Error("An admin request failed.", {{"path", req.path}, {"reason", e.what()}});
        JsonError(res, 500, "Internal error");
      }
    };
  }

  void Configure(httplib::Server& s) {
    s.set_socket_options([this](socket_t sock) {
      ExclusiveSocketOptions(sock);
      // Accepted connections inherit it: without it a response written in two parts (headers,
      // body) waits for the client's delayed ACK, about 40 ms per keep-alive request.
      int yes = 1;
      (void)setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
      last_socket = sock;
    });
    s.set_tcp_nodelay(true);
    s.set_keep_alive_timeout(1);
    s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (draining.load()) {
        JsonError(res, 503, "QueueBox is shutting down");
        res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }
      // A declared length over the cap is refused before the body is read.
      if (config.admin.enabled && req.path.rfind("/admin/", 0) == 0 &&
          req.has_header("Content-Length")) {
        auto declared = std::strtoll(req.get_header_value("Content-Length").c_str(), nullptr, 10);
        if (declared > config.admin.max_payload_bytes) {
          TooLarge(res, req.path == kTransformTestPath ? TransformTestError : JsonError);
          return httplib::Server::HandlerResponse::Handled;
        }
      } else if (req.has_header("Content-Length")) {
        // Every other route (the inbox sources among them): inbox.maxBodyBytes, QueueBox
        // reference §13.1. A chunked body is counted by the route that reads it.
        auto declared = std::strtoll(req.get_header_value("Content-Length").c_str(), nullptr, 10);
        if (declared > config.inbox.max_body_bytes) {
          if (deps.metrics != nullptr && deps.is_inbox_route && deps.is_inbox_route(req.path)) {
            deps.metrics->OnInboxRejection("body_too_large");
          }
          JsonError(
              res, 413,
              "Request body exceeds " + std::to_string(config.inbox.max_body_bytes) + " bytes");
          res.set_header("Connection", "close");
          return httplib::Server::HandlerResponse::Handled;
        }
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    // Webhook senders keep connections alive and send concurrently. Each open connection holds
    // a thread, so the pool grows with them (elastic_pool.h): idle connections never make a new
    // one wait. Idle connections close after 1 s; spare threads after 60 s.
    s.new_task_queue = [] {
      return new ElasticPool(kMinServerThreads, kMaxServerThreads, std::chrono::seconds(60));
    };
    s.set_keep_alive_max_count(1000);
  }

  using ErrorWriter = void (*)(httplib::Response&, int, const std::string&);

  void TooLarge(httplib::Response& res, ErrorWriter error = JsonError) {
    error(res, 413,
          "Request body exceeds " + std::to_string(config.admin.max_payload_bytes) + " bytes");
    res.set_header("Connection", "close");
  }

  void RegisterData(httplib::Server& s) {
    s.Get("/", Guarded([](const httplib::Request&, httplib::Response& res) {
            res.set_content("QueueBox is running!", "text/plain; charset=utf-8");
          }));
    if (deps.extra_data_routes) deps.extra_data_routes(s);
  }

  void RegisterManagement(httplib::Server& s) {
    s.Get("/health/live", Guarded([](const httplib::Request&, httplib::Response& res) {
            res.set_content(R"({"status":"healthy","components":{"process":{"status":"up"}}})",
                            kJson);
          }));
    auto ready = Guarded([this](const httplib::Request&, httplib::Response& res) { Ready(res); });
    s.Get("/health/ready", ready);
    s.Get("/health", ready);
    s.Get("/metrics", Guarded([this](const httplib::Request&, httplib::Response& res) {
            std::string body = deps.metrics != nullptr ? deps.metrics->Render() : std::string();
            res.set_content(body, std::string(kMetricsContentType).c_str());
          }));
    if (config.admin.enabled) {
      s.Post("/admin/replay", [this](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& reader) {
        InFlight f(this);
        try {
          Replay(req, res, reader);
        } catch (const std::exception& e) {
          log::Error("An admin request failed.", {{"path", req.path}, {"reason", e.what()}});
          JsonError(res, 500, "Internal error");
        }
      });
      if (console) RegisterConsole(s);
      if (deps.transform_test) {
        s.Post(kTransformTestPath, [this](const httplib::Request& req, httplib::Response& res,
                                          const httplib::ContentReader& reader) {
          InFlight f(this);
          try {
            TransformTest(req, res, reader);
          } catch (const std::exception& e) {
            log::Error("An admin request failed.", {{"path", req.path}, {"reason", e.what()}});
            TransformTestError(res, 500, "Internal error");
          }
        });
      }
    }
  }

  // The console API: GETs authenticate their (usually empty) body, POSTs read theirs first.
  void RegisterConsole(httplib::Server& s) {
    s.Get("/admin/console", Guarded([](const httplib::Request&, httplib::Response& res) {
            res.set_redirect("/admin/console/");
          }));
    s.Get(R"(/admin/console/(index\.html|console\.js|console\.css)?)",
          Guarded([](const httplib::Request& req, httplib::Response& res) {
            const std::string file = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
            ServeConsoleFile(file.empty() ? "index.html" : file, res);
          }));
    using Read = void (ConsoleApi::*)(const httplib::Request&, httplib::Response&);
    const std::pair<const char*, Read> reads[] = {
        {"/admin/api/overview", &ConsoleApi::Overview},
        {"/admin/api/messages", &ConsoleApi::Messages},
        {R"(/admin/api/messages/([0-9A-Fa-f-]{36}))", &ConsoleApi::Message},
        {"/admin/api/inbox/lookup", &ConsoleApi::InboxLookup}};
    for (const auto& [path, read] : reads) {
      // Copied by name: clang 14 (the fuzz build) cannot capture a structured binding.
      s.Get(path,
            Guarded([this, method = read](const httplib::Request& req, httplib::Response& res) {
              if (Authenticated(req, res, req.body, JsonError)) (console.get()->*method)(req, res);
            }));
    }
    using Act = void (ConsoleApi::*)(const std::string&, httplib::Response&);
    const std::pair<const char*, Act> actions[] = {{"/admin/api/replay", &ConsoleApi::Replay},
                                                   {"/admin/api/discard", &ConsoleApi::Discard}};
    for (const auto& [path, act] : actions) {
      s.Post(path, [this, method = act](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
        InFlight f(this);
        try {
          std::optional<std::string> body = ReadAuthenticated(req, res, reader, JsonError);
          if (body) (console.get()->*method)(*body, res);
        } catch (const std::exception& e) {
          log::Error("An admin request failed.", {{"path", req.path}, {"reason", e.what()}});
          JsonError(res, 500, "Internal error");
        }
      });
    }
  }

  // admin.auth against the request and its body; false after answering 401 with `error` (the
  // refusal is logged and counted).
  bool Authenticated(const httplib::Request& req, httplib::Response& res, const std::string& body,
                     ErrorWriter error) {
    if (!auth) return true;
    int64_t now = deps.now_ms ? deps.now_ms()
                              : std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    Status s = auth->Check(
        [&req](std::string_view name) { return HeaderValue(req, std::string(name)); }, body, now);
    if (s.ok()) return true;
    log::Warn("An admin request was refused.", {{"path", req.path}, {"reason", s.message()}});
    if (deps.metrics != nullptr) deps.metrics->OnAdminAuthFailure();
    error(res, 401, s.message());
    return false;
  }

  // Reads the body under admin.maxPayloadBytes, then checks admin.auth against it (the body
  // comes first so HMAC can sign it). nullopt after answering 413 or 401 with `error`.
  std::optional<std::string> ReadAuthenticated(const httplib::Request& req, httplib::Response& res,
                                               const httplib::ContentReader& reader,
                                               ErrorWriter error) {
    std::string body;
    bool too_large = false;
    reader([&](const char* data_ptr, size_t n) {
      if (static_cast<int64_t>(body.size() + n) > config.admin.max_payload_bytes) {
        too_large = true;
        return false;
      }
      body.append(data_ptr, n);
      return true;
    });
    if (too_large) {
      TooLarge(res, error);
      return std::nullopt;
    }
    if (!Authenticated(req, res, body, error)) return std::nullopt;
    return body;
  }

  void TransformTest(const httplib::Request& req, httplib::Response& res,
                     const httplib::ContentReader& reader) {
    std::optional<std::string> body = ReadAuthenticated(req, res, reader, TransformTestError);
    if (!body) return;
    auto [status, answer] = deps.transform_test(*body);
    res.status = status;
    res.set_content(answer, kJson);
  }

  void Replay(const httplib::Request& req, httplib::Response& res,
              const httplib::ContentReader& reader) {
    std::optional<std::string> read = ReadAuthenticated(req, res, reader, JsonError);
    if (!read) return;
    const std::string& body = *read;
    auto request = ParseReplayRequest(body);
    if (!request.ok()) return JsonError(res, 400, "Invalid request: " + request.status().message());
    if (!request->HasFilter()) return JsonError(res, 400, std::string(kReplayNeedsFilter));
    if (request->inbox() && deps.inbox == nullptr) {
      return JsonError(res, 400, "Invalid request: this store has no inbox");
    }
    auto moved = request->inbox() ? RunInboxReplay(*request, *deps.inbox)
                                  : RunReplay(*request, router, *deps.store);
    if (!moved.ok()) {
      log::Error("The replay failed.", {{"reason", moved.status().ToString()}});
      return JsonError(res, moved.status().code() == StatusCode::kUnavailable ? 503 : 500,
                       "Replay failed");
    }
    res.status = 200;
    res.set_content(json{{"moved", *moved}}.dump(), kJson);
  }

  std::vector<HealthComponent> Checks() {
    std::vector<HealthComponent> checks_list;
    OutboxOperations* store = deps.store;
    checks_list.push_back({"database", [store] { return store->Ping().ok(); }});
    checks_list.insert(checks_list.end(), deps.components.begin(), deps.components.end());
    return checks_list;
  }

  void Ready(httplib::Response& res) {
    std::vector<HealthComponent> list = Checks();
    struct Results {
      std::mutex mu;
      std::condition_variable cv;
      std::vector<int> state;  // -1 running, 0 down, 1 up
    };
    auto results = std::make_shared<Results>();
    results->state.assign(list.size(), -1);
    auto tracker = checks;
    for (size_t i = 0; i < list.size(); ++i) {
      {
        std::lock_guard<std::mutex> lock(tracker->mu);
        ++tracker->running;
      }
      std::thread([results, tracker, i, run = list[i].up] {
        bool up = false;
        try {
          up = run && run();
        } catch (...) {
          up = false;
        }
        {
          std::lock_guard<std::mutex> lock(results->mu);
          results->state[i] = up ? 1 : 0;
        }
        results->cv.notify_all();
        {
          std::lock_guard<std::mutex> lock(tracker->mu);
          --tracker->running;
        }
        tracker->cv.notify_all();
      }).detach();
    }
    std::unique_lock<std::mutex> lock(results->mu);
    results->cv.wait_until(lock, Clock::now() + deps.health_timeout, [&] {
      for (int s : results->state) {
        if (s < 0) return false;
      }
      return true;
    });
    ordered_json components = ordered_json::object();
    bool healthy = true;
    for (size_t i = 0; i < list.size(); ++i) {
      bool up = results->state[i] == 1;
      healthy = healthy && (up || list[i].advisory);
      components[list[i].name] = {{"status", up ? "up" : "down"}};
    }
    lock.unlock();
    ordered_json body = {{"status", healthy ? "healthy" : "unhealthy"}, {"components", components}};
    res.status = healthy ? 200 : 503;
    res.set_content(body.dump(), kJson);
  }

  // `key` names the setting the port comes from ("server.httpPort"), for the message.
  Status Bind(httplib::Server& s, const char* key, int port, int* bound) {
    const std::string& address = config.server.address;
    if (port == 0) {
      *bound = s.bind_to_any_port(address);
    } else {
      *bound = s.bind_to_port(address, port) ? port : -1;
    }
    if (*bound <= 0) {
      return Unavailable("Cannot listen on " + address + ":" + std::to_string(port) + " (" + key +
                         "): " + ListenFailureReason(address, port) + ". Set '" + key +
                         "' to a free port, or stop the process that holds it.");
    }
    // Debian's cpp-httplib is a compiled library that listens with a backlog of 5: a burst of
    // webhook senders would see refused or retried SYNs. Linux takes a second listen() as a new
    // backlog for the bound socket.
    if (last_socket != INVALID_SOCKET) (void)::listen(last_socket, kListenBacklog);
    return Status::Ok();
  }
};

AdminServer::AdminServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AdminServer::~AdminServer() { Stop(std::chrono::milliseconds(0)); }

std::vector<HealthComponent> BrokerDestinationHealth(
    const std::vector<Destination*>& destinations) {
  std::vector<HealthComponent> out;
  for (Destination* d : destinations) {
    if (d == nullptr || !IsBroker(d->type())) continue;
    out.push_back({std::string(d->type()) + "." + d->name(), [d] { return d->Health().ok(); }});
  }
  return out;
}

Status RequireAdminAuth(const AdminConfig& admin) {
  if (admin.enabled && !admin.auth && !admin.insecure) {
    return FailedPrecondition(
        "The admin routes are enabled with no authentication. Set 'admin.auth' to a bearer "
        "token, an API key, or an HMAC signature. Set 'admin.insecure' to true only for a local "
        "test, or set 'admin.enabled' to false.");
  }
  return Status::Ok();
}

Result<std::unique_ptr<AdminServer>> AdminServer::Create(const Config& config,
                                                         AdminServerDeps deps) {
  if (deps.store == nullptr) return InvalidArgument("the admin server needs a store");
  QB_RETURN_IF_ERROR(RequireAdminAuth(config.admin));
  QB_ASSIGN_OR_RETURN(Router router, Router::Create(config.routes));
  auto impl = std::make_unique<Impl>(std::move(router));
  impl->config = config;
  impl->deps = std::move(deps);
  if (config.admin.enabled && config.admin.auth) {
    QB_ASSIGN_OR_RETURN(impl->auth, RequestAuth::Create(*config.admin.auth));
  }
  if (config.admin.enabled && impl->deps.console != nullptr) {
    impl->console = std::make_unique<ConsoleApi>(impl->config, impl->router, *impl->deps.store,
                                                 *impl->deps.console, impl->deps.inbox,
                                                 impl->deps.replicas, impl->deps.metrics);
  }
  if (config.admin.max_payload_bytes <= 0) {
    return InvalidArgument("admin.maxPayloadBytes must be > 0");
  }
  return std::unique_ptr<AdminServer>(new AdminServer(std::move(impl)));
}

Status AdminServer::Start() {
  Impl& m = *impl_;
  m.Configure(m.data);
  m.RegisterData(m.data);
  httplib::Server* management_server = &m.data;
  if (m.config.server.management_port) {
    m.management = std::make_unique<httplib::Server>();
    m.Configure(*m.management);
    management_server = m.management.get();
  }
  m.RegisterManagement(*management_server);

  QB_RETURN_IF_ERROR(m.Bind(m.data, "server.httpPort", m.config.server.http_port, &m.data_port));
  if (m.management) {
    int bound = -1;
    Status s =
        m.Bind(*m.management, "server.managementPort", *m.config.server.management_port, &bound);
    if (!s.ok()) {
      m.data.stop();
      return s;
    }
    m.management_port = bound;
    m.management_thread = std::thread([&m] { m.management->listen_after_bind(); });
  }
  m.data_thread = std::thread([&m] { m.data.listen_after_bind(); });
  // stop() only stops a server that is already running: wait for both loops to start.
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while ((!m.data.is_running() || (m.management && !m.management->is_running())) &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  log::Info("The HTTP server is listening.",
            {{"address", m.config.server.address},
             {"port", std::to_string(m.data_port)},
             {"management_port",
              m.management_port ? std::to_string(*m.management_port) : std::string("none")}});
  return Status::Ok();
}

int AdminServer::data_port() const { return impl_->data_port; }
std::optional<int> AdminServer::management_port() const { return impl_->management_port; }

void AdminServer::StartDraining() { impl_->draining = true; }

int AdminServer::Stop(std::chrono::milliseconds grace) {
  Impl& m = *impl_;
  if (m.stopped.exchange(true)) return 0;
  m.draining = true;
  int left = 0;
  {
    std::unique_lock<std::mutex> lock(m.inflight_mu);
    m.inflight_cv.wait_for(lock, grace, [&m] { return m.inflight == 0; });
    left = m.inflight;
  }
  if (left > 0) {
    log::Warn("The HTTP server stopped with requests still in flight.",
              {{"in_flight", std::to_string(left)}});
  }
  m.data.stop();
  if (m.management) m.management->stop();
  if (m.data_thread.joinable()) m.data_thread.join();
  if (m.management_thread.joinable()) m.management_thread.join();
  // Health checks that outlived their request: each is bounded by its own I/O timeout.
  std::unique_lock<std::mutex> lock(m.checks->mu);
  m.checks->cv.wait_for(lock, std::chrono::seconds(30), [&m] { return m.checks->running == 0; });
  return left;
}

}  // namespace queuebox
