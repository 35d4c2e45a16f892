#include "verify/received.h"

#include <charconv>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace queuebox::verify {
namespace {

struct WindowRow {
  std::string key, state;
  int64_t sequence = 0;
};

// The outbox rows of the window by id.
Result<std::unordered_map<std::string, WindowRow>> ReadWindow(const CheckContext& c) {
  Query q = c.NewQuery();
  q << "SELECT " + c.dialect.Text("{id}") +
           " AS id, {key} AS key, {sequence} AS sequence, {state} AS state FROM {T} AS o "
           "WHERE 1 = 1";
  q << q.OutboxFilter("o", c.options);
  QB_ASSIGN_OR_RETURN(ReadTable table, q.Run(c.session));
  std::unordered_map<std::string, WindowRow> rows;
  rows.reserve(table.rows.size());
  for (const auto& r : table.rows) {
    WindowRow row{r[1].value_or(""), r[3].value_or(""), 0};
    const std::string& s = r[2].value_or("0");
    std::from_chars(s.data(), s.data() + s.size(), row.sequence);
    rows.emplace(r[0].value_or(""), std::move(row));
  }
  return rows;
}

CheckResult MissingCheck(const std::unordered_map<std::string, WindowRow>& window,
                         const std::unordered_set<std::string>& received, int max_rows) {
  CheckResult result{"received", "Every row sent in the window was received."};
  std::map<int64_t, std::string> missing;  // sequence -> id, listed in sequence order
  int64_t sent = 0;
  for (const auto& [id, row] : window) {
    if (row.state != "sent") continue;
    ++sent;
    if (!received.contains(id)) missing.emplace(row.sequence, id);
  }
  result.count = static_cast<int64_t>(missing.size());
  result.detail = std::to_string(sent) + " sent row(s) in the window.";
  for (const auto& [sequence, id] : missing) {
    if (static_cast<int>(result.rows.size()) >= max_rows) break;
    result.rows.push_back(
        {{"id", id}, {"key", window.at(id).key}, {"sequence", std::to_string(sequence)}});
  }
  if (result.count > 0) result.outcome = Outcome::kBroken;
  return result;
}

CheckResult DuplicatesCheck(const std::vector<Receipt>& receipts, int max_rows) {
  CheckResult result{"duplicates",
                     "Deliveries beyond a message's first (allowed: delivery is at-least-once)."};
  std::map<std::string, int64_t> times;
  for (const auto& r : receipts) ++times[r.id];
  int64_t messages = 0;
  for (const auto& [id, n] : times) {
    if (n < 2) continue;
    ++messages;
    result.count += n - 1;
    if (static_cast<int>(result.rows.size()) < max_rows) {
      result.rows.push_back({{"id", id}, {"deliveries", std::to_string(n)}});
    }
  }
  result.detail = std::to_string(receipts.size()) + " deliveries of " +
                  std::to_string(times.size()) + " message(s); " + std::to_string(messages) +
                  " message(s) delivered more than once.";
  return result;
}

CheckResult OrderCheck(const std::vector<Receipt>& receipts,
                       const std::unordered_map<std::string, WindowRow>& window,
                       const Options& options) {
  CheckResult result{"received-order", "Per key, the first receipts follow the sequence."};
  std::unordered_set<std::string> seen;
  std::unordered_map<std::string, std::pair<int64_t, std::string>> last;  // key -> (seq, id)
  for (const auto& r : receipts) {
    auto it = window.find(r.id);
    if (it == window.end() || it->second.key.empty() || !seen.insert(r.id).second) continue;
    auto& [top, top_id] = last[it->second.key];
    if (it->second.sequence < top) {
      ++result.count;
      if (static_cast<int>(result.rows.size()) < options.max_rows) {
        result.rows.push_back({{"key", it->second.key},
                               {"id", r.id},
                               {"sequence", std::to_string(it->second.sequence)},
                               {"received_after_id", top_id},
                               {"received_after_sequence", std::to_string(top)}});
      }
      continue;
    }
    top = it->second.sequence;
    top_id = r.id;
  }
  if (result.count == 0) return result;
  if (options.ordering == "strict") {
    result.outcome = Outcome::kBroken;
  } else {
    result.outcome = Outcome::kWarning;
    result.detail =
        "Under outbox.ordering sequence a row whose transaction committed after a later row of "
        "its key was delivered (overlapping writers) is received after it.";
  }
  return result;
}

}  // namespace

Result<std::vector<Receipt>> ReadReceipts(const std::string& path, int64_t* skipped) {
  std::ifstream in(path);
  if (!in) return NotFound("Cannot read the received file '" + path + "'.");
  std::vector<Receipt> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!json.is_object() || !json.contains("id") || !json["id"].is_string()) {
      ++*skipped;
      continue;
    }
    Receipt r{json["id"].get<std::string>(), ""};
    if (json.contains("key") && json["key"].is_string()) r.key = json["key"].get<std::string>();
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<CheckResult>> CheckReceived(const CheckContext& c) {
  int64_t skipped = 0;
  QB_ASSIGN_OR_RETURN(std::vector<Receipt> receipts,
                      ReadReceipts(*c.options.received_file, &skipped));
  QB_ASSIGN_OR_RETURN(auto window, ReadWindow(c));
  std::unordered_set<std::string> received;
  for (const auto& r : receipts) received.insert(r.id);
  std::vector<CheckResult> out;
  out.push_back(MissingCheck(window, received, c.options.max_rows));
  if (skipped > 0) {
    out.back().detail += " " + std::to_string(skipped) + " unreadable line(s) skipped.";
  }
  out.push_back(DuplicatesCheck(receipts, c.options.max_rows));
  out.push_back(OrderCheck(receipts, window, c.options));
  return out;
}

}  // namespace queuebox::verify
