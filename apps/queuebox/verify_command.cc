// verify: the outbox's invariants read back from the database (src/verify).
#include <iostream>
#include <regex>
#include <string_view>
#include <type_traits>

#include "commands.h"
#include "common.h"
#include "core/log.h"
#include "store/read_only_session.h"
#include "verify/verify.h"

namespace queuebox::app {
namespace {

// outbox.ordering where the configuration has it ("strict" | "sequence"); "sequence" otherwise.
template <typename Outbox>
std::string OrderingOf(const Outbox& outbox) {
  if constexpr (requires { std::string_view(outbox.ordering); }) {
    return std::string(std::string_view(outbox.ordering));
  } else {
    return "sequence";
  }
}

verify::Options ToOptions(const VerifyOptions& o, const Config& config) {
  verify::Options options;
  if (!o.since.empty()) options.since = o.since;
  if (!o.topic.empty()) options.topic = o.topic;
  if (!o.key.empty()) options.key = o.key;
  if (!o.received.empty()) options.received_file = o.received;
  options.ordering = o.ordering.empty() ? OrderingOf(config.outbox) : o.ordering;
  options.reclaim_interval_ms = std::max<int64_t>(1, config.outbox.claim_timeout_ms / 5);
  options.stall_threshold_ms = o.stall_threshold_s * 1000;
  options.key_affinity = config.outbox.key_affinity;
  options.max_rows = o.max_rows;
  return options;
}

}  // namespace

int Verify(const GlobalOptions& global, const VerifyOptions& o) {
  constexpr int kCannotCheck = 2;
  // SQLite would read a malformed instant as NULL and match nothing: refuse it here.
  static const std::regex kInstant(
      R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2}))");
  if (!o.since.empty() && !std::regex_match(o.since, kInstant)) {
    std::cerr << "--since takes an ISO-8601 instant with a zone, e.g. 2026-12-05T10:00:00Z.\n";
    return kCannotCheck;
  }
  auto config = LoadOrExplain(global);
  if (!config) return kCannotCheck;
  log::Init("text", "warn");
  auto session = OpenReadOnlySession(config->database);
  if (!session.ok()) {
    std::cerr << "Cannot verify: " << session.status().message() << "\n";
    return kCannotCheck;
  }
  auto report = verify::Verify(**session, config->database, ToOptions(o, *config));
  if (!report.ok()) {
    std::cerr << "Cannot verify: " << report.status().message() << "\n";
    return kCannotCheck;
  }
  std::cout << (o.json ? verify::RenderJson(*report) : verify::RenderText(*report));
  return report->ExitCode();
}

}  // namespace queuebox::app
