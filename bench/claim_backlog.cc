// claim_backlog: drains PostgreSQL or SQLite outboxes with the relay's own claim and fenced
// MarkSent (no publishing), like bench_floor, and prints one JSON line.
//
// One backlog (--url): drains it, stopping after --max-rows rows so a 1,000,000-row backlog is
// measured while it is still 800,000+ rows deep; counts the rows of --hot-key apart.
//
//   claim_backlog --type postgresql --url postgresql://... --batch 500 --max-rows 200000
//
// Interleaved (--backlog name=url, repeated; a url list separated by commas is used one url per
// round, for backlogs that one round drains completely): each round drains every backlog in turn
// by --chunk rows (or until it is empty), so the machine's noise (shared, loaded cores) falls on
// every backlog alike and the ratios between them hold. bench/claim_backlog_bench.sh runs this.
//
//   claim_backlog --backlog small=pg://a1,pg://a2 --backlog uniform=pg://b --rounds 2
#include <libpq-fe.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "queuebox/store.h"
#include "store/open_store.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Drained {
  int64_t rows = 0, hot_rows = 0, claims = 0;
  double seconds = 0;
};

// Claims and acknowledges until `max_rows` rows (0: until a claim comes back empty). Returns
// false (after printing why) on any store error or a lost fence.
bool Drain(queuebox::OutboxStore& store, int batch, int64_t max_rows, const std::string& hot_key,
           Drained& out, nlohmann::json* segments) {
  constexpr int64_t kLeaseMs = 60000;
  // rows/s of each successive kSegment rows, to tell a rate that falls as the drain goes on
  // (dead index entries of the rows already sent, until VACUUM) from one set by the backlog.
  constexpr int64_t kSegment = 20000;
  int64_t segment_rows = 0, rows = 0;
  auto start = Clock::now(), segment_start = start;
  while (max_rows == 0 || rows < max_rows) {
    auto claimed = store.Claim(batch, kLeaseMs);
    if (!claimed.ok()) {
      std::fprintf(stderr, "claim: %s\n", claimed.status().ToString().c_str());
      return false;
    }
    ++out.claims;
    if (claimed->empty()) break;
    std::vector<queuebox::Fence> fences;
    for (const auto& r : *claimed) {
      fences.push_back({r.id, r.claim_token});
      if (!hot_key.empty() && r.key == hot_key) ++out.hot_rows;
    }
    auto acked = store.MarkSent(fences);
    if (!acked.ok() || acked->size() != fences.size()) {
      std::fprintf(stderr, "ack failed or lost rows\n");
      return false;
    }
    rows += static_cast<int64_t>(acked->size());
    segment_rows += static_cast<int64_t>(acked->size());
    if (segments != nullptr && segment_rows >= kSegment) {
      auto now = Clock::now();
      double seg_s = std::chrono::duration<double>(now - segment_start).count();
      segments->push_back(static_cast<int64_t>(static_cast<double>(segment_rows) / seg_s));
      segment_rows = 0;
      segment_start = now;
    }
  }
  out.rows += rows;
  out.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  return true;
}

double PerSecond(const Drained& d) {
  return d.seconds > 0 ? static_cast<double>(d.rows) / d.seconds : 0;
}

nlohmann::json ToJson(const Drained& d) {
  return {{"rows", d.rows},
          {"hot_key_rows", d.hot_rows},
          {"claims", d.claims},
          {"seconds", d.seconds},
          {"rows_per_s", PerSecond(d)},
          {"ms_per_claim", d.claims > 0 ? 1000 * d.seconds / static_cast<double>(d.claims) : 0}};
}

std::unique_ptr<queuebox::OutboxStore> Open(const std::string& type, const std::string& url) {
  queuebox::DatabaseConfig db;
  db.type = type;
  db.url = url;
  db.pool_size = 1;
  db.migrate = false;
  auto store = queuebox::OpenStore(db);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return nullptr;
  }
  return std::move(*store);
}

