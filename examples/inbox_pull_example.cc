// inbox_pull_example.cc: consume QueueBox's inbox in pull mode (docs/sdk.md, "Consuming the inbox
// (pull)").
//
//   inbox_pull_example <postgresql://... | sqlite-file> [--until-idle]
//
// Works the messages of the pull source `orders` (a source with `consumption: pull` in
// queuebox.yml) from the inbox table QueueBox migrated. Each message is handled in a transaction:
// the handler records the order in `handled_orders` (keyed by source and idempotency key, so a
// redelivery changes nothing) and the worker completes the message in the same transaction.
// SIGINT / SIGTERM stop the worker (running handlers get the 30 s grace); --until-idle stops it
// after the first claim that finds nothing.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "queuebox/inbox/database.h"
#include "queuebox/inbox/pull_worker.h"

using queuebox::Status;
using queuebox::inbox::ConnectionFactory;
using queuebox::inbox::Dialect;
using queuebox::inbox::HandlerContext;
using queuebox::inbox::LogLevel;
using queuebox::inbox::Message;
using queuebox::inbox::PullOptions;
using queuebox::inbox::PullWorker;
using queuebox::inbox::SqlValue;
using queuebox::inbox::Transaction;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <postgresql://... | sqlite-file> [--until-idle]\n", argv[0]);
    return 2;
  }
  const std::string target = argv[1];
  const bool until_idle = argc > 2 && std::string(argv[2]) == "--until-idle";
  std::shared_ptr<ConnectionFactory> database = target.rfind("postgres", 0) == 0
                                                    ? queuebox::inbox::PostgresConnections(target)
                                                    : queuebox::inbox::SqliteConnections(target);
  const bool pg = database->dialect() == Dialect::kPostgreSQL;

  // The application's own table, written in the handler's transaction.
  auto setup = database->Open();
  if (!setup.ok()) {
    std::fprintf(stderr, "%s\n", setup.status().message().c_str());
    return 1;
  }
  auto created = (*setup)->Execute(
      "CREATE TABLE IF NOT EXISTS handled_orders (source TEXT NOT NULL, "
      "idempotency_key TEXT NOT NULL, payload TEXT NOT NULL, "
      "PRIMARY KEY (source, idempotency_key))");
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().message().c_str());
    return 1;
  }

  PullOptions options;
  options.source = "orders";
  options.logger = [](LogLevel, const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
  };
  PullWorker* running = nullptr;
  if (until_idle) options.on_idle = [&](int64_t) { running->Stop(); };

  auto worker = PullWorker::Create(
      database, options,
      [pg](const Message& message, Transaction& tx, const HandlerContext&) -> Status {
        const std::vector<SqlValue> row = {message.source, message.idempotency_key,
                                           message.payload};
        auto inserted = tx.Execute(pg ? "INSERT INTO handled_orders VALUES ($1, $2, $3) "
                                        "ON CONFLICT DO NOTHING"
                                      : "INSERT OR IGNORE INTO handled_orders VALUES (?1, ?2, ?3)",
                                   row);
        if (!inserted.ok()) return inserted.status();  // rolled back, then retried
        std::printf("handled %s (attempt %d)\n", message.idempotency_key.c_str(), message.attempt);
        return Status::Ok();  // the worker completes the message in `tx`, then commits
      });
  if (!worker.ok()) {
    std::fprintf(stderr, "%s\n", worker.status().message().c_str());
    return 1;
  }
  running = worker->get();

  // SIGINT / SIGTERM -> Stop(), from a thread that waits for them.
  static sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([running] {
    int signal = 0;
    sigwait(&signals, &signal);
    running->Stop();
  }).detach();

  const Status status = (*worker)->Run();
  const PullWorker::Stats stats = (*worker)->stats();
  std::printf("completed %lld, retried %lld, dead %lld\n", static_cast<long long>(stats.completed),
              static_cast<long long>(stats.retried), static_cast<long long>(stats.dead));
  return status.ok() ? 0 : 1;
}
