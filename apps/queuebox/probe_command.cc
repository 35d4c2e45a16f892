// `queuebox probe`: the container health check without a shell or curl. Asks the relay that
// runs with the same configuration for a health route (GET /health/ready by default) on the port
// that serves it (server.managementPort when set, else server.httpPort) and exits 0 on 200,
// 1 otherwise.
#include <httplib.h>

#include <iostream>

#include "commands.h"
#include "common.h"

namespace queuebox::app {
namespace {

// The address to ask: the wildcard binds are reached on loopback, anything else as bound.
std::string ProbeHost(const std::string& bound) {
  if (bound.empty() || bound == "0.0.0.0") return "127.0.0.1";
  if (bound == "::" || bound == "[::]") return "::1";
  return bound;
}

}  // namespace

int Probe(const GlobalOptions& global, const ProbeOptions& options) {
  auto config = LoadOrExplain(global);
  if (!config) return 1;
  const ServerConfig& server = config->server;
  const std::string host = ProbeHost(server.address);
  const int port = server.management_port.value_or(server.http_port);
  httplib::Client client(host, port);
  const auto timeout = std::chrono::milliseconds(options.timeout_ms);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  const std::string target = "http://" + host + ":" + std::to_string(port) + options.path;
  auto response = client.Get(options.path);
  if (!response) {
    std::cout << target << ": no answer (" << httplib::to_string(response.error()) << ")\n";
    return 1;
  }
  std::cout << target << ": " << response->status << " " << response->body << "\n";
  return response->status == 200 ? 0 : 1;
}

}  // namespace queuebox::app
