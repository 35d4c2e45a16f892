// `queuebox run`: the relay process (QueueBox reference §13.6 start-up, §13.7 shutdown). The
// configuration, the transforms, the destinations and the store come first; then the components
// (components.h) start in order, and at a stop signal stop in reverse.
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

#include "commands.h"
#include "common.h"
#include "components.h"
#include "core/log.h"
#include "core/redaction.h"
#include "core/startup.h"
#include "transforms.h"

namespace queuebox::app {
namespace {

// Every transform compiles before anything connects (QueueBox reference §13.6 step 2), then
// the destinations are made; the engine loads only when a transform is configured.
Status PrepareDelivery(Plant& p) {
  QB_ASSIGN_OR_RETURN(p.delivery_transforms, BuildDeliveryTransforms(p.config));
  QB_ASSIGN_OR_RETURN(p.source_transforms, BuildSourceTransforms(p.config));
  std::vector<std::string> names;
  for (const auto& [name, dc] : p.config.destinations) names.push_back(name);
  p.metrics.ExportDestinations(names);
  if (p.config.retention.enabled) p.metrics.ExportCleanup("outbox");
  return Status::Ok();
}

// Waits for the database for up to `timeout_ms`; a signal meanwhile ends the start-up
// (`cancelled`, OK).
Status WaitForTheDatabase(Plant& p, int64_t timeout_ms, const sigset_t& stop_signals,
                          bool* cancelled) {
  std::atomic<bool> cancel{false}, db_done{false};
  std::thread signal_watch([&] {
    const timespec step{0, 100 * 1000 * 1000};
    while (!db_done.load()) {
      int sig = sigtimedwait(&stop_signals, nullptr, &step);
      if (sig == SIGTERM || sig == SIGINT) cancel = true;
    }
  });
  Status db = WaitForDatabase(*p.store, timeout_ms, &cancel);
  db_done = true;
  signal_watch.join();
  *cancelled = cancel.load();
  return *cancelled ? Status::Ok() : db;
}

// Migrations, the schema guards (QueueBox reference §3.6: a missing table or column stops the
// start with the statement that fixes it) and key affinity.
Status PrepareDatabase(Plant& p) {
  const Config& config = p.config;
  if (OutboxStore* pooled = p.store.get(); pooled->PoolStats()) {
    p.metrics.ExportConnectionPool("queuebox", [pooled] { return *pooled->PoolStats(); });
  }
  if (config.database.migrate) {
    QB_ASSIGN_OR_RETURN(MigrateReport report, p.store->Migrate(std::nullopt));
    LogMigrations(report);
  }
  QB_RETURN_IF_ERROR(p.store->CheckSchema());
  // outbox.ordering: strict (docs/claim.md, "Strict order"); a no-op on SQLite.
  if (config.outbox.ordering == "strict") QB_RETURN_IF_ERROR(p.store->EnableStrictOrdering());
  // A database without the inbox table (a schema made by hand for the outbox alone) runs without
  // the inbox relay.
  p.inbox = p.store->inbox();
  if (p.inbox != nullptr) {
    Status s = p.inbox->CheckSchema();
    if (s.code() == StatusCode::kNotFound) {
      log::Info("The database has no inbox table, so the inbox relay does not run.",
                {{"table", config.database.inbox_table}});
      p.inbox = nullptr;
    } else if (!s.ok()) {
      return s;
    }
  }
  // The attempt history (outbox.attemptHistory.enabled): a schema made by hand without its table
  // runs without it.
  if (config.outbox.attempt_history) {
    Status s = p.store->EnableAttemptHistory();
    if (s.code() == StatusCode::kUnavailable) return s;  // the connection, not the table
    p.attempt_history = s.ok();
    if (!s.ok()) {
      log::Warn("The attempt history is off: " + s.message(),
                {{"key", "outbox.attemptHistory.enabled"}});
    }
  }
  // Key affinity (outbox.keyAffinity.enabled): replicas split the keys through a heartbeat table.
  // A replica that stops claiming (dead, or every slot busy) drops out after the ttl and the
  // others take its keys; the ttl covers three poll intervals, at least 5 s. Off for
  // --until-idle: its "nothing left to claim" must mean the whole outbox, not this share.
  p.replicas = p.store->replica_membership();  // nullptr on SQLite
  if (config.outbox.key_affinity && p.replicas != nullptr && !p.options.until_idle) {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
    const int64_t poll = std::min<int64_t>(config.outbox.poll_interval_ms, INT64_MAX / 3);
    p.replicas->EnableKeyAffinity(std::max<int64_t>(5000, 3 * poll),
                                  std::string(host) + ":" + std::to_string(getpid()));
  }
  return Status::Ok();
}

// Waits for the database, then prepares it. A connection lost while preparing (PostgreSQL
// restarting under a replica that starts, scenarios.md) waits and prepares again, all within
// database.startupTimeoutMs; the steps are idempotent (migrations are recorded and locked).
Status ConnectAndPrepare(Plant& p, const sigset_t& stop_signals, bool* cancelled) {
  using StartupClock = std::chrono::steady_clock;
  const int64_t timeout_ms = p.config.database.startup_timeout_ms;
  const auto deadline = StartupClock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const int64_t left = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - StartupClock::now())
               .count());
    QB_RETURN_IF_ERROR(WaitForTheDatabase(p, left, stop_signals, cancelled));
    if (*cancelled) return Status::Ok();
    Status s = PrepareDatabase(p);
    if (s.ok() || s.code() != StatusCode::kUnavailable || StartupClock::now() >= deadline) {
      return s;
    }
    log::Warn("The database connection was lost during start-up; waiting for it again",
              {{"reason", SanitizeError(s.message(), 500)},
               {"startup_timeout_ms", std::to_string(timeout_ms)}});
  }
}

