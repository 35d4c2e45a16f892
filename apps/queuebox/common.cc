#include "common.h"

#include <cstdlib>
#include <iostream>
#include <string_view>

#include "config/load.h"
#include "core/log.h"
#include "core/redaction.h"
#include "core/startup.h"
#include "destinations/registry.h"
#include "store/open_store.h"

namespace queuebox::app {

std::optional<Config> LoadOrExplain(const GlobalOptions& global) {
  auto config = LoadConfig(ProcessConfigSource(global.config_file));
  if (!config.ok()) {
    std::cerr << config.status().message() << "\n";
    return std::nullopt;
  }
  return std::move(config).value();
}

std::string DescribeOrigin(const ConfigOrigin& origin) {
  std::string out;
  if (!origin.file.empty()) out = "file " + origin.file;
  if (origin.variables > 0) {
    out += (out.empty() ? "" : " and ") + std::to_string(origin.variables) +
           " QUEUEBOX_* variable" + (origin.variables == 1 ? "" : "s");
  }
  if (!origin.skipped.empty()) {
    out += " (QUEUEBOX_CONFIG_FILE names " + origin.skipped + ", which does not exist)";
  }
  return out;
}

int StartFailed(const Status& status) {
  std::string reason = SanitizeError(status.message(), 2000);
  log::Error("QueueBox did not start", {{"reason", reason}});
  std::cerr << "QueueBox did not start. Reason: " << reason << "\n";
  return 1;
}

std::optional<std::map<std::string, std::unique_ptr<Destination>>> BuildDestinations(
    const Config& config, std::function<void(int)> on_http_response) {
  DestinationContext context;
  context.max_error_body_bytes = config.http.max_error_body_bytes;
  context.on_http_response = std::move(on_http_response);
  context.block_private_addresses = config.http.block_private_addresses;
  std::map<std::string, std::unique_ptr<Destination>> out;
  for (const auto& [name, dc] : config.destinations) {
    const DestinationType* type = FindDestinationType(dc.type);
    if (type == nullptr) {
      StartFailed(InvalidArgument("destinations." + name + ".type: unknown type '" + dc.type +
                                  "'; set one of " + KnownDestinationTypes()));
      return std::nullopt;
    }
    auto d = type->create(dc, context);
    if (!d.ok()) {
      StartFailed(Status(d.status().code(),
                         "destination '" + name + "' (" + dc.type + "): " + d.status().message()));
      return std::nullopt;
    }
    if (Status s = (*d)->Start(); !s.ok()) {
      StartFailed(Status(s.code(), "destination '" + name + "' (" + dc.type +
                                       ") could not start: " + s.message()));
      return std::nullopt;
    }
    out.emplace(name, std::move(d).value());
  }
  return out;
}

std::unique_ptr<OutboxStore> OpenAndWait(const Config& config) {
  auto store = OpenStore(config.database);
  if (!store.ok()) {
    StartFailed(store.status());
    return nullptr;
  }
  Status db = WaitForDatabase(**store, config.database.startup_timeout_ms);
  if (!db.ok()) {
    StartFailed(db);
    return nullptr;
  }
  return std::move(store).value();
}

void InitRelayLog(const Config& config) {
  const char* stream = std::getenv(kLogStreamVar);
  log::Init(config.logging.format, config.logging.level,
            stream != nullptr && std::string_view(stream) == "stdout" ? log::Stream::kStdout
                                                                      : log::Stream::kStderr);
}

void LogMigrations(const MigrateReport& report) {
  if (report.adopted_flyway) {
    log::Info(
        "Adopted the migration history QueueBox recorded in flyway_schema_history: " +
            *report.adopted_flyway + "; recorded as baseline V" +
            std::to_string(report.adopted_version) + " in queuebox_schema_history.",
        {{"flyway", *report.adopted_flyway}, {"baseline", std::to_string(report.adopted_version)}});
  }
  std::string versions;
  for (int v : report.applied) versions += (versions.empty() ? "V" : ", V") + std::to_string(v);
  log::Info("Applied " + std::to_string(report.applied.size()) +
            " migration(s): " + (versions.empty() ? "none" : versions) + ".");
}

}  // namespace queuebox::app
