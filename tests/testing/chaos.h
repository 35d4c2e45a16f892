// chaos.h: the parts of the chaos runs (tests/e2e/chaos_e2e_test.cc, verify_e2e_test.cc):
//   RowProducer     threads inserting outbox rows over many keys, one writer per key, through a
//                   database restart (a lost connection is reopened and its row inserted again)
//   ReplicaSet      n `queuebox run` processes; one killed with SIGKILL and replaced at a time
//   RunChaos        for a while, a random replica killed every 1-3 s while timed events (a
//                   database or destination restart) run on a second thread
//   CheckDeliveries every row received, duplicates counted, per key the first delivery of each
//                   row in `sequence` order
//
// Thread-safety: RowProducer's counters may be read from any thread; the rest belong to the
// thread that made them (RunChaos runs the events on a thread of its own).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "queuebox/status.h"
#include "testing/process.h"

namespace queuebox::testing {

// The first column of the first row of `sql` on a connection of its own; nullopt when the
// database does not answer (it may be restarting) or the query fails.
std::optional<int64_t> QueryInt(const std::string& url, const std::string& sql);

// Runs `sql` (several statements allowed) on a connection of its own; false (and a test failure)
// when it fails.
bool ExecSql(const std::string& url, const std::string& sql);

struct ProducerOptions {
  std::string url;  // libpq URI of the database holding `outbox`
  std::string topic = "chaos";
  int threads = 1;
  int keys = 20;            // key-0 .. key-<keys-1>; key-i belongs to thread i % threads
  int max_rows = 0;         // rows in all, split between the threads; 0: until Stop()
  int rows_per_second = 0;  // in all; 0: as fast as the database takes them
};

// Inserts rows `{"key": "key-<i>", "n": <n>}` (n counts per key) one transaction each, each
// thread on its own connection. A statement that fails because the connection is gone is tried
// again on a new connection until it succeeds (a fast shutdown may have committed it first:
// then the row is there twice, as two rows); any other failure fails the test.
class RowProducer {
 public:
  explicit RowProducer(ProducerOptions options);  // starts the threads
  ~RowProducer();                                 // Stop()
  RowProducer(const RowProducer&) = delete;
  RowProducer& operator=(const RowProducer&) = delete;

  // Waits until every thread has inserted its share of max_rows (max_rows > 0).
  void Join();
  // Ends the threads after their current row (retrying a row ends too) and joins them.
  void Stop();
  int inserted() const { return inserted_.load(); }
  int reconnects() const { return reconnects_.load(); }

 private:
  void Produce(int thread);

  ProducerOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<int> inserted_{0}, reconnects_{0};
  std::vector<std::thread> threads_;
};

// `count` replicas of `binary` (`--config <config> run`), each logging to
// <log_dir>/replica<n>.log, n counting every process started. Each gets a free server.httpPort of
// its own (QUEUEBOX_SERVER_HTTPPORT): replicas on one port would refuse to start.
class ReplicaSet {
 public:
  ReplicaSet(std::string binary, std::string config, std::string log_dir, int count);
  ~ReplicaSet();  // SIGKILL to whatever still runs

  // SIGKILL to replica `index`, reaped, and a new process started in its place. A replica that
  // had already exited is noted in exited_early().
  void KillAndReplace(size_t index);
  // The same for a replica picked by `random`; returns its index.
  size_t KillOneAndReplace(std::mt19937& random);
  // SIGTERM to every replica; the exit codes (nullopt: still running after `timeout`, killed).
  std::vector<std::optional<int>> StopAll(std::chrono::seconds timeout);
  int started() const { return started_; }
  // The logs of the replicas found exited when they were to be killed (they should not exit).
  const std::vector<std::string>& exited_early() const { return exited_early_; }
  // The last `bytes` of each log of the current replicas, for a failure message.
  std::string LogTails(size_t bytes = 2000) const;

 private:
  void StartOne(size_t slot);

  std::string binary_, config_, log_dir_;
  int started_ = 0;
  std::vector<std::unique_ptr<ChildProcess>> current_;
  std::vector<std::string> current_logs_;
  std::vector<std::string> exited_early_;
};

// A timed step of a chaos run: `action` at `at` after the start (a restart of a server, or one
// half of it).
struct ChaosEvent {
  std::chrono::milliseconds at;
  std::string name;
  std::function<Status()> action;
};

struct ChaosReport {
  int kills = 0;
  std::vector<std::string> timeline;  // "12.3 s kill replica 1", "20.0 s stop receiver: ok"
  std::vector<std::string> failures;  // events whose action failed, with the status
  std::string Timeline() const;
};

// For `duration`: every 1-3 s (uniform, from `random`) a random replica is killed with SIGKILL
// and replaced; `events` run in their order at their offsets on a thread of their own (a slow
// event delays the ones after it, not the kills). Returns when both are done.
ChaosReport RunChaos(ReplicaSet& replicas, std::chrono::seconds duration,
                     std::vector<ChaosEvent> events, std::mt19937& random);

struct OutboxRowRef {
  std::string id, key, topic;
  int64_t sequence = 0;
};

// The rows of `topic` in `sequence` order.
std::vector<OutboxRowRef> ReadRows(const std::string& url, const std::string& topic);

struct DeliveryCheck {
  size_t rows = 0;
  size_t deliveries = 0;
  size_t received_rows = 0;                   // rows delivered at least once
  size_t duplicates = 0;                      // deliveries past the first of a row
  size_t max_copies = 0;                      // the most deliveries of one row
  size_t unknown = 0;                         // deliveries of ids that are no row of the topic
  std::vector<std::string> missing;           // ids of rows never delivered
  std::vector<std::string> order_violations;  // "key-3: seq 40 first delivered before seq 38"
  std::string Summary() const;
};

// `delivered_ids` in arrival order against `rows` (ReadRows).
DeliveryCheck CheckDeliveries(const std::vector<OutboxRowRef>& rows,
                              const std::vector<std::string>& delivered_ids);

// Writes the deliveries as a `queuebox receive` record (one JSON line per delivery, in arrival
// order), for `queuebox verify --received`.
void WriteReceivedRecord(const std::string& path, const std::vector<OutboxRowRef>& rows,
                         const std::vector<std::string>& delivered_ids);

}  // namespace queuebox::testing
