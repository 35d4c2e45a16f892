// `queuebox run`: the relay process (QueueBox reference §13.6 start-up, §13.7 shutdown).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <thread>
#include <vector>

#include "admin/admin_server.h"
#include "admin/metrics.h"
#include "admin/retention.h"
#include "commands.h"
#include "common.h"
#include "core/inbox_relay.h"
#include "core/log.h"
#include "core/startup.h"
#include "queuebox/relay.h"
#include "sd_notify.h"
#include "sources/broker_source.h"
#include "sources/http_source.h"
#include "store/change_capture.h"
#include "store/open_store.h"
#include "transforms.h"

namespace queuebox::app {
namespace {

// The sources' path into the inbox: after a store that kept a new row it wakes the inbox relay,
// so a received message is forwarded now rather than at the relay's next poll
// (inbox.relay.pollIntervalMs). Wake is cheap and conflated.
class WakingIntake final : public InboxIntake {
 public:
  WakingIntake(InboxIntake* inner, InboxRelay* relay) : inner_(inner), relay_(relay) {}
  Result<std::vector<InboxStoreOutcome>> Store(std::span<const NewInboxMessage> messages) override {
    Result<std::vector<InboxStoreOutcome>> out = inner_->Store(messages);
    if (out.ok() && relay_ != nullptr &&
        std::any_of(out->begin(), out->end(), [](const InboxStoreOutcome& o) {
          return o.kind == InboxStoreOutcome::Kind::kStored;
        })) {
      relay_->Wake();
    }
    return out;
  }

 private:
  InboxIntake* inner_;
  InboxRelay* relay_;
};

}  // namespace

int Run(const GlobalOptions& global, const RunOptions& options, const sigset_t& stop_signals) {
  auto config = LoadOrExplain(global);
  if (!config) return 1;
  log::Init(config->logging.format, config->logging.level);
  log::Info("QueueBox C++ is starting", {{"version", QUEUEBOX_VERSION},
                                         {"database", config->database.type},
                                         {"configuration", DescribeOrigin(config->origin)}});
  if (!config->origin.skipped.empty()) {
    log::Warn(
        "QUEUEBOX_CONFIG_FILE names a file that does not exist; the configuration comes "
        "from the QUEUEBOX_* variables alone",
        {{"file", config->origin.skipped}});
  }

  // Every transform compiles before anything connects (QueueBox reference §13.6 step 2); the
  // engine loads only when one is configured.
  auto transforms = BuildDeliveryTransforms(*config);
  if (!transforms.ok()) return StartFailed(transforms.status());
  auto source_transforms_built = BuildSourceTransforms(*config);
  if (!source_transforms_built.ok()) return StartFailed(source_transforms_built.status());
  std::unique_ptr<sources::SourceTransforms> source_transforms =
      std::move(source_transforms_built).value();

  Metrics metrics;
  {
    std::vector<std::string> names;
    for (const auto& [name, dc] : config->destinations) names.push_back(name);
    metrics.ExportDestinations(names);
    if (config->retention.enabled) metrics.ExportCleanup("outbox");
  }
  auto destinations =
      BuildDestinations(*config, [&metrics](int status) { metrics.OnHttpResponse(status); });
  if (!destinations) return 1;

  auto store = OpenStore(config->database);
  if (!store.ok()) return StartFailed(store.status());

  // A signal during the wait for the database ends the start-up.
  std::atomic<bool> cancel{false}, db_done{false};
  std::thread signal_watch([&] {
    const timespec step{0, 100 * 1000 * 1000};
    while (!db_done.load()) {
      int sig = sigtimedwait(&stop_signals, nullptr, &step);
      if (sig == SIGTERM || sig == SIGINT) cancel = true;
    }
  });
  Status db = WaitForDatabase(**store, config->database.startup_timeout_ms, &cancel);
  db_done = true;
  signal_watch.join();
  if (cancel.load()) {
    log::Info("Stop signal received during start-up; exiting");
    return 0;
  }
  if (!db.ok()) return StartFailed(db);
  if (OutboxStore* pooled = store->get(); pooled->PoolStats()) {
    metrics.ExportConnectionPool("queuebox", [pooled] { return *pooled->PoolStats(); });
  }
  if (config->database.migrate) {
    auto report = (*store)->Migrate(std::nullopt);
    if (!report.ok()) return StartFailed(report.status());
    LogMigrations(*report);
  }
  // Schema guard (QueueBox reference §3.6): a missing table or sequence column stops the start
  // with the statement that fixes it.
  if (Status s = (*store)->CheckSchema(); !s.ok()) return StartFailed(s);
  // The inbox's guard (reference §3.6, its headers column). A database without the inbox table
  // (a schema made by hand for the outbox alone) runs without the inbox relay.
  InboxStore* inbox = (*store)->inbox();
  if (inbox != nullptr) {
    Status s = inbox->CheckSchema();
    if (s.code() == StatusCode::kNotFound) {
      log::Info("The database has no inbox table, so the inbox relay does not run.",
                {{"table", config->database.inbox_table}});
      inbox = nullptr;
    } else if (!s.ok()) {
      return StartFailed(s);
    }
  }

  // Key affinity (outbox.keyAffinity.enabled): replicas split the keys through a heartbeat table.
  // A replica that stops claiming (dead, or every slot busy) drops out after the ttl and the
  // others take its keys; the ttl covers three poll intervals, at least 5 s. Off for
  // --until-idle: its "nothing left to claim" must mean the whole outbox, not this share.
  ReplicaMembership* replicas = (*store)->replica_membership();  // nullptr on SQLite
  if (config->outbox.key_affinity && replicas != nullptr && !options.until_idle) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
    const int64_t poll = std::min<int64_t>(config->outbox.poll_interval_ms, INT64_MAX / 3);
    replicas->EnableKeyAffinity(std::max<int64_t>(5000, 3 * poll),
                                std::string(host) + ":" + std::to_string(getpid()));
  }

