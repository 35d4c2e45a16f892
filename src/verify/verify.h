// verify.h: `queuebox verify`, the after-the-fact check of the outbox's promises. It reads the
// outbox, the inbox, the replica table and (with --received) the deliveries `queuebox receive`
// recorded, in one read-only snapshot (store/read_only_session.h), and names every invariant
// that does not hold with its rows (docs/operations.md "Verify", docs/guarantees.md).
//
// Thread-safety: pure functions over a session the caller owns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "queuebox/status.h"
#include "queuebox/store.h"
#include "store/read_only_session.h"

namespace queuebox::verify {

enum class Outcome { kHolds, kWarning, kBroken, kSkipped };
std::string_view OutcomeName(Outcome outcome);  // "holds" | "warning" | "broken" | "skipped"

// One row that breaks (or warns about) an invariant: named values, in a stable order.
using Finding = std::vector<std::pair<std::string, std::string>>;

struct CheckResult {
  CheckResult(std::string name_, std::string invariant_)
      : name(std::move(name_)), invariant(std::move(invariant_)) {}
  std::string name;       // key-order, lease, stalled, inbox-forwarded, dead-reason, ...
  std::string invariant;  // what holds when the check passes, one sentence
  Outcome outcome = Outcome::kHolds;
  std::string detail;         // why skipped, what a warning means, what was counted
  int64_t count = 0;          // rows that break it (or warn)
  std::vector<Finding> rows;  // the first Options::max_rows of them
};

struct Options {
  // Filters, ANDed, on the outbox rows checked: created at or after `since` (ISO-8601 instant),
  // of `topic`, of `key`. The inbox check takes `since` only.
  std::optional<std::string> since, topic, key;
  std::string ordering = "sequence";         // outbox.ordering: "strict"; anything else is sequence
  int64_t reclaim_interval_ms = 60000;       // the relay's reclaim step (outbox.claimTimeoutMs / 5)
  int64_t stall_threshold_ms = 300000;       // a due row may wait this long with no replica alive
  bool key_affinity = true;                  // replicas register in the replica table only then
  int max_rows = 20;                         // rows listed per check
  std::optional<std::string> received_file;  // JSON lines of `queuebox receive`
};

struct Report {
  std::string dialect, ordering;
  std::vector<CheckResult> checks;
  // 0 every invariant holds (warnings included), 1 one is broken.
  int ExitCode() const;
};

// Runs every check in the session's snapshot. An error (a statement refused, the outbox table
// missing, the received file unreadable) means the invariants could not be checked: exit 2.
Result<Report> Verify(ReadOnlySession& session, const DatabaseConfig& database,
                      const Options& options);

// The report for people (one block per check, rows indented) and for machines:
// {"dialect", "ordering", "ok", "checks": [{"name", "invariant", "outcome", "detail", "count",
// "rows": [{...}]}]}.
std::string RenderText(const Report& report);
std::string RenderJson(const Report& report);

}  // namespace queuebox::verify
