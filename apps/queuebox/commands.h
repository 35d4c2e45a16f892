// commands.h: the subcommands of the queuebox binary. Each returns the process exit code:
// 0 OK, 1 failed, 2 usage (QueueBox reference §13.5).
#pragma once

#include <csignal>
#include <optional>
#include <string>
#include <vector>

namespace queuebox::app {

struct GlobalOptions {
  std::string config_file;  // --config; empty: QUEUEBOX_CONFIG_FILE
};

struct RunOptions {
  bool until_idle = false;  // stop once nothing is claimable and nothing in flight
  int64_t idle_timeout_ms = 60000;
};

struct ProbeOptions {
  std::string path = "/health/ready";
  int64_t timeout_ms = 5000;  // connect and read, each
};

struct ReplayOptions {
  std::string table = "outbox";  // outbox | inbox
  std::vector<std::string> ids, topics, sources;
  std::string topic, destination, source, created_after, created_before;
};

struct VerifyOptions {
  std::string since, topic, key;  // filters; empty: none
  std::string received;           // --received FILE of `queuebox receive`; empty: none
  std::string ordering;           // --ordering; empty: outbox.ordering of the configuration
  int64_t stall_threshold_s = 300;
  int max_rows = 20;
  bool json = false;
};

struct ReceiveOptions {
  std::string listen = "127.0.0.1:8080";  // host:port
  std::string out;                        // JSON lines appended here
};

int Run(const GlobalOptions& global, const RunOptions& options, const sigset_t& stop_signals);
int Migrate(const GlobalOptions& global, std::optional<int> baseline);
int CheckConfig(const GlobalOptions& global);
int ShowStatus(const GlobalOptions& global, bool json);
int Replay(const GlobalOptions& global, const ReplayOptions& options);
// `table`: outbox | inbox.
int DeadList(const GlobalOptions& global, bool json, int limit, const std::string& table);
int Envelope(const std::string& path, bool canonical);
// Checks the outbox's invariants: 0 all hold, 1 one is broken, 2 they cannot be checked.
int Verify(const GlobalOptions& global, const VerifyOptions& options);
// An HTTP destination stand-in: answers 204 and records each delivery until a stop signal.
int Receive(const ReceiveOptions& options, const sigset_t& stop_signals);
// GET options.path from the relay of this configuration: 0 on 200, else 1 (a health check).
int Probe(const GlobalOptions& global, const ProbeOptions& options);

}  // namespace queuebox::app
