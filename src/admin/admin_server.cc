#include "admin/admin_server.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "admin/auth.h"
#include "admin/http_server.h"
#include "admin/metrics.h"
#include "admin/replay.h"
#include "core/log.h"
#include "core/router.h"

namespace queuebox {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

HttpResponse JsonError(int status, const std::string& error) {
  return HttpResponse::Error(status, error);
}

bool IsBroker(std::string_view type) {
  return type == "rabbitmq" || type == "kafka" || type == "nats";
}

// Health checks and replays still running on their own threads (a check may outlive its request
// after the 3 s bound); Stop waits for them so none touches a store that is gone.
struct CheckTracker {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
};

struct Check {
  std::string name;
  std::function<bool()> run;
};

// Runs `work` on a thread of its own, counted by `tracker`.
void Detach(const std::shared_ptr<CheckTracker>& tracker, std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(tracker->mu);
    ++tracker->running;
  }
  std::thread([tracker, work = std::move(work)] {
    work();
    {
      std::lock_guard<std::mutex> lock(tracker->mu);
      --tracker->running;
    }
    tracker->cv.notify_all();
  }).detach();
}

}  // namespace

struct AdminServer::Impl {
  Config config;
  AdminServerDeps deps;
  Router router;
  std::unique_ptr<RequestAuth> auth;

  std::unique_ptr<HttpServer> data;
  std::unique_ptr<HttpServer> management;

  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  std::shared_ptr<CheckTracker> checks = std::make_shared<CheckTracker>();

  explicit Impl(Router r) : router(std::move(r)) {}

  std::unique_ptr<HttpServer> MakeServer(const char* key, int port) {
    HttpServerOptions o;
    o.address = config.server.address;
    o.port = port;
    o.port_key = key;
    o.max_body_bytes = config.inbox.max_body_bytes;
    o.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 2u, 8u));
    auto s = std::make_unique<HttpServer>(o);
    s->SetGate([this](const HttpRequest&) -> std::optional<HttpResponse> {
      if (draining.load()) return JsonError(503, "QueueBox is shutting down");
      return std::nullopt;
    });
    return s;
  }

  static HttpHandler Sync(std::function<HttpResponse(const HttpRequest&)> f) {
    return [f = std::move(f)](HttpRequest req, Responder respond) { respond(f(req)); };
  }

  void RegisterData(HttpServer& s) {
    s.Route("GET", "/", Sync([](const HttpRequest&) {
              HttpResponse r;
              r.body = "QueueBox is running!";
              r.content_type = "text/plain; charset=utf-8";
              return r;
            }));
    if (deps.extra_data_routes) deps.extra_data_routes(s);
  }

  void RegisterManagement(HttpServer& s) {
    s.Route("GET", "/health/live", Sync([](const HttpRequest&) {
              return HttpResponse::Json(
                  200, R"({"status":"healthy","components":{"process":{"status":"up"}}})");
            }));
    auto ready = [this](HttpRequest, Responder respond) {
      Detach(checks, [this, respond] { respond(Ready()); });
    };
    s.Route("GET", "/health/ready", ready);
    s.Route("GET", "/health", ready);
    s.Route("GET", "/metrics", Sync([this](const HttpRequest&) {
              HttpResponse r;
              r.body = deps.metrics != nullptr ? deps.metrics->Render() : std::string();
              r.content_type = std::string(kMetricsContentType);
              return r;
            }));
    if (config.admin.enabled) {
      s.Route(
          "POST", "/admin/replay",
          [this](HttpRequest req, Responder respond) {
            auto shared = std::make_shared<HttpRequest>(std::move(req));
            Detach(checks, [this, shared, respond] {
              try {
                respond(Replay(*shared));
              } catch (const std::exception& e) {
                log::Error("An admin request failed.",
                           {{"path", shared->path}, {"reason", e.what()}});
                respond(JsonError(500, "Internal error"));
              }
            });
          },
          config.admin.max_payload_bytes);
    }
  }

  HttpResponse Replay(const HttpRequest& req) {
    if (auth) {
      int64_t now = deps.now_ms ? deps.now_ms()
                                : std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count();
      Status s = auth->Check([&req](std::string_view name) { return req.Header(name); },
                             req.body, now);
      if (!s.ok()) {
        log::Warn("An admin request was refused.", {{"path", req.path}, {"reason", s.message()}});
        return JsonError(401, s.message());
      }
    }
    auto request = ParseReplayRequest(req.body);
    if (!request.ok()) return JsonError(400, "Invalid request: " + request.status().message());
    if (!request->HasFilter()) return JsonError(400, std::string(kReplayNeedsFilter));
    auto moved = RunReplay(*request, router, *deps.store);
    if (!moved.ok()) {
      log::Error("The replay failed.", {{"reason", moved.status().ToString()}});
      return JsonError(moved.status().code() == StatusCode::kUnavailable ? 503 : 500,
                       "Replay failed");
    }
    return HttpResponse::Json(200, json{{"moved", *moved}}.dump());
  }

  std::vector<Check> Checks() {
    std::vector<Check> checks_list;
    OutboxOperations* store = deps.store;
    checks_list.push_back({"database", [store] { return store->Ping().ok(); }});
    auto poller = deps.poller_healthy;
    checks_list.push_back({"outbox-poller", [poller] { return poller && poller(); }});
    if (deps.retention_healthy)
      checks_list.push_back({"retention-service", deps.retention_healthy});
    for (Destination* d : deps.destinations) {
      if (d == nullptr || !IsBroker(d->type())) continue;
      checks_list.push_back(
          {std::string(d->type()) + "." + d->name(), [d] { return d->Health().ok(); }});
    }
    return checks_list;
  }

  HttpResponse Ready() {
    std::vector<Check> list = Checks();
    struct Results {
      std::mutex mu;
      std::condition_variable cv;
      std::vector<int> state;  // -1 running, 0 down, 1 up
    };
    auto results = std::make_shared<Results>();
    results->state.assign(list.size(), -1);
    for (size_t i = 0; i < list.size(); ++i) {
      Detach(checks, [results, i, run = list[i].run] {
        bool up = false;
        try {
          up = run();
        } catch (...) {
          up = false;
        }
        {
          std::lock_guard<std::mutex> lock(results->mu);
          results->state[i] = up ? 1 : 0;
        }
        results->cv.notify_all();
      });
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
      healthy = healthy && up;
      components[list[i].name] = {{"status", up ? "up" : "down"}};
    }
    lock.unlock();
    ordered_json body = {{"status", healthy ? "healthy" : "unhealthy"}, {"components", components}};
    return HttpResponse::Json(healthy ? 200 : 503, body.dump());
  }

};

