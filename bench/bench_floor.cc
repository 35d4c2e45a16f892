// bench_floor: the database's floor for the relay. Runs the relay's own claim and fenced
// acknowledgement statements back to back with no publishing, until nothing is claimable, and
// prints rows/s. Same store code, same batch size as the relay run it is compared with.
//
//   bench_floor --config bench.yml
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "config/load.h"
#include "queuebox/config.h"
#include "queuebox/store.h"
#include "store/open_store.h"

int main(int argc, char** argv) {
  CLI::App app{"claim + ack floor"};
  std::string config_file;
  app.add_option("--config", config_file)->required();
  CLI11_PARSE(app, argc, argv);
  queuebox::ConfigSource source;
  source.file = config_file;
  source.env = queuebox::ProcessEnvironment();
  auto config = queuebox::LoadConfig(source);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 1;
  }
  auto store = queuebox::OpenStore(config->database);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  int batch = config->outbox.batch_size;
  int64_t rows = 0, claims = 0;
  auto start = std::chrono::steady_clock::now();
  while (true) {
    auto claimed = (*store)->Claim(batch, config->outbox.claim_timeout_ms);
    if (!claimed.ok()) {
      std::fprintf(stderr, "claim: %s\n", claimed.status().ToString().c_str());
      return 1;
    }
    ++claims;
    if (claimed->empty()) break;
    std::vector<queuebox::Fence> fences;
    for (const auto& r : *claimed) fences.push_back({r.id, r.claim_token});
    auto acked = (*store)->MarkSent(fences);
    if (!acked.ok()) {
      std::fprintf(stderr, "ack: %s\n", acked.status().ToString().c_str());
      return 1;
    }
    rows += static_cast<int64_t>(acked->size());
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json out = {{"rows", rows},
                        {"claims", claims},
                        {"seconds", s},
                        {"rows_per_s", s > 0 ? static_cast<double>(rows) / s : 0}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
