// claim_backlog: drains a PostgreSQL or SQLite outbox with the relay's own claim and fenced
// MarkSent (no publishing), like bench_floor, but stops after --max-rows rows so a 1,000,000-row
// backlog is measured while it is still 800,000+ rows deep, and counts the rows of --hot-key
// apart. Prints one JSON line. bench/claim_backlog_bench.sh runs it.
//
//   claim_backlog --type postgresql --url postgresql://... --batch 500 --max-rows 200000
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "queuebox/store.h"

int main(int argc, char** argv) {
  CLI::App app{"claim + ack drain of an outbox backlog"};
  queuebox::DatabaseConfig db;
  db.type = "postgresql";
  int batch = 500;
  int64_t max_rows = 0, lease_ms = 60000;
  std::string hot_key;
  app.add_option("--type", db.type);
  app.add_option("--url", db.url)->required();
  app.add_option("--batch", batch);
  app.add_option("--max-rows", max_rows, "stop after this many rows (0: until empty)");
  app.add_option("--hot-key", hot_key, "count this key's rows apart");
  CLI11_PARSE(app, argc, argv);
  db.pool_size = 1;
  db.migrate = false;
  auto store = queuebox::OpenStore(db);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  int64_t rows = 0, hot_rows = 0, claims = 0;
  auto start = std::chrono::steady_clock::now();
  while (max_rows == 0 || rows < max_rows) {
    auto claimed = (*store)->Claim(batch, lease_ms);
    if (!claimed.ok()) {
      std::fprintf(stderr, "claim: %s\n", claimed.status().ToString().c_str());
      return 1;
    }
    ++claims;
    if (claimed->empty()) break;
    std::vector<queuebox::Fence> fences;
    for (const auto& r : *claimed) {
      fences.push_back({r.id, r.claim_token});
      if (!hot_key.empty() && r.key == hot_key) ++hot_rows;
    }
    auto acked = (*store)->MarkSent(fences);
    if (!acked.ok() || acked->size() != fences.size()) {
      std::fprintf(stderr, "ack failed or lost rows\n");
      return 1;
    }
    rows += static_cast<int64_t>(acked->size());
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json out = {{"rows", rows},
                        {"hot_key_rows", hot_rows},
                        {"claims", claims},
                        {"seconds", s},
                        {"rows_per_s", s > 0 ? static_cast<double>(rows) / s : 0},
                        {"ms_per_claim", claims > 0 ? 1000 * s / static_cast<double>(claims) : 0}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
