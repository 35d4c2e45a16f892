#include "store/flyway.h"

#include <algorithm>
#include <set>

#include "store/common.h"

namespace queuebox::store {
namespace {

constexpr const char* kScripts[kLastQueueBoxVersion] = {
    "V1__create_outbox.sql",       "V2__create_inbox.sql",
    "V3__add_claimed_at.sql",      "V4__add_last_error.sql",
    "V5__add_correlation_id.sql",  "V6__add_consumption_and_leases.sql",
    "V7__capture_state.sql",       "V8__add_pull_claim_indexes.sql",
    "V9__add_aggregate_type.sql",  "V10__add_inbox_headers.sql",
    "V11__add_outbox_sequence.sql"};

constexpr const char* kBaselineHint =
    " Once the schema matches a QueueBox version, record that version with `queuebox migrate "
    "--baseline <version>` (docs/schema.md, \"Adopting a database that QueueBox migrated\").";

// Flyway's version text as a whole number: "6", "06", "6.0" -> 6; "6.1", "", "x" -> nullopt.
std::optional<int64_t> WholeVersion(const std::string& text) {
  size_t dot = text.find('.');
  const std::string first = text.substr(0, dot);
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  std::optional<int64_t> major = ParseInt(first);
  if (!major) return std::nullopt;
  while (dot != std::string::npos) {
    size_t next = text.find('.', dot + 1);
    std::string part = text.substr(dot + 1, next == std::string::npos ? next : next - dot - 1);
    if (part.empty() || part.find_first_not_of('0') != std::string::npos) return std::nullopt;
    dot = next;
  }
  return major;
}

std::string BaseName(const std::string& script) {
  size_t slash = script.find_last_of("/\\");
  return slash == std::string::npos ? script : script.substr(slash + 1);
}

std::string Describe(const FlywayRow& r) {
  return "installed_rank " + std::to_string(r.installed_rank) + ", version " +
         r.version.value_or("NULL") + ", type " + r.type + ", script " + r.script;
}

std::string Range(int from, int to) {
  if (from > to) return "none";
  if (from == to) return "V" + std::to_string(from);
  return "V" + std::to_string(from) + "-V" + std::to_string(to);
}

Status NeverShipped(const FlywayRow& r, const std::string& why) {
  return FailedPrecondition(
      std::string(kFlywayHistoryTable) + " shows a migration QueueBox never shipped (" +
      Describe(r) + "): " + why + ". QueueBox's migrations are V1-V" +
      std::to_string(kLastQueueBoxVersion) + " (" + kScripts[0] + " to " +
      kScripts[kLastQueueBoxVersion - 1] +
      "), so QueueBox C++ does not adopt this database: it cannot tell what that migration "
      "changed." +
      kBaselineHint);
}

}  // namespace

const char* QueueBoxScript(int version) {
  if (version < 1 || version > kLastQueueBoxVersion) return "";
  return kScripts[version - 1];
}

bool ParseFlywaySuccess(const std::string& text) {
  return text == "t" || text == "true" || text == "TRUE" || text == "1";
}

std::string FlywayAdoption::Summary() const {
  std::string out = "QueueBox " + Range(1, version) + " (";
  if (baseline) out += "Flyway baseline V" + std::to_string(*baseline) + "; ";
  if (applied.empty()) {
    out += "no migration applied by Flyway";
  } else {
    out += Range(applied.front(), applied.back()) + " applied by Flyway";
  }
  if (first_rank > 0) {
    out += "; installed_rank " + std::to_string(first_rank) + "-" + std::to_string(last_rank);
  }
  return out + ")";
}

Result<FlywayAdoption> RecogniseQueueBoxHistory(std::vector<FlywayRow> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const FlywayRow& a, const FlywayRow& b) {
    return a.installed_rank < b.installed_rank;
  });
  FlywayAdoption out;
  if (!rows.empty()) {
    out.first_rank = rows.front().installed_rank;
    out.last_rank = rows.back().installed_rank;
  }
  std::set<int> applied;  // by SQL rows, minus DELETE rows
  for (const FlywayRow& r : rows) {
    if (!r.success) {
      return FailedPrecondition(
          std::string(kFlywayHistoryTable) + " shows a failed migration (" + Describe(r) +
          ", success = false). QueueBox C++ cannot tell what a failed migration left in the "
          "database, so it does not adopt it. Finish or undo that migration by hand and delete "
          "its row (Flyway's `repair` deletes failed rows), then start QueueBox C++ again." +
          kBaselineHint);
    }
    if (r.type == "SCHEMA") continue;  // Flyway created the schema: no migration
    if (r.type != "SQL" && r.type != "BASELINE" && r.type != "DELETE") {
      return NeverShipped(r, "QueueBox ships SQL migrations only, not type " + r.type);
    }
    if (!r.version) {
      return NeverShipped(r, "a repeatable migration (no version)");
    }
    std::optional<int64_t> v = WholeVersion(*r.version);
    if (!v) return NeverShipped(r, "version " + *r.version + " is not a whole number");
    if (*v > kLastQueueBoxVersion) {
      return FailedPrecondition(
          std::string(kFlywayHistoryTable) + " shows migration V" + *r.version + " (" +
          Describe(r) + "), beyond V" + std::to_string(kLastQueueBoxVersion) +
          ", the last QueueBox migration this build of QueueBox C++ knows. A newer QueueBox "
          "(or a migration added by hand) changed this database, so QueueBox C++ does not adopt "
          "it: use a QueueBox C++ release that knows V" +
          *r.version + "." + kBaselineHint);
    }
    const int version = static_cast<int>(*v);
    if (r.type == "BASELINE") {
      out.baseline = std::max(out.baseline.value_or(0), version);
      continue;
    }
    if (version == 0 || BaseName(r.script) != kScripts[version - 1]) {
      return NeverShipped(r, version == 0 ? "version 0 is a baseline, not a migration"
                                          : "QueueBox's V" + std::to_string(version) + " is " +
                                                kScripts[version - 1]);
    }
    if (r.type == "DELETE") {
      applied.erase(version);  // `flyway repair` dropped a missing migration
    } else {
      applied.insert(version);
    }
  }
  // Applied: everything up to the baseline, then Flyway's rows, without a gap.
  std::set<int> all(applied.begin(), applied.end());
  for (int v = 1; v <= out.baseline.value_or(0); ++v) all.insert(v);
  int expected = 1;
  for (int v : all) {
    if (v != expected) {
      return FailedPrecondition(std::string(kFlywayHistoryTable) + " shows QueueBox V" +
                                std::to_string(v) + " (" + kScripts[v - 1] + ") applied but not V" +
                                std::to_string(expected) + " (" + kScripts[expected - 1] +
                                "), so the schema is not one that QueueBox's migrations leave "
                                "and QueueBox C++ does not adopt it." +
                                kBaselineHint);
    }
    ++expected;
  }
  out.version = expected - 1;
  out.applied.assign(applied.begin(), applied.end());
  return out;
}

}  // namespace queuebox::store
