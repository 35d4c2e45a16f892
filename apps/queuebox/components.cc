// components.cc: one builder per component of `queuebox run` (components.h).
#include "components.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "common.h"
#include "core/log.h"
#include "core/redaction.h"
#include "sd_notify.h"
#include "sources/registry.h"
#include "transforms.h"

namespace queuebox::app {
namespace {

// A check bound for a loop that completes a cycle at least every `longest_wait_ms`: three
// cycles, at least 10 s.
double CycleBound(int64_t longest_wait_ms) {
  return std::max(10.0, 3.0 * static_cast<double>(longest_wait_ms) / 1000.0);
}

// Tracing (telemetry.*): the tracer every part records its spans with, made before them (the
// sources read it as the process's tracer) and stopped after them, sending what is queued.
std::optional<Component> BuildTracer(Plant& p) {
  const TelemetryConfig& t = p.config.telemetry;
  if (!t.enabled) return std::nullopt;
  telemetry::TracerOptions o;
  o.start_traces = t.start_traces;
  o.endpoint = t.otlp.endpoint.value_or("");
  o.headers = t.otlp.headers;
  o.service_name = t.service_name;
  o.service_version = QUEUEBOX_VERSION;
  o.queue_size = t.otlp.queue_size;
  o.batch_size = t.otlp.batch_size;
  o.export_interval_ms = t.otlp.export_interval_ms;
  o.timeout_ms = t.otlp.timeout_ms;
  p.tracer = std::make_shared<telemetry::Tracer>(std::move(o));
  telemetry::SetProcessTracer(p.tracer);
  telemetry::Tracer* tracer = p.tracer.get();
  p.metrics.SetTelemetryProbe([tracer] {
    return Metrics::TelemetryReading{tracer->recorded(), tracer->exported(), tracer->dropped(),
                                     tracer->failed_exports()};
  });
  log::Info("Tracing is on",
            {{"otlp_endpoint", t.otlp.endpoint.value_or("(none: spans are not exported)")},
             {"start_traces", t.start_traces ? "true" : "false"}});
  return Component{"telemetry",
                   {},
                   [tracer] {
                     tracer->Stop();
                     telemetry::SetProcessTracer(nullptr);
                   },
                   {}};
}

Result<Component> BuildOutboxRelay(Plant& p) {
  const Config& config = p.config;
  std::vector<Destination*> destinations;
  for (auto& [name, d] : p.destinations) destinations.push_back(d.get());
  RelayOptions options;
  options.outbox = config.outbox;
  options.outbox.attempt_history = p.attempt_history;
  options.max_error_body_bytes = config.http.max_error_body_bytes;
  options.routes = config.routes;
  options.transforms = std::move(p.delivery_transforms);
  options.tracer = p.tracer;
  for (const auto& [name, d] : config.destinations) {
    options.circuit_breakers[name] = d.circuit_breaker.value_or(CircuitBreakerConfig{});
    if (d.rate_limit) options.rate_limits[name] = *d.rate_limit;
  }
  QB_ASSIGN_OR_RETURN(p.relay, Relay::Create(options, p.store.get(), std::move(p.destinations),
                                             &p.metrics, p.replicas));
  Relay* relay = p.relay.get();
  // The poller is healthy while it completes cycles; a database outage stops them. In capture
  // mode an idle poller waits up to reconciliationIntervalMs between cycles.
  const CaptureConfig& capture = config.outbox.capture;
  const double bound_s = CycleBound(capture.mode == "polling" ? config.outbox.poll_interval_ms
                                                              : capture.reconciliation_interval_ms);
  Component c{
      "outbox-relay",
      [relay] { return relay->Start(); },
      [&p, relay] {
        p.abandoned = relay->Stop();
        if (p.replicas != nullptr) p.replicas->LeaveReplicaSet();
      },
      {{"outbox-poller", [relay, bound_s] { return relay->SecondsSinceLastCycle() < bound_s; }}}};
  for (HealthComponent& h : BrokerDestinationHealth(destinations)) c.health.push_back(h);
  // A destination's open circuit breaker shows in readiness without failing it: the other
  // destinations and the sources still work, and its rows wait without spending attempts.
  for (Destination* d : destinations) {
    const std::string name = d->name();
    if (relay->CircuitState(name).empty()) continue;
    c.health.push_back({"circuit." + name,
                        [relay, name] { return relay->CircuitState(name) == "closed"; },
                        /*advisory=*/true});
  }
  return c;
}

// The inbox relay (inbox.relay.*): push rows of the inbox into the outbox; each forward wakes
// the outbox relay, so forwarded rows are claimed at once.
Result<std::optional<Component>> BuildInboxRelay(Plant& p) {
  if (p.inbox == nullptr) return std::optional<Component>();
  if (!p.config.inbox.relay.enabled) {
    log::Info("inbox.relay.enabled is false: push rows stay in the inbox.");
    return std::optional<Component>();
  }
  InboxRelayOptions options = InboxRelayOptions::FromConfig(p.config);
  for (const auto& [name, source] : p.config.sources) {
    QB_ASSIGN_OR_RETURN(sources::SourceCommon common, sources::BindSourceCommon(source));
    options.topic_templates[name] = common.topic;
  }
  options.on_forwarded = [relay = p.relay.get()] { relay->Wake(); };
  options.tracer = p.tracer;
  QB_ASSIGN_OR_RETURN(p.inbox_relay,
                      InboxRelay::Create(std::move(options), p.inbox, p.inbox, &p.metrics));
  InboxRelay* r = p.inbox_relay.get();
  // Healthy while it cycles and its last cycle succeeded (a database outage fails them).
  const double bound_s = CycleBound(p.config.inbox.relay.poll_interval_ms);
  return std::make_optional(Component{"inbox-relay",
                                      [r] { return r->Start(); },
                                      [r] { r->Stop(); },
                                      {{"inbox-relay", [r, bound_s] {
                                          return r->LastCycleOk() &&
                                                 r->SecondsSinceLastCycle() < bound_s;
                                        }}}});
}

// Change capture (outbox.capture.enabled; QueueBox reference Appendix A): wakes the poller from
// the database's log; a fault stops capture, never delivery.
Result<std::optional<Component>> BuildCapture(Plant& p) {
  Relay* relay = p.relay.get();
  QB_ASSIGN_OR_RETURN(p.capture, OpenChangeCapture(p.config.database, p.config.outbox.capture,
                                                   [relay] { relay->Wake(); }));
  if (!p.capture) return std::optional<Component>();
  ChangeCapture* c = p.capture.get();
  p.metrics.SetCaptureProbe([c] {
    return Metrics::CaptureReading{c->healthy(), c->wakes(), c->slot_retained_bytes()};
  });
  return std::make_optional(
      Component{"change-capture",
                [c] { return c->Start(); },
                [c] { c->Stop(); },
                {{"outbox-capture", [c] { return c->healthy(); }, /*advisory=*/true}}});
}

// The LISTEN/NOTIFY wake-up (outbox.notify.enabled); polling stays the source of truth.
Result<std::optional<Component>> BuildListener(Plant& p) {
  if (!p.config.outbox.notify) return std::optional<Component>();
  Relay* relay = p.relay.get();
  QB_ASSIGN_OR_RETURN(p.listener,
                      OpenInsertListener(p.config.database, [relay] { relay->Wake(); }));
  if (!p.listener) return std::optional<Component>();
  InsertListener* l = p.listener.get();
  return std::make_optional(
      Component{"insert-listener", [l] { return l->Start(); }, [l] { l->Stop(); }, {}});
}

std::optional<Component> BuildRetention(Plant& p) {
  if (!p.config.retention.enabled) return std::nullopt;
  p.retention =
      std::make_unique<RetentionService>(p.store.get(), p.inbox, p.config.retention, &p.metrics);
  RetentionService* r = p.retention.get();
  return Component{"retention",
                   [r] { return r->Start(); },
                   [r] { r->Stop(); },
                   {{"retention-service", [r] { return r->Healthy(); }}}};
}

// The console's cluster-wide per-minute counts (admin/activity_recorder.h). Started before the
// relays, so it stops after them and records their last counts.
std::optional<Component> BuildActivityRecorder(Plant& p) {
  ConsoleQueries* console = p.store->console();
  if (console == nullptr) return std::nullopt;
  // A schema made by hand, or kept with database.migrate false, may lack V24's table: the console
  // then shows this replica's counts, and nothing warns every 30 s about a table never made.
  if (Status probe = console->Activity(1).status();
      !probe.ok() && probe.code() != StatusCode::kUnavailable) {
    log::Info(
        "The console's per-minute counts cover this replica only: queuebox_console_activity "
        "cannot be read (`queuebox migrate` creates it, V24)",
        {{"reason", SanitizeError(probe.message(), 300)}});
    return std::nullopt;
  }
  p.activity = std::make_unique<ActivityRecorder>(p.metrics.activity_window(), *console);
  ActivityRecorder* a = p.activity.get();
  return Component{"console-activity",
                   [a] {
                     a->Start();
                     return Status::Ok();
                   },
                   [a] { a->Stop(); },
                   {}};
}

Component BuildPendingGauges(Plant& p) {
  return Component{"pending-gauges",
                   [&p] {
                     p.metrics.StartPendingRefresher(
                         p.store.get(),
                         std::chrono::milliseconds(p.config.outbox.pending_gauge_interval_ms));
                     return Status::Ok();
                   },
                   [&p] { p.metrics.StopPendingRefresher(); },
                   {}};
}

// The sources' path into the inbox: a store that kept a new row wakes the inbox relay.
Status RequireInbox(Plant& p) {
  if (p.inbox == nullptr) {
    return FailedPrecondition("sources need the inbox table, which database " +
                              p.config.database.inbox_table + " does not have");
  }
  InboxRelay* r = p.inbox_relay.get();
  p.intake = std::make_unique<sources::WakingIntake>(
      p.inbox, r == nullptr ? std::function<void()>() : [r] { r->Wake(); });
  return Status::Ok();
}

// HTTP sources: POST <inbox.basePath><path> on the data port, stored through the inbox.
Result<std::optional<Component>> BuildWebhooks(Plant& p) {
  sources::WebhookOptions options;
  options.transforms = p.source_transforms.get();
  // SQLite has one writer; PostgreSQL commits groups on a few connections of the pool.
  options.writers =
      p.config.database.type == "sqlite" ? 1 : std::clamp(p.config.database.pool_size / 3, 1, 4);
  QB_ASSIGN_OR_RETURN(
      p.webhooks, sources::WebhookSources::Create(p.config, p.intake.get(), &p.metrics, options));
  for (const std::string& route : p.webhooks->Routes()) {
    log::Info("An HTTP source is listening.", {{"route", route}});
  }
  sources::WebhookSources* w = p.webhooks.get();
  return std::make_optional(Component{"http-sources", {}, [w] { w->Stop(); }, {}});
}

// Broker sources (rabbitmq, kafka, nats): each consumes on its own threads into the inbox.
Result<std::vector<Component>> BuildBrokerSources(Plant& p) {
  sources::BrokerSourceContext context;
  context.intake = p.intake.get();
  context.observer = &p.metrics;
  context.transforms = p.source_transforms.get();
  context.max_error_body_bytes = p.config.http.max_error_body_bytes;
  QB_ASSIGN_OR_RETURN(p.broker_sources, sources::CreateBrokerSources(p.config, context));
  std::vector<Component> out;
  for (const auto& b : p.broker_sources) {
    sources::BrokerSource* s = b.get();
    out.push_back(
        Component{s->component(),
                  [s] {
                    QB_RETURN_IF_ERROR(s->Start());
                    log::Info("A broker source is consuming.", {{"source", s->component()}});
                    return Status::Ok();
                  },
                  [s] { s->Stop(); },
                  {{s->component(), [s] { return s->healthy(); }}}});
  }
  return out;
}

// Last to start, first to stop: tells systemd (Type=notify, packaging/queuebox.service) the
// relay serves and claims; on stop, that it stops, and drains HTTP (new requests get 503).
Component BuildServiceManager(Plant& p) {
  return Component{"service-manager",
                   [&p] {
                     const std::string port = std::to_string(p.admin->data_port());
                     log::Info("QueueBox C++ is delivering",
                               {{"batch_size", std::to_string(p.config.outbox.batch_size)},
                                {"concurrency", std::to_string(p.config.outbox.concurrency)},
                                {"routes", std::to_string(p.config.routes.size())},
                                {"http_port", port}});
                     NotifyServiceManager("READY=1\nSTATUS=Delivering; HTTP port " + port);
                     return Status::Ok();
                   },
                   [&p] {
                     NotifyServiceManager("STOPPING=1");
                     p.admin->StartDraining();
                   },
                   {}};
}

// The HTTP surface, with the health entries of every other component.
Result<Component> BuildAdmin(Plant& p, const std::vector<Component>& others) {
  AdminServerDeps deps;
  deps.store = p.store.get();
  deps.inbox = p.inbox;
  deps.metrics = &p.metrics;
  deps.console = p.store->console();
  deps.replicas = p.store->replica_membership();
  for (const Component& c : others) {
    deps.components.insert(deps.components.end(), c.health.begin(), c.health.end());
  }
  deps.transform_test = MakeTransformTestHandler(p.config);
  if (sources::WebhookSources* w = p.webhooks.get()) {
    deps.extra_data_routes = [w](httplib::Server& server) { w->Register(server); };
    deps.is_inbox_route = [w](std::string_view path) { return w->Serves(path); };
  }
  QB_ASSIGN_OR_RETURN(p.admin, AdminServer::Create(p.config, std::move(deps)));
  AdminServer* admin = p.admin.get();
  return Component{"admin-server",
                   [admin] { return admin->Start(); },
                   [admin] { admin->Stop(std::chrono::milliseconds(2000)); },
                   {}};
}

void Add(std::vector<Component>& list, std::optional<Component> c) {
  if (c) list.push_back(std::move(*c));
}

}  // namespace

Result<std::vector<Component>> BuildComponents(Plant& p) {
  std::vector<Component> list;  // start order, without the two built last
  std::optional<Component> tracer = BuildTracer(p);
  Add(list, BuildActivityRecorder(p));
  QB_ASSIGN_OR_RETURN(Component relay, BuildOutboxRelay(p));
  list.push_back(std::move(relay));
  QB_ASSIGN_OR_RETURN(std::optional<Component> inbox_relay, BuildInboxRelay(p));
  Add(list, std::move(inbox_relay));
  QB_ASSIGN_OR_RETURN(std::optional<Component> listener, BuildListener(p));
  Add(list, std::move(listener));
  QB_ASSIGN_OR_RETURN(std::optional<Component> capture, BuildCapture(p));
  Add(list, std::move(capture));
  Add(list, BuildRetention(p));
  list.push_back(BuildPendingGauges(p));
  std::optional<Component> webhooks;
  if (!p.config.sources.empty()) {
    QB_RETURN_IF_ERROR(RequireInbox(p));
    QB_ASSIGN_OR_RETURN(webhooks, BuildWebhooks(p));
    QB_ASSIGN_OR_RETURN(std::vector<Component> brokers, BuildBrokerSources(p));
    for (Component& b : brokers) list.push_back(std::move(b));
  }
  list.push_back(BuildServiceManager(p));
  QB_ASSIGN_OR_RETURN(Component admin, BuildAdmin(p, list));
  list.insert(list.begin(), std::move(admin));
  if (webhooks) list.insert(list.begin(), std::move(*webhooks));
  if (tracer) list.insert(list.begin(), std::move(*tracer));  // stopped last
  return list;
}

Status StartComponents(std::vector<Component>& list) {
  for (size_t i = 0; i < list.size(); ++i) {
    Status s = list[i].start ? list[i].start() : Status::Ok();
    if (!s.ok()) {
      std::vector<Component> started(std::make_move_iterator(list.begin()),
                                     std::make_move_iterator(list.begin() + i));
      StopComponents(started);
      list.clear();
      return s;
    }
  }
  return Status::Ok();
}

void StopComponents(std::vector<Component>& list) {
  for (auto it = list.rbegin(); it != list.rend(); ++it) {
    if (it->stop) it->stop();
  }
}

}  // namespace queuebox::app
