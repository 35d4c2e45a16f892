#include "admin/cli.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/router.h"
#include "store/change_capture.h"

namespace queuebox {
namespace {

using nlohmann::ordered_json;

// A plain text table: header row, a rule, then rows; columns padded to the widest cell.
std::string Table(const std::vector<std::string>& header,
                  const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t c = 0; c < width.size(); ++c) {
      std::string cell = c < cells.size() ? cells[c] : "";
      s += cell;
      if (c + 1 < width.size()) s += std::string(width[c] - cell.size() + 2, ' ');
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(header);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  out += line(rule);
  for (const auto& r : rows) out += line(r);
  return out;
}

std::string OneLine(std::string s, size_t max) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  std::replace(s.begin(), s.end(), '\r', ' ');
  if (s.size() > max) s = s.substr(0, max - 3) + "...";
  return s;
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

// "12.3 MiB (12897484 bytes)".
std::string Bytes(int64_t n) {
  if (n < 0) return "unknown";
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return std::to_string(n) + " bytes";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s (%lld bytes)", v, units[u], static_cast<long long>(n));
  return buf;
}

// The capture part of `queuebox status`: nullopt when capture is not PostgreSQL's.
std::optional<CaptureReport> CaptureReportFor(const Config& config, std::ostream& err) {
  auto report = ReadCaptureReport(config.database, config.outbox.capture);
  if (!report.ok()) {
    err << "The capture slot query failed: " << report.status().ToString() << "\n";
    return std::nullopt;
  }
  return *report;
}

}  // namespace

namespace {

// The inbox part of `status`: nullopt when there is no inbox table; an error otherwise.
Result<std::optional<InboxStats>> InboxStatus(InboxStore* inbox) {
  if (inbox == nullptr) return std::optional<InboxStats>();
  Status schema = inbox->CheckSchema();
  if (schema.code() == StatusCode::kNotFound) return std::optional<InboxStats>();
  QB_ASSIGN_OR_RETURN(InboxStats stats, inbox->Stats());
  return std::optional<InboxStats>(std::move(stats));
}

const std::vector<std::string>& InboxStates() {
  static const std::vector<std::string> states = {kInboxStatePending, kInboxStateProcessing,
                                                  kInboxStateProcessed, kInboxStateDead};
  return states;
}

}  // namespace

namespace {

// What `queuebox status` shows, read once, rendered as JSON or as tables.
struct StatusReport {
  OutboxStats stats;
  std::vector<std::string> states;  // the four states, then any other the table holds
  std::optional<CaptureReport> capture;
  std::optional<InboxStats> inbox;  // nullopt: no inbox table
  bool inbox_missing = false;       // an inbox store without its table
  std::vector<ReplicaInfo> live;    // key affinity; empty without a replica set
  bool strict = false;              // outbox.ordering: strict

