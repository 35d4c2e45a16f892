// common.h: start-up steps shared by the subcommands.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "queuebox/config.h"
#include "queuebox/destination.h"
#include "queuebox/store.h"

namespace queuebox::app {

// Loads the configuration; on failure prints the whole problem list to stderr, returns nullopt.
std::optional<Config> LoadOrExplain(const GlobalOptions& global);
// "file /etc/queuebox/queuebox.yml and 3 QUEUEBOX_* variables": where `origin` came from.
std::string DescribeOrigin(const ConfigOrigin& origin);
// Creates and starts every configured destination. A destination that cannot start stops the
// start with a message naming it (scenario S11); returns nullopt after printing it.
// `on_http_response` receives every HTTP response status (metrics); optional.
std::optional<std::map<std::string, std::unique_ptr<Destination>>> BuildDestinations(
    const Config& config, std::function<void(int)> on_http_response = {});
// Opens the store and waits for the database (database.startupTimeoutMs); prints on failure.
std::unique_ptr<OutboxStore> OpenAndWait(const Config& config);
// Prints "QueueBox did not start. Reason: ..." (redacted) to stderr and the log; returns 1.
int StartFailed(const Status& status);
void LogMigrations(const MigrateReport& report);
// Starts the log of `run` and `migrate` with the configuration's format and level, on stdout
// when QUEUEBOX_CPP_LOG_STREAM is "stdout" (the container image), else on stderr.
void InitRelayLog(const Config& config);

}  // namespace queuebox::app