  std::vector<Destination*> destination_list;
  for (auto& [name, d] : *destinations) destination_list.push_back(d.get());

  RelayOptions relay_options;
  relay_options.outbox = config->outbox;
  relay_options.max_error_body_bytes = config->http.max_error_body_bytes;
  relay_options.routes = config->routes;
  relay_options.transforms = std::move(transforms).value();
  for (const auto& [name, d] : config->destinations) {
    relay_options.circuit_breakers[name] = d.circuit_breaker.value_or(CircuitBreakerConfig{});
  }
  auto relay =
      Relay::Create(relay_options, store->get(), std::move(*destinations), &metrics, replicas);
  if (!relay.ok()) return StartFailed(relay.status());

  // The inbox relay (inbox.relay.*): push rows of the inbox into the outbox; each forward wakes
  // the outbox relay, so forwarded rows are claimed at once.
  std::unique_ptr<InboxRelay> inbox_relay;
  if (inbox != nullptr && config->inbox.relay.enabled) {
    InboxRelayOptions inbox_options = InboxRelayOptions::FromConfig(*config);
    for (const auto& [name, source] : config->sources) {
      if (const auto topic = source.options.find("topic");
          topic != source.options.end() && topic->is_string()) {
        inbox_options.topic_templates[name] = topic->get<std::string>();
      }
    }
    inbox_options.on_forwarded = [relay_ptr = relay->get()] { relay_ptr->Wake(); };
    auto created = InboxRelay::Create(std::move(inbox_options), inbox, inbox, &metrics);
    if (!created.ok()) return StartFailed(created.status());
    inbox_relay = std::move(created).value();
  } else if (inbox != nullptr) {
    log::Info("inbox.relay.enabled is false: push rows stay in the inbox.");
  }

  std::unique_ptr<RetentionService> retention;
  if (config->retention.enabled) {
    retention =
        std::make_unique<RetentionService>(store->get(), inbox, config->retention, &metrics);
  }

  AdminServerDeps deps;
  deps.store = store->get();
  deps.metrics = &metrics;
  Relay* relay_ptr = relay->get();

  // Change capture (outbox.capture.enabled; QueueBox reference Appendix A): wakes the poller from
  // the database's log; a fault stops capture, never delivery. Started after the relay.
  const CaptureConfig& capture_config = config->outbox.capture;
  auto opened =
      OpenChangeCapture(config->database, capture_config, [relay_ptr] { relay_ptr->Wake(); });
  if (!opened.ok()) return StartFailed(opened.status());
  std::unique_ptr<ChangeCapture> capture = std::move(opened).value();
  if (capture) {
    ChangeCapture* c = capture.get();
    deps.capture_healthy = [c] { return c->healthy(); };
    metrics.SetCaptureProbe([c] {
      return Metrics::CaptureReading{c->healthy(), c->wakes(), c->slot_retained_bytes()};
    });
  }

