#include "destinations/nats/nats_connect.h"

#include "core/backoff.h"

namespace queuebox {

std::vector<std::string> SplitNatsServers(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

Result<natsOptions*> NewNatsOptions(const NatsConnectSettings& settings) {
  natsOptions* opts = nullptr;
  if (natsOptions_Create(&opts) != NATS_OK) return Internal("natsOptions_Create failed");
  std::vector<std::string> servers = SplitNatsServers(settings.servers);
  std::vector<const char*> server_ptrs;
  for (const std::string& s : servers) server_ptrs.push_back(s.c_str());
  natsStatus s = natsOptions_SetServers(opts, server_ptrs.data(), static_cast<int>(servers.size()));
  if (s == NATS_OK) s = natsOptions_SetName(opts, settings.client_name.c_str());
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, settings.connect_timeout_ms);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);  // reconnect forever
  // Capped jittered backoff between rounds over the server list.
  if (s == NATS_OK) {
    s = natsOptions_SetCustomReconnectDelay(
        opts,
        [](natsConnection*, int attempts, void*) -> int64_t {
          return ReconnectDelayMs(attempts, 250, 30000);
        },
        nullptr);
  }
  if (s == NATS_OK && settings.username) {
    s = natsOptions_SetUserInfo(opts, settings.username->c_str(),
                                settings.password.value_or("").c_str());
  }
  if (s == NATS_OK && settings.token) s = natsOptions_SetToken(opts, settings.token->c_str());
  if (s != NATS_OK) {
    natsOptions_Destroy(opts);
    return Internal(std::string("cannot set the NATS connection options: ") +
                    natsStatus_GetText(s));
  }
  return opts;
}

}  // namespace queuebox
