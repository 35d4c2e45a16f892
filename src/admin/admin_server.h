// admin_server.h: QueueBox's HTTP surface (reference §13.1-13.3, §13.7) on cpp-httplib.
//
// Ports: server.httpPort on server.address (the data port) and, when set, server.managementPort.
// With a management port, /health*, /metrics and /admin/* are served there only and the data
// port answers 404 for them. Port 0 binds an ephemeral port (read it with data_port()).
//
// Routes:
//   GET /              200 text "QueueBox is running!" (data port only)
//   GET /health/live   200 {"status":"healthy","components":{"process":{"status":"up"}}}, no I/O
//   GET /health/ready  (and GET /health) 200 healthy / 503 unhealthy with components
//                      database, then deps.components in order (the app's: outbox-poller,
//                      one per broker destination "<type>.<name>", inbox-relay,
//                      retention-service, outbox-capture, one per broker source; an advisory
//                      one is shown and never decides); each check runs off-thread,
//                      bounded at 3 s (timeout = down)
//   GET /metrics       Prometheus text, content type text/plain; version=0.0.4; charset=utf-8
//   POST /admin/replay only when admin.enabled (else 404); body read under admin.maxPayloadBytes
//                      (413 {"error":"Request body exceeds <n> bytes"}) BEFORE auth (401
//                      {"error":"<reason>"}); 400 {"error":"A replay needs at least one filter."}
//                      or {"error":"Invalid request: <reason>"}; 200 {"moved": n}. With
//                      "table": "inbox" it replays inbox rows (admin/replay.h)
//   GET /admin/console/ the console page (admin/console_page.h), same condition, no auth (it
//                      holds no data)
//   /admin/api/...     the console's JSON API (admin/console_api.h) when admin.enabled and
//                      deps.console is set: the same 413 and 401 rules; a refusal by
//                      admin.auth (here and on every admin route) counts
//                      queuebox_admin_auth_failures_total
//   POST /admin/transform/test  when admin.enabled and deps.transform_test is set (else 404):
//                      the same body and auth rules, errors as {"success":false,"error":...};
//                      the answer is deps.transform_test's (QueueBox reference §13.2)
// Drain: after StartDraining() every new request gets 503 {"error":"QueueBox is shutting down"}.
//
// Thread-safety: Start/StartDraining/Stop from one controlling thread; handlers run on the
// server's worker threads.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/destination.h"
#include "queuebox/inbox.h"
#include "queuebox/status.h"
#include "queuebox/store.h"

namespace httplib {
class Server;
}

namespace queuebox {

class Metrics;

// One component of GET /health/ready: up while `up` returns true (unset: down). An advisory
// component is shown but never makes readiness fail.
struct HealthComponent {
  std::string name;
  std::function<bool()> up;
  bool advisory = false;
};

// One component per broker destination (rabbitmq, kafka, nats), "<type>.<name>", up while
// Destination::Health() is OK; http and file destinations have none.
std::vector<HealthComponent> BrokerDestinationHealth(const std::vector<Destination*>& destinations);

// What the health checks and routes read. Pointers are borrowed and must outlive the server.
struct AdminServerDeps {
  OutboxOperations* store = nullptr;  // database check (Ping) and replay; required
  // The inbox, for POST /admin/replay with "table": "inbox"; nullptr answers that replay 400.
  InboxOperations* inbox = nullptr;
  Metrics* metrics = nullptr;  // GET /metrics; nullptr serves an empty exposition
  // The components of readiness after database, in order: the running parts of the process
  // report theirs (QueueBox reference §13.3; outbox-capture and circuit.<destination> are
  // advisory: delivery goes on without them).
  std::vector<HealthComponent> components;
  // The operator console's reads (OutboxStore::console()): with admin.enabled, the JSON API
  // under /admin/api/ (admin/console_api.h). nullptr: no console routes.
  ConsoleQueries* console = nullptr;
  // The replicas the console's overview lists (OutboxStore::replica_membership()); optional.
  ReplicaMembership* replicas = nullptr;
  // Unix ms for HMAC timestamps; the system clock when unset (tests inject).
  std::function<int64_t()> now_ms;
  // Bound of each health check.
  std::chrono::milliseconds health_timeout{3000};
  // Registers more data-port routes (e.g. inbox sources) before Start; the drain rule applies
  // to them too. Optional.
  std::function<void(httplib::Server&)> extra_data_routes;
  // True for a path of extra_data_routes that is an inbox source: a declared length over
  // inbox.maxBodyBytes there counts queuebox_inbox_rejections_total{reason="body_too_large"}.
  // Optional.
  std::function<bool(std::string_view path)> is_inbox_route;
  // POST /admin/transform/test: the answer {HTTP status, JSON body} to a body already read under
  // admin.maxPayloadBytes and authenticated. Unset (a build without transforms): no route.
  // Called on the server's worker threads, several at once.
  std::function<std::pair<int, std::string>(std::string_view body)> transform_test;
};

// The refusal QueueBox gives when admin routes are enabled with no auth and not insecure
// (reference §13.2): kFailedPrecondition with that message; OK otherwise.
Status RequireAdminAuth(const AdminConfig& admin);

class AdminServer {
 public:
  // Validates what the routes need: the admin guard (RequireAdminAuth), admin.auth, the routes'
  // patterns. kFailedPrecondition / kInvalidArgument with the message to show.
  static Result<std::unique_ptr<AdminServer>> Create(const Config& config, AdminServerDeps deps);
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds the port(s) and serves on background threads. A port is exclusive (no SO_REUSEPORT):
  // one that another process listens on is kUnavailable "Cannot listen on <address>:<port>
  // (server.httpPort): the port is already in use ..." naming the key (server.managementPort for
  // the management port), as is any other bind failure, with its reason.
  Status Start();
  // Bound ports (valid after Start).
  int data_port() const;
  std::optional<int> management_port() const;

  // Step 1 of shutdown: new requests get 503; returns at once.
  void StartDraining();
  // Drains (if not yet), waits up to `grace` for in-flight requests, then stops both servers
  // and waits for pending health checks. Idempotent. Returns the requests still in flight
  // when the grace ran out.
  int Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

 private:
  struct Impl;
  explicit AdminServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace queuebox