  // The poller is healthy while it completes cycles; a database outage stops them. In capture
  // mode an idle poller waits up to reconciliationIntervalMs between cycles.
  const int64_t longest_wait = capture_config.mode == "polling"
                                   ? config->outbox.poll_interval_ms
                                   : capture_config.reconciliation_interval_ms;
  const double poller_bound_s = std::max(10.0, 3.0 * static_cast<double>(longest_wait) / 1000.0);
  deps.poller_healthy = [relay_ptr, poller_bound_s] {
    return relay_ptr->SecondsSinceLastCycle() < poller_bound_s;
  };
  if (retention) {
    RetentionService* r = retention.get();
    deps.retention_healthy = [r] { return r->Healthy(); };
  }
  deps.inbox = inbox;
  if (inbox_relay) {
    // Healthy while it cycles and its last cycle succeeded (a database outage fails them).
    InboxRelay* r = inbox_relay.get();
    const double bound_s =
        std::max(10.0, 3.0 * static_cast<double>(config->inbox.relay.poll_interval_ms) / 1000.0);
    deps.inbox_relay_healthy = [r, bound_s] {
      return r->LastCycleOk() && r->SecondsSinceLastCycle() < bound_s;
    };
  }
  deps.destinations = destination_list;
  // A destination's open circuit breaker shows in readiness without failing it: the other
  // destinations and the sources still work, and its rows wait without spending attempts.
  for (Destination* d : destination_list) {
    const std::string name = d->name();
    if (relay_ptr->CircuitState(name).empty()) continue;
    deps.advisory_components.emplace_back(
        "circuit." + name, [relay_ptr, name] { return relay_ptr->CircuitState(name) == "closed"; });
  }
  deps.transform_test = MakeTransformTestHandler(*config);
  WakingIntake intake(inbox, inbox_relay.get());
  // HTTP sources: POST <inbox.basePath><path> on the data port, stored through the inbox.
  std::unique_ptr<sources::WebhookSources> webhooks;
  if (!config->sources.empty()) {
    if (inbox == nullptr) {
      return StartFailed(FailedPrecondition("sources need the inbox table, which database " +
                                            config->database.inbox_table + " does not have"));
    }
    sources::WebhookOptions webhook_options;
    webhook_options.transforms = source_transforms.get();
    // SQLite has one writer; PostgreSQL commits groups on a few connections of the pool.
    webhook_options.writers =
        config->database.type == "sqlite" ? 1 : std::clamp(config->database.pool_size / 3, 1, 4);
    auto created = sources::WebhookSources::Create(*config, &intake, &metrics, webhook_options);
    if (!created.ok()) return StartFailed(created.status());
    webhooks = std::move(created).value();
    sources::WebhookSources* w = webhooks.get();
    deps.extra_data_routes = [w](httplib::Server& server) { w->Register(server); };
    deps.is_inbox_route = [w](std::string_view path) { return w->Serves(path); };
    for (const std::string& route : webhooks->Routes()) {
      log::Info("An HTTP source is listening.", {{"route", route}});
    }
  }
  // Broker sources (rabbitmq, kafka, nats): each consumes on its own threads into the inbox.
  std::vector<std::unique_ptr<sources::BrokerSource>> broker_sources;
  if (inbox != nullptr && !config->sources.empty()) {
    sources::BrokerSourceContext source_context;
    source_context.intake = &intake;
    source_context.metrics = &metrics;
    source_context.transforms = source_transforms.get();
    source_context.max_error_body_bytes = config->http.max_error_body_bytes;
    auto created = sources::CreateBrokerSources(*config, source_context);
    if (!created.ok()) return StartFailed(created.status());
    broker_sources = std::move(created).value();
    for (const auto& b : broker_sources) {
      sources::BrokerSource* p = b.get();
      deps.source_components.emplace_back(p->component(), [p] { return p->healthy(); });
    }
  }
  auto admin = AdminServer::Create(*config, deps);
  if (!admin.ok()) return StartFailed(admin.status());

