// e2e_run.h: the end-to-end half of the broker-source benches (broker -> inbox -> outbox -> HTTP):
// runs `queuebox run` with a YAML configuration until the outbox holds `expected` sent rows, and
// times it. Header-only; bench/ only.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "queuebox/store.h"

namespace queuebox::bench {

struct E2eTimes {
  bool ok = false;
  std::string error;
  double seconds_from_start = 0;       // process start -> the last row sent
  double seconds_from_first_sent = 0;  // the first row sent -> the last (the flowing rate)
};

// `yaml` is written to a temporary file given to the binary as QUEUEBOX_CONFIG_FILE. `store`
// opens the database the configuration names (its Stats() counts the sent rows every 50 ms).
// Gives up after `timeout`. The process is stopped with SIGTERM at the end.
inline E2eTimes RunQueueBoxUntilSent(const std::string& binary, const std::string& yaml,
                                     OutboxStore& store, int64_t expected,
                                     std::chrono::seconds timeout = std::chrono::seconds(600)) {
  using Clock = std::chrono::steady_clock;
  E2eTimes times;
  const std::string path = "/tmp/queuebox_e2e_bench." + std::to_string(getpid()) + ".yml";
  std::ofstream(path) << yaml;
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("QUEUEBOX_CONFIG_FILE", path.c_str(), 1);
    execl(binary.c_str(), binary.c_str(), "run", static_cast<char*>(nullptr));
    _exit(127);
  }
  Clock::time_point first{};
  int64_t sent = 0;
  while (sent < expected) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (Clock::now() - start > timeout) {
      times.error = "timed out with " + std::to_string(sent) + " rows sent";
      break;
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      times.error = "queuebox exited early";
      std::remove(path.c_str());
      return times;
    }
    auto stats = store.Stats();
    if (!stats.ok()) continue;
    sent = stats->rows_by_state["sent"];
    if (first == Clock::time_point{} && sent > 0) first = Clock::now();
  }
  const auto end = Clock::now();
  kill(pid, SIGTERM);
  waitpid(pid, nullptr, 0);
  std::remove(path.c_str());
  times.ok = times.error.empty();
  times.seconds_from_start = std::chrono::duration<double>(end - start).count();
  times.seconds_from_first_sent = std::chrono::duration<double>(end - first).count();
  return times;
}

}  // namespace queuebox::bench