// Waits for a stop signal, or (--until-idle) for both relays to run dry.
void WaitForStop(Plant& p, const sigset_t& stop_signals) {
  const RunOptions& options = p.options;
  auto started = std::chrono::steady_clock::now();
  const timespec slice{0, 200 * 1000 * 1000};
  const timespec poll_only{0, 0};
  while (true) {
    int sig = sigtimedwait(&stop_signals, nullptr, options.until_idle ? &poll_only : &slice);
    if (sig == SIGTERM || sig == SIGINT) {
      log::Info("Stop signal received; shutting down", {{"signal", std::to_string(sig)}});
      return;
    }
    if (!options.until_idle) continue;
    // The inbox first: its forwards become outbox rows.
    bool inbox_idle =
        !p.inbox_relay || p.inbox_relay->WaitIdle(std::chrono::milliseconds(200)).ok();
    if (inbox_idle && p.relay->WaitIdle(std::chrono::milliseconds(200)).ok()) {
      log::Info("Nothing left to claim and nothing in flight; stopping (--until-idle)");
      return;
    }
    auto waited = std::chrono::steady_clock::now() - started;
    if (waited > std::chrono::milliseconds(options.idle_timeout_ms)) {
      log::Warn("--until-idle: the idle timeout passed; stopping",
                {{"idle_timeout_ms", std::to_string(options.idle_timeout_ms)}});
      return;
    }
  }
}

void LogStart(const Config& config) {
  InitRelayLog(config);
  log::Info("QueueBox C++ is starting", {{"version", QUEUEBOX_VERSION},
                                         {"database", config.database.type},
                                         {"configuration", DescribeOrigin(config.origin)}});
  if (!config.origin.skipped.empty()) {
    log::Warn(
        "QUEUEBOX_CONFIG_FILE names a file that does not exist; the configuration comes "
        "from the QUEUEBOX_* variables alone",
        {{"file", config.origin.skipped}});
  }
}

}  // namespace

int Run(const GlobalOptions& global, const RunOptions& options, const sigset_t& stop_signals) {
  auto config = LoadOrExplain(global);
  if (!config) return 1;
  LogStart(*config);
  Plant plant(*config, options);
  if (Status s = PrepareDelivery(plant); !s.ok()) return StartFailed(s);
  auto destinations =
      BuildDestinations(*config, [&plant](int status) { plant.metrics.OnHttpResponse(status); });
  if (!destinations) return 1;
  plant.destinations = std::move(*destinations);
  auto store = OpenStore(config->database);
  if (!store.ok()) return StartFailed(store.status());
  plant.store = std::move(store).value();
  bool cancelled = false;
  Status db = ConnectAndPrepare(plant, stop_signals, &cancelled);
  if (cancelled) {
    log::Info("Stop signal received during start-up; exiting");
    return 0;
  }
  if (!db.ok()) return StartFailed(db);

  auto built = BuildComponents(plant);
  if (!built.ok()) return StartFailed(built.status());
  std::vector<Component> components = std::move(built).value();
  if (Status s = StartComponents(components); !s.ok()) return StartFailed(s);
  WaitForStop(plant, stop_signals);
  // Shutdown (QueueBox reference §13.7): HTTP drains first (503), then the sources (what they
  // fetched and did not store stays unacknowledged and comes back), background work, resources.
  StopComponents(components);

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  log::Info("QueueBox C++ stopped",
            {{"abandoned", std::to_string(plant.abandoned)},
             {"max_rss_kb", std::to_string(usage.ru_maxrss)},
             {"jsonata_engine", TransformEngineLoaded() ? "loaded" : "not loaded"}});
  if (plant.abandoned > 0) {
    // Publishes still run on worker threads; the leases return their rows. Leave at once.
    std::fflush(nullptr);
    _exit(0);
  }
  return 0;
}

}  // namespace queuebox::app