  // The ports first: a port another process holds stops the start before this one claims a row.
  if (Status s = (*admin)->Start(); !s.ok()) return StartFailed(s);
  if (Status s = (*relay)->Start(); !s.ok()) return StartFailed(s);
  if (inbox_relay) {
    if (Status s = inbox_relay->Start(); !s.ok()) return StartFailed(s);
  }
  for (const auto& b : broker_sources) {
    if (Status s = b->Start(); !s.ok()) return StartFailed(s);
    log::Info("A broker source is consuming.", {{"source", b->component()}});
  }
  // The LISTEN/NOTIFY wake-up (outbox.notify.enabled); polling stays the source of truth.
  std::unique_ptr<InsertListener> listener;
  if (config->outbox.notify) {
    auto created = OpenInsertListener(config->database, [relay_ptr] { relay_ptr->Wake(); });
    if (!created.ok()) return StartFailed(created.status());
    listener = std::move(created).value();
    if (listener) {
      if (Status s = listener->Start(); !s.ok()) return StartFailed(s);
    }
  }
  if (capture) {
    if (Status s = capture->Start(); !s.ok()) return StartFailed(s);
  }
  if (retention) {
    if (Status s = retention->Start(); !s.ok()) return StartFailed(s);
  }
  metrics.StartPendingRefresher(
      store->get(), std::chrono::milliseconds(config->outbox.pending_gauge_interval_ms));
  log::Info("QueueBox C++ is delivering",
            {{"batch_size", std::to_string(config->outbox.batch_size)},
             {"concurrency", std::to_string(config->outbox.concurrency)},
             {"routes", std::to_string(config->routes.size())},
             {"http_port", std::to_string((*admin)->data_port())}});
  // systemd Type=notify (packaging/queuebox.service): ready once it serves and claims.
  NotifyServiceManager("READY=1\nSTATUS=Delivering; HTTP port " +
                       std::to_string((*admin)->data_port()));

  // Wait for a stop signal, or (--until-idle) for the relay to run dry.
  auto started = std::chrono::steady_clock::now();
  const timespec slice{0, 200 * 1000 * 1000};
  const timespec poll_only{0, 0};
  while (true) {
    int sig = sigtimedwait(&stop_signals, nullptr, options.until_idle ? &poll_only : &slice);
    if (sig == SIGTERM || sig == SIGINT) {
      log::Info("Stop signal received; shutting down", {{"signal", std::to_string(sig)}});
      break;
    }
    if (options.until_idle) {
      // The inbox first: its forwards become outbox rows.
      bool inbox_idle = !inbox_relay || inbox_relay->WaitIdle(std::chrono::milliseconds(200)).ok();
      if (inbox_idle && (*relay)->WaitIdle(std::chrono::milliseconds(200)).ok()) {
        log::Info("Nothing left to claim and nothing in flight; stopping (--until-idle)");
        break;
      }
      auto waited = std::chrono::steady_clock::now() - started;
      if (waited > std::chrono::milliseconds(options.idle_timeout_ms)) {
        log::Warn("--until-idle: the idle timeout passed; stopping",
                  {{"idle_timeout_ms", std::to_string(options.idle_timeout_ms)}});
        break;
      }
    }
  }

  // Shutdown (QueueBox reference §13.7): HTTP drains first (503), then background work, then
  // resources.
  NotifyServiceManager("STOPPING=1");
  (*admin)->StartDraining();
  // Sources first: what they fetched and did not store stays unacknowledged and comes back.
  for (const auto& b : broker_sources) b->Stop();
  if (listener) listener->Stop();
  if (capture) capture->Stop();
  if (inbox_relay) inbox_relay->Stop();
  int64_t abandoned = (*relay)->Stop();
  if (replicas != nullptr) replicas->LeaveReplicaSet();
  if (retention) retention->Stop();
  metrics.StopPendingRefresher();
  (*admin)->Stop(std::chrono::milliseconds(2000));
  if (webhooks) webhooks->Stop();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  log::Info("QueueBox C++ stopped",
            {{"abandoned", std::to_string(abandoned)},
             {"max_rss_kb", std::to_string(usage.ru_maxrss)},
             {"jsonata_engine", TransformEngineLoaded() ? "loaded" : "not loaded"}});
  if (abandoned > 0) {
    // Publishes still run on worker threads; the leases return their rows. Leave at once.
    std::fflush(nullptr);
    _exit(0);
  }
  return 0;
}

}  // namespace queuebox::app
