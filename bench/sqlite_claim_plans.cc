// sqlite_claim_plans: EXPLAIN QUERY PLAN and timing of the SQLite store's claim statement (and of
// its acknowledgement) on an existing outbox file, for docs/claim-plans.md (SQLite).
// The claim runs --runs times, each inside BEGIN IMMEDIATE ... ROLLBACK, so the backlog stays as
// it was; then one claim is kept and its rows acknowledged with MarkSent's statement, timed.
// Prints the plans as text and a last line of JSON. bench/sqlite_bench.sh runs it.
//
//   sqlite_claim_plans --db /tmp/outbox.db --batch 500 --runs 5
#include <sqlite3.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "store/sqlite/sqlite_store.h"

namespace {

using Clock = std::chrono::steady_clock;

bool Check(sqlite3* db, int rc, const char* what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) return true;
  std::fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
  return false;
}

// EXPLAIN QUERY PLAN as the sqlite3 shell draws it.
bool PrintPlan(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  std::string eqp = "EXPLAIN QUERY PLAN " + sql;
  if (!Check(db, sqlite3_prepare_v2(db, eqp.c_str(), -1, &st, nullptr), "prepare plan")) {
    return false;
  }
  std::map<int, int> depth;  // node id -> depth
  while (sqlite3_step(st) == SQLITE_ROW) {
    int id = sqlite3_column_int(st, 0), parent = sqlite3_column_int(st, 1);
    int d = parent == 0 ? 0 : depth[parent] + 1;
    depth[id] = d;
    std::printf("%s--%s\n", std::string(static_cast<size_t>(d) * 3, ' ').c_str(),
                reinterpret_cast<const char*>(sqlite3_column_text(st, 3)));
  }
  sqlite3_finalize(st);
  return true;
}

// Runs a prepared statement to the end; returns the rows it returned (-1 on error).
int RunAll(sqlite3* db, sqlite3_stmt* st,
           std::vector<std::pair<std::string, std::string>>* fences) {
  int rows = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    ++rows;
    if (fences != nullptr) {
      // RETURNING id, ..., claim_token is column 9 (kRowColumns order).
      fences->emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)),
                           reinterpret_cast<const char*>(sqlite3_column_text(st, 9)));
    }
  }
  sqlite3_reset(st);
  return Check(db, rc, "step") ? rows : -1;
}

double MsSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"EXPLAIN QUERY PLAN and timing of the SQLite claim"};
  std::string path;
  int batch = 500, runs = 5;
  std::string pragmas;
  app.add_option("--db", path)->required();
  app.add_option("--batch", batch);
  app.add_option("--runs", runs);
  app.add_option("--pragmas", pragmas, "run these first, e.g. \"PRAGMA cache_size = -16384\"");
  CLI11_PARSE(app, argc, argv);

  queuebox::DatabaseConfig config;
  config.type = "sqlite";
  config.url = path;
  const std::string claim = queuebox::store::SqliteOutboxStore::ClaimSql(config, true);
  const std::string ack = queuebox::store::SqliteOutboxStore::MarkSentSql(config);

  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::fprintf(stderr, "open %s: %s\n", path.c_str(), sqlite3_errmsg(db));
    return 1;
  }
  if (!pragmas.empty() &&
      !Check(db, sqlite3_exec(db, pragmas.c_str(), nullptr, nullptr, nullptr), "pragmas")) {
    return 1;
  }
  std::printf("-- claim (?1 = %d, ?2 = 60000, ?3 = %d):\n%s\n\n", batch, 2 * batch, claim.c_str());
  if (!PrintPlan(db, claim)) return 1;
  std::printf("\n-- acknowledgement (MarkSent):\n%s\n\n", ack.c_str());
  if (!PrintPlan(db, ack)) return 1;

  sqlite3_stmt* st = nullptr;
  if (!Check(db, sqlite3_prepare_v2(db, claim.c_str(), -1, &st, nullptr), "prepare claim")) {
    return 1;
  }
  sqlite3_bind_int64(st, 1, batch);
  sqlite3_bind_int64(st, 2, 60000);
  sqlite3_bind_int64(st, 3, 2 * int64_t{batch});
  std::vector<double> claim_ms;
  int claimed = 0;
  for (int i = 0; i < runs; ++i) {
    sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    auto t = Clock::now();
    claimed = RunAll(db, st, nullptr);
    claim_ms.push_back(MsSince(t));
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    if (claimed < 0) return 1;
  }
  // One kept claim and its acknowledgement, each in its own transaction like the store.
  std::vector<std::pair<std::string, std::string>> fences;
  sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (RunAll(db, st, &fences) < 0) return 1;
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_finalize(st);
  nlohmann::json batch_json = nlohmann::json::array();
  for (const auto& [id, token] : fences) batch_json.push_back({{"id", id}, {"token", token}});
  std::string batch_text = batch_json.dump();
  if (!Check(db, sqlite3_prepare_v2(db, ack.c_str(), -1, &st, nullptr), "prepare ack")) return 1;
  sqlite3_bind_text(st, 1, batch_text.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  auto t = Clock::now();
  int acked = RunAll(db, st, nullptr);
  double ack_ms = MsSince(t);
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_finalize(st);
  sqlite3_close(db);
  nlohmann::json out = {
      {"rows_claimed", claimed}, {"claim_ms", claim_ms}, {"rows_acked", acked}, {"ack_ms", ack_ms}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