  int64_t Count(const std::string& state) const {
    auto it = stats.rows_by_state.find(state);
    return it == stats.rows_by_state.end() ? int64_t{0} : it->second;
  }
};

ordered_json InboxJson(const InboxStats& in) {
  ordered_json by_source = ordered_json::object();
  for (const auto& [source, by_state] : in.rows_by_source_state) {
    ordered_json counts = ordered_json::object();
    for (const std::string& st : InboxStates()) {
      auto it = by_state.find(st);
      counts[st] = it == by_state.end() ? int64_t{0} : it->second;
    }
    for (const auto& [st, n] : by_state) counts[st] = n;
    by_source[source] = counts;
  }
  return {{"rowsBySourceAndState", by_source},
          {"oldestPendingAgeSeconds", in.oldest_pending_age_seconds}};
}

ordered_json CaptureJson(const CaptureConfig& cap, const CaptureReport& capture) {
  ordered_json slot = {{"name", cap.slot}, {"exists", capture.slot.has_value()}};
  if (capture.slot) {
    slot["active"] = capture.slot->active;
    slot["confirmedFlushLsn"] = capture.slot->confirmed_flush_lsn;
    slot["restartLsn"] = capture.slot->restart_lsn;
    slot["walStatus"] = capture.slot->wal_status;
    slot["retainedBytes"] = capture.slot->retained_bytes;
    slot["overThreshold"] = capture.slot->retained_bytes > cap.slot_retention_warn_bytes;
  }
  return {{"mode", cap.mode},
          {"identity", cap.identity},
          {"recorded", capture.recorded},
          {"slot", slot}};
}

// outbox.ordering: strict: the oldest open transaction holding rows back, or null.
ordered_json StrictJson(const std::optional<StrictBlocker>& blocker) {
  ordered_json oldest = nullptr;
  if (blocker) {
    oldest = {{"pid", blocker->pid},
              {"ageSeconds",
               blocker->age_seconds ? ordered_json(*blocker->age_seconds) : ordered_json(nullptr)}};
  }
  return {{"oldestBlockingTransaction", oldest}};
}

void PrintStrict(const std::optional<StrictBlocker>& blocker, std::ostream& out) {
  if (!blocker) {
    out << "\nStrict order: no open transaction holds rows back.\n";
    return;
  }
  out << "\nStrict order: the oldest open transaction holding rows back is backend pid "
      << blocker->pid << ", open "
      << (blocker->age_seconds ? Seconds(*blocker->age_seconds) + " s" : "for an unknown time")
      << " (keyed rows inserted after it wait until it ends).\n";
}

void PrintStatusJson(const StatusReport& r, const CaptureConfig& cap, std::ostream& out) {
  ordered_json rows = ordered_json::object();
  for (const auto& s : r.states) rows[s] = r.Count(s);
  ordered_json dead = ordered_json::object();
  for (const auto& [topic, n] : r.stats.dead_by_topic) dead[topic] = n;
  ordered_json replicas = ordered_json::array();
  for (const ReplicaInfo& info : r.live) {
    replicas.push_back({{"name", info.name},
                        {"heartbeatAgeSeconds", info.heartbeat_age_seconds},
                        {"startedAt", info.started_at}});
  }
  ordered_json j = {{"rowsByState", rows},
                    {"oldestPendingAgeSeconds", r.stats.oldest_pending_age_seconds},
                    {"deadByTopic", dead},
                    {"replicas", replicas},
                    {"inbox", r.inbox ? InboxJson(*r.inbox) : ordered_json(nullptr)}};
  if (r.capture) j["capture"] = CaptureJson(cap, *r.capture);
  if (r.strict) j["strictOrder"] = StrictJson(r.stats.strict_blocker);
  out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void PrintCapture(const CaptureConfig& cap, const CaptureReport& capture, std::ostream& out) {
  out << "\nChange capture: " << cap.mode << ", identity " << cap.identity
      << (capture.recorded ? " (recorded in queuebox_capture_state)"
                           : " (not recorded yet: capture has not started once)")
      << "\n";
  if (!capture.slot) {
    out << "The replication slot " << cap.slot
        << " does not exist (capture creates it on its first start).\n";
    return;
  }
  const auto& slot = *capture.slot;
  out << Table({"SLOT", "ACTIVE", "CONFIRMED", "RETAINED WAL"},
               {{cap.slot, slot.active ? "yes" : "no", slot.confirmed_flush_lsn,
                 Bytes(slot.retained_bytes)}});
  if (slot.retained_bytes > cap.slot_retention_warn_bytes) {
    out << "Warning: the slot retains more WAL than outbox.capture.slotRetentionWarnBytes ("
        << cap.slot_retention_warn_bytes
        << "). A slot that nobody reads keeps WAL until the disk fills: start the relay that "
           "owns capture, or drop the slot of a retired capture identity (SELECT "
           "pg_drop_replication_slot('"
        << cap.slot << "');).\n";
  }
}

void PrintInbox(const InboxStats& in, std::ostream& out) {
  if (in.rows_by_source_state.empty()) {
    out << "\nThe inbox is empty.\n";
  } else {
    std::vector<std::string> header = {"INBOX SOURCE"};
    for (const std::string& st : InboxStates()) {
      std::string upper = st;
      std::transform(upper.begin(), upper.end(), upper.begin(),
                     [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
      header.push_back(upper);
    }
    std::vector<std::vector<std::string>> rows_in;
    for (const auto& [source, by_state] : in.rows_by_source_state) {
      std::vector<std::string> row = {source};
      for (const std::string& st : InboxStates()) {
        auto it = by_state.find(st);
        row.push_back(std::to_string(it == by_state.end() ? 0 : it->second));
      }
      rows_in.push_back(std::move(row));
    }
    out << "\n" << Table(header, rows_in);
  }
  out << "\nOldest pending inbox age (push): " << Seconds(in.oldest_pending_age_seconds) << " s\n";
}

void PrintStatusTables(const StatusReport& r, const CaptureConfig& cap, std::ostream& out) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : r.states) rows.push_back({s, std::to_string(r.Count(s))});
  out << Table({"STATE", "ROWS"}, rows);
  out << "\nOldest pending age: " << Seconds(r.stats.oldest_pending_age_seconds) << " s\n";
  if (r.stats.dead_by_topic.empty()) {
    out << "\nNo dead rows.\n";
  } else {
    std::vector<std::vector<std::string>> dead;
    for (const auto& [topic, n] : r.stats.dead_by_topic) {
      dead.push_back({topic, std::to_string(n)});
    }
    out << "\n" << Table({"DEAD TOPIC", "ROWS"}, dead);
  }
  if (!r.live.empty()) {
    // Key affinity: the live replicas in rank order; replica i of n claims the keys with
    // hash mod n = i (docs/operations.md "Replicas and key affinity").
    std::vector<std::vector<std::string>> replicas;
    for (size_t i = 0; i < r.live.size(); ++i) {
      const ReplicaInfo& info = r.live[i];
      replicas.push_back({std::to_string(i), info.name, Seconds(info.heartbeat_age_seconds) + " s",
                          info.started_at});
    }
    out << "\n" << Table({"SHARE", "REPLICA", "HEARTBEAT AGE", "STARTED"}, replicas);
  }
  if (r.capture) PrintCapture(cap, *r.capture, out);
  if (r.strict) PrintStrict(r.stats.strict_blocker, out);
  if (r.inbox_missing) {
    out << "\nNo inbox table.\n";
  } else if (r.inbox) {
    PrintInbox(*r.inbox, out);
  }
}

}  // namespace

int RunStatusCommand(OutboxOperations& store, ReplicaMembership* replica_set, const Config& config,
                     bool json, std::ostream& out, std::ostream& err, InboxStore* inbox) {
  auto stats = store.Stats();
  if (!stats.ok()) {
    err << "The status query failed: " << stats.status().ToString() << "\n";
    return 1;
  }
  StatusReport report;
  report.stats = std::move(stats).value();
  report.capture = CaptureReportFor(config, err);
  auto inbox_stats = InboxStatus(inbox);
  if (!inbox_stats.ok()) {
    err << "The inbox status query failed: " << inbox_stats.status().ToString() << "\n";
    return 1;
  }
  report.inbox = std::move(inbox_stats).value();
  report.inbox_missing = inbox != nullptr && !report.inbox;
  if (replica_set != nullptr) report.live = replica_set->Replicas();
  report.strict = config.outbox.ordering == "strict";
  report.states = {kStatePending, kStateProcessing, kStateSent, kStateDead};
  for (const auto& [state, n] : report.stats.rows_by_state) {
    if (std::find(report.states.begin(), report.states.end(), state) == report.states.end()) {
      report.states.push_back(state);
    }
  }
  if (json) {
    PrintStatusJson(report, config.outbox.capture, out);
  } else {
    PrintStatusTables(report, config.outbox.capture, out);
  }
  return 0;
}

int RunReplayCommand(OutboxOperations& store, const Config& config, ReplayRequest request,
                     std::ostream& out, std::ostream& err, InboxOperations* inbox) {
  if (!request.HasFilter()) {
    err << kReplayNeedsFilter
        << " Use --id, --topic, --topics, --destination, --created-after or --created-before "
           "(--table inbox: --id, --source, --sources, --created-after, --created-before).\n";
    return 2;
  }
  if (Status s = NormaliseReplayRequest(request); !s.ok()) {
    err << "Invalid request: " << s.message() << "\n";
    return 2;
  }
  if (request.inbox()) {
    if (inbox == nullptr) {
      err << "The replay failed: this store has no inbox.\n";
      return 1;
    }
    auto moved = RunInboxReplay(request, *inbox);
    if (!moved.ok()) {
      err << "The replay failed: " << moved.status().ToString() << "\n";
      return 1;
    }
    out << "Moved " << *moved << " inbox row(s).\n";
    return 0;
  }
  auto router = Router::Create(config.routes);
  if (!router.ok()) {
    err << router.status().message() << "\n";
    return 2;
  }
  auto moved = RunReplay(request, *router, store);
  if (!moved.ok()) {
    err << "The replay failed: " << moved.status().ToString() << "\n";
    return 1;
  }
  out << "Moved " << *moved << " row(s).\n";
  return 0;
}

int RunDeadListCommand(OutboxOperations& store, const Config& /*config*/, int limit, bool json,
                       std::ostream& out, std::ostream& err) {
  if (limit <= 0) {
    err << "--limit must be > 0\n";
    return 2;
  }
  auto dead = store.ListDead(limit);
  if (!dead.ok()) {
    err << "The dead-letter query failed: " << dead.status().ToString() << "\n";
    return 1;
  }
  if (json) {
    ordered_json list = ordered_json::array();
    for (const auto& d : *dead) {
      list.push_back({{"id", d.id},
                      {"topic", d.topic},
                      {"key", d.key ? ordered_json(*d.key) : ordered_json(nullptr)},
                      {"attempt", d.attempt},
                      {"lastError", d.last_error},
                      {"updatedAt", d.updated_at}});
    }
    out << list.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  if (dead->empty()) {
    out << "No dead rows.\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& d : *dead) {
    rows.push_back({d.id, d.topic, d.key.value_or(""), std::to_string(d.attempt),
                    OneLine(d.last_error, 80), d.updated_at});
  }
  out << Table({"ID", "TOPIC", "KEY", "ATTEMPT", "LAST ERROR", "UPDATED AT"}, rows);
  return 0;
}

int RunInboxDeadListCommand(InboxOperations& inbox, int limit, bool json, std::ostream& out,
                            std::ostream& err) {
  if (limit <= 0) {
    err << "--limit must be > 0\n";
    return 2;
  }
  auto dead = inbox.ListDead(limit);
  if (!dead.ok()) {
    err << "The dead-letter query failed: " << dead.status().ToString() << "\n";
    return 1;
  }
  auto optional = [](const std::optional<std::string>& v) {
    return v ? ordered_json(*v) : ordered_json(nullptr);
  };
  if (json) {
    ordered_json list = ordered_json::array();
    for (const auto& d : *dead) {
      list.push_back({{"id", d.id},
                      {"source", d.source},
                      {"idempotencyKey", d.idempotency_key},
                      {"aggregateId", optional(d.aggregate_id)},
                      {"eventType", optional(d.event_type)},
                      {"attempt", d.attempt},
                      {"lastError", d.last_error},
                      {"createdAt", d.created_at}});
    }
    out << list.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  if (dead->empty()) {
    out << "No dead inbox rows.\n";
    return 0;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& d : *dead) {
    rows.push_back({d.id, d.source, OneLine(d.idempotency_key, 40), d.aggregate_id.value_or(""),
                    std::to_string(d.attempt), OneLine(d.last_error, 80), d.created_at});
  }
  out << Table(
      {"ID", "SOURCE", "IDEMPOTENCY KEY", "AGGREGATE", "ATTEMPT", "LAST ERROR", "CREATED AT"},
      rows);
  return 0;
}

}  // namespace queuebox