// VACUUM (not timed) of a PostgreSQL outbox, for --vacuum-between-rounds.
bool Vacuum(const std::string& url) {
  PGconn* conn = PQconnectdb(url.c_str());
  bool ok = PQstatus(conn) == CONNECTION_OK;
  if (ok) {
    PGresult* res = PQexec(conn, "VACUUM outbox");
    ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok) std::fprintf(stderr, "vacuum: %s", PQerrorMessage(conn));
    PQclear(res);
  }
  PQfinish(conn);
  return ok;
}

struct Backlog {
  std::string name;
  std::vector<std::string> urls;
  std::vector<std::unique_ptr<queuebox::OutboxStore>> stores;  // one per round, or one for all
  Drained total;
  nlohmann::json per_round = nlohmann::json::array();
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"claim + ack drain of outbox backlogs"};
  std::string type = "postgresql", url, hot_key;
  std::vector<std::string> backlog_args;
  int batch = 500, rounds = 10;
  int64_t max_rows = 0, chunk = 20000;
  bool vacuum = false;
  app.add_option("--type", type);
  app.add_option("--url", url, "one backlog: drain it");
  app.add_option("--backlog", backlog_args, "name=url[,url...]: interleave these backlogs");
  app.add_option("--batch", batch);
  app.add_option("--max-rows", max_rows, "one backlog: stop after this many rows (0: until empty)");
  app.add_option("--rounds", rounds, "interleaved: rounds");
  app.add_option("--chunk", chunk, "interleaved: rows per backlog per round");
  app.add_option("--hot-key", hot_key, "count this key's rows apart");
  app.add_flag("--vacuum-between-rounds", vacuum,
               "interleaved, PostgreSQL: VACUUM each backlog after each round (not timed)");
  CLI11_PARSE(app, argc, argv);

  if (backlog_args.empty()) {
    if (url.empty()) {
      std::fprintf(stderr, "give --url or --backlog\n");
      return 2;
    }
    auto store = Open(type, url);
    if (store == nullptr) return 1;
    Drained d;
    nlohmann::json segments = nlohmann::json::array();
    if (!Drain(*store, batch, max_rows, hot_key, d, &segments)) return 1;
    nlohmann::json out = ToJson(d);
    out["rows_per_s_by_20k_rows"] = segments;
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }

  std::vector<Backlog> backlogs;
  for (const std::string& arg : backlog_args) {
    size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "--backlog wants name=url[,url...]: %s\n", arg.c_str());
      return 2;
    }
    Backlog b;
    b.name = arg.substr(0, eq);
    std::stringstream urls(arg.substr(eq + 1));
    for (std::string u; std::getline(urls, u, ',');) {
      auto store = Open(type, u);
      if (store == nullptr) return 1;
      b.stores.push_back(std::move(store));
      b.urls.push_back(u);
    }
    if (b.stores.size() != 1 && b.stores.size() < static_cast<size_t>(rounds)) {
      std::fprintf(stderr, "%s: give one url, or one per round (%d)\n", b.name.c_str(), rounds);
      return 2;
    }
    backlogs.push_back(std::move(b));
  }
  for (int round = 0; round < rounds; ++round) {
    for (Backlog& b : backlogs) {
      auto& store = b.stores.size() == 1 ? b.stores[0] : b.stores[static_cast<size_t>(round)];
      Drained d;
      if (!Drain(*store, batch, chunk, hot_key, d, nullptr)) return 1;
      b.total.rows += d.rows;
      b.total.hot_rows += d.hot_rows;
      b.total.claims += d.claims;
      b.total.seconds += d.seconds;
      b.per_round.push_back(static_cast<int64_t>(PerSecond(d)));
    }
    for (const Backlog& b : backlogs) {
      if (vacuum && b.urls.size() == 1 && !Vacuum(b.urls[0])) return 1;
    }
  }
  nlohmann::json out = nlohmann::json::object();
  for (const Backlog& b : backlogs) {
    nlohmann::json j = ToJson(b.total);
    j["rows_per_s_by_round"] = b.per_round;
    out[b.name] = j;
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