AdminServer::AdminServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AdminServer::~AdminServer() { Stop(std::chrono::milliseconds(0)); }

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
  if (config.admin.max_payload_bytes <= 0) {
    return InvalidArgument("admin.maxPayloadBytes must be > 0");
  }
  if (config.inbox.max_body_bytes <= 0) return InvalidArgument("inbox.maxBodyBytes must be > 0");
  return std::unique_ptr<AdminServer>(new AdminServer(std::move(impl)));
}

Status AdminServer::Start() {
  Impl& m = *impl_;
  m.data = m.MakeServer("server.httpPort", m.config.server.http_port);
  m.RegisterData(*m.data);
  HttpServer* management_server = m.data.get();
  if (m.config.server.management_port) {
    m.management = m.MakeServer("server.managementPort", *m.config.server.management_port);
    management_server = m.management.get();
  }
  m.RegisterManagement(*management_server);
  QB_RETURN_IF_ERROR(m.data->Start());
  if (m.management) {
    if (Status s = m.management->Start(); !s.ok()) {
      m.data->Stop();
      return s;
    }
  }
  log::Info("The HTTP server is listening.",
            {{"address", m.config.server.address},
             {"port", std::to_string(m.data->port())},
             {"management_port",
              m.management ? std::to_string(m.management->port()) : std::string("none")}});
  return Status::Ok();
}

int AdminServer::data_port() const { return impl_->data ? impl_->data->port() : -1; }
std::optional<int> AdminServer::management_port() const {
  if (!impl_->management) return std::nullopt;
  return impl_->management->port();
}

void AdminServer::StartDraining() { impl_->draining = true; }

int AdminServer::Stop(std::chrono::milliseconds grace) {
  Impl& m = *impl_;
  if (m.stopped.exchange(true)) return 0;
  m.draining = true;
  auto in_flight = [&m] {
    return (m.data ? m.data->InFlight() : 0) + (m.management ? m.management->InFlight() : 0);
  };
  auto deadline = Clock::now() + grace;
  while (in_flight() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  int left = in_flight();
  if (left > 0) {
    log::Warn("The HTTP server stopped with requests still in flight.",
              {{"in_flight", std::to_string(left)}});
  }
  if (m.data) m.data->Stop();
  if (m.management) m.management->Stop();
  // Checks and replays that outlived their request: each is bounded by its own I/O timeout.
  std::unique_lock<std::mutex> lock(m.checks->mu);
  m.checks->cv.wait_for(lock, std::chrono::seconds(30), [&m] { return m.checks->running == 0; });
  return left;
}

}  // namespace queuebox
