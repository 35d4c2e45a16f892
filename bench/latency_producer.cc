// latency_producer: inserts outbox rows at a steady rate, one row per transaction, for the
// latency benchmark (bench/latency_bench.sh). Every payload carries "ts": the insert time in
// Unix microseconds (clock_timestamp() of the database, same host), which bench_receiver turns
// into insert-to-receipt latency. Inserts follow a fixed schedule (row i at start + i / rate), so
// a slow insert is followed by catch-up inserts instead of a lower rate.
// Prints one JSON object: inserted rows, elapsed seconds, achieved rate and the schedule's lag.
//
//   latency_producer --url postgresql://127.0.0.1:5432/db --rate 1000 --seconds 10
#include <libpq-fe.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  CLI::App app{"outbox insert producer at a fixed rate"};
  std::string url;
  int rate = 1000;
  double seconds = 10;
  int keys = 100;
  app.add_option("--url", url)->required();
  app.add_option("--rate", rate, "inserts per second (each its own transaction)");
  app.add_option("--seconds", seconds);
  app.add_option("--keys", keys);
  CLI11_PARSE(app, argc, argv);

  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::fprintf(stderr, "latency_producer: %s", PQerrorMessage(conn));
    return 1;
  }
  const char* sql =
      "INSERT INTO outbox (topic, key, payload) VALUES ('bench.latency', $1, "
      "jsonb_build_object('ts', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, "
      "'i', $2::bigint))";
  PGresult* prep = PQprepare(conn, "ins", sql, 2, nullptr);
  if (PQresultStatus(prep) != PGRES_COMMAND_OK) {
    std::fprintf(stderr, "latency_producer: %s", PQerrorMessage(conn));
    return 1;
  }
  PQclear(prep);

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const int64_t total = static_cast<int64_t>(seconds * rate);
  const auto step = std::chrono::nanoseconds(1000000000LL / rate);
  int64_t inserted = 0;
  double max_lag_ms = 0;
  for (int64_t i = 0; i < total; ++i) {
    auto due = start + step * i;
    auto now = Clock::now();
    if (now < due) {
      std::this_thread::sleep_until(due);
    } else {
      max_lag_ms =
          std::max(max_lag_ms, std::chrono::duration<double, std::milli>(now - due).count());
    }
    std::string key = "key-" + std::to_string(i % keys);
    std::string n = std::to_string(i);
    const char* values[2] = {key.c_str(), n.c_str()};
    PGresult* res = PQexecPrepared(conn, "ins", 2, values, nullptr, nullptr, 0);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
      std::fprintf(stderr, "latency_producer: %s", PQerrorMessage(conn));
      PQclear(res);
      break;
    }
    PQclear(res);
    ++inserted;
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  PQfinish(conn);
  nlohmann::json out = {{"inserted", inserted},
                        {"seconds", elapsed},
                        {"rate_per_s", elapsed > 0 ? static_cast<double>(inserted) / elapsed : 0},
                        {"max_schedule_lag_ms", max_lag_ms}};
  std::printf("%s\n", out.dump().c_str());
  return inserted == total ? 0 : 1;
}
