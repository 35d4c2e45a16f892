// pull_bench: inbox pull consumption on PostgreSQL (bench/README.md, "Pull consumption").
//
//   pull_bench --url postgresql://postgres@127.0.0.1:54329/postgres [--messages 20000]
//              [--workers 1,2,4] [--batch 10] [--concurrency 10] [--aggregates 0] [--write]
//
// For each worker count: a fresh database migrated with the bundled migrations, --messages pull
// rows of source `bench` (payload {"n": i}; with --aggregates K, aggregate 'agg-<i mod K>', else
// none), then that many PullWorkers (each its own connections) drain it; the handler does
// nothing, or with --write inserts one business row in the message's transaction. Prints one
// JSON line per run: messages/s completed and claims/s (claim statements, empty ones included).
#include <libpq-fe.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "queuebox/inbox/pull_worker.h"
#include "store/migrate.h"

namespace {

using queuebox::Status;
namespace inbox = queuebox::inbox;

bool Exec(PGconn* conn, const std::string& sql) {
  PGresult* r = PQexec(conn, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) std::fprintf(stderr, "%s\n  in: %.200s\n", PQresultErrorMessage(r), sql.c_str());
  PQclear(r);
  return ok;
}

// admin_url with its database replaced by `db` (postgresql://user@host:port/<db>[?params]).
std::string WithDatabase(const std::string& admin_url, const std::string& db) {
  std::string base = admin_url, query;
  if (auto q = base.find('?'); q != std::string::npos) {
    query = base.substr(q);
    base.resize(q);
  }
  const auto slash = base.find('/', base.find("//") + 2);
  return (slash == std::string::npos ? base : base.substr(0, slash)) + "/" + db + query;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("pull_bench");
  std::string url;
  int messages = 20000, batch = 10, concurrency = 10, aggregates = 0;
  std::vector<int> workers = {1, 2, 4};
  bool write = false;
  app.add_option("--url", url, "admin libpq URL (CREATE DATABASE)")->required();
  app.add_option("--messages", messages);
  app.add_option("--workers", workers)->delimiter(',');
  app.add_option("--batch", batch);
  app.add_option("--concurrency", concurrency);
  app.add_option("--aggregates", aggregates);
  app.add_flag("--write", write, "the handler inserts a business row");
  CLI11_PARSE(app, argc, argv);

  PGconn* admin = PQconnectdb(url.c_str());
  if (PQstatus(admin) != CONNECTION_OK) {
    std::fprintf(stderr, "%s", PQerrorMessage(admin));
    return 1;
  }
  for (const int w : workers) {
    const std::string name = "qb_pull_bench_" + std::to_string(getpid()) + "_" + std::to_string(w);
    if (!Exec(admin, "CREATE DATABASE " + name)) return 1;
    const std::string db_url = WithDatabase(url, name);
    PGconn* conn = PQconnectdb(db_url.c_str());
    for (const auto& m : queuebox::store::PostgresMigrations()) {
      if (!Exec(conn, m.sql)) return 1;
    }
    const std::string aggregate =
        aggregates > 0 ? "'agg-' || (i % " + std::to_string(aggregates) + ")" : "NULL";
    if (!Exec(conn, "CREATE TABLE business (k TEXT PRIMARY KEY)") ||
        !Exec(conn,
              "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, "
              "scheduled_at) SELECT 'bench', 'k-' || i, " +
                  aggregate +
                  ", jsonb_build_object('n', i), 'pull', clock_timestamp() - INTERVAL '1 hour' + "
                  "i * INTERVAL '1 microsecond' FROM generate_series(1, " +
                  std::to_string(messages) + ") AS i") ||
        !Exec(conn, "VACUUM ANALYZE inbox")) {
      return 1;
    }

    std::atomic<int64_t> done = 0;
    std::vector<std::unique_ptr<inbox::PullWorker>> pool;
    for (int i = 0; i < w; ++i) {
      inbox::PullOptions o;
      o.source = "bench";
      o.batch_size = batch;
      o.max_concurrency = concurrency;
      o.poll_interval_ms = 50;
      auto worker = inbox::PullWorker::Create(
          inbox::PostgresConnections(db_url), o,
          [&](const inbox::Message& m, inbox::Transaction& tx,
              const inbox::HandlerContext&) -> Status {
            if (write) {
              auto r = tx.Execute("INSERT INTO business VALUES ($1)",
                                  std::vector<inbox::SqlValue>{m.idempotency_key});
              if (!r.ok()) return r.status();
            }
            ++done;
            return Status::Ok();
          });
      if (!worker.ok()) {
        std::fprintf(stderr, "%s\n", worker.status().message().c_str());
        return 1;
      }
      pool.push_back(std::move(*worker));
    }
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (auto& worker : pool) threads.emplace_back([&worker] { (void)worker->Run(); });
    // Wait until every message ran (bounded: 30 minutes).
    while (done.load() < messages &&
           std::chrono::steady_clock::now() - start < std::chrono::minutes(30)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (auto& worker : pool) worker->Stop();
    for (auto& t : threads) t.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t claims = 0, completed = 0;
    for (auto& worker : pool) {
      claims += worker->stats().claims;
      completed += worker->stats().completed;
    }
    std::ostringstream line;
    line << "{\"workers\": " << w << ", \"batch\": " << batch
         << ", \"concurrency\": " << concurrency << ", \"aggregates\": " << aggregates
         << ", \"write\": " << (write ? "true" : "false") << ", \"messages\": " << messages
         << ", \"completed\": " << completed << ", \"seconds\": " << seconds
         << ", \"messages_per_s\": " << completed / seconds << ", \"claims\": " << claims
         << ", \"claims_per_s\": " << claims / seconds << "}";
    std::printf("%s\n", line.str().c_str());
    std::fflush(stdout);
    pool.clear();
    PQfinish(conn);
    Exec(admin, "DROP DATABASE " + name + " WITH (FORCE)");
  }
  PQfinish(admin);
  return 0;
}
