// nats_connect.h: connection options shared by the nats destination and the nats source
// (issue 15): the server list, the client name, the connect timeout, reconnecting forever with
// capped jittered backoff (core/backoff.h) and the credentials (username + password or token).
//
// Thread-safety: the functions are thread-safe; a natsOptions belongs to its caller.
#pragma once

#include <nats/nats.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/status.h"

namespace queuebox {

struct NatsConnectSettings {
  std::string client_name;  // shown by the server: "queuebox-<name>"
  std::string servers;      // comma list of nats:// URLs
  int64_t connect_timeout_ms = 10000;
  std::optional<std::string> username;
  std::optional<std::string> password;  // secret
  std::optional<std::string> token;     // secret
};

// The URLs of a comma list, trimmed, blanks dropped.
std::vector<std::string> SplitNatsServers(std::string_view list);

// New options for `settings` (the caller destroys them with natsOptions_Destroy): the servers,
// name, timeout, reconnecting forever with ReconnectDelayMs(attempts, 250, 30000) between rounds
// over the list, and the credentials. kInternal naming the nats.c status when an option is
// refused (never a credential).
Result<natsOptions*> NewNatsOptions(const NatsConnectSettings& settings);

}  // namespace queuebox
