#include "verify/received.h"

#include <simdjson.h>

#include <charconv>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace queuebox::verify {
namespace {

struct WindowRow {
  std::string id, key;
  bool sent = false;
  int64_t sequence = 0;
};

// The outbox rows of the window, and their positions by id (views into `rows`, built once it is
// full). Receipts are kept as positions: a million lines cost no string copies.
struct Window {
  std::vector<WindowRow> rows;
  std::unordered_map<std::string_view, int32_t> index;
};

Result<Window> ReadWindow(const CheckContext& c) {
  Query q = c.NewQuery();
  q << "SELECT " + c.dialect.Text("{id}") +
           " AS id, {key} AS key, {sequence} AS sequence, {state} AS state FROM {T} AS o "
           "WHERE 1 = 1";
  q << q.OutboxFilter("o", c.options);
  QB_ASSIGN_OR_RETURN(ReadTable table, q.Run(c.session));
  Window w;
  w.rows.reserve(table.rows.size());
  for (auto& r : table.rows) {
    WindowRow row{std::move(r[0]).value_or(""), std::move(r[1]).value_or(""), r[3] == "sent", 0};
    const std::string& s = r[2].value_or("0");
    std::from_chars(s.data(), s.data() + s.size(), row.sequence);
    w.rows.push_back(std::move(row));
  }
  table.rows.clear();
  w.index.reserve(w.rows.size());
  for (size_t i = 0; i < w.rows.size(); ++i) w.index.emplace(w.rows[i].id, static_cast<int32_t>(i));
  return w;
}

struct Receipts {
  std::vector<int32_t> rows;  // window positions, in file order
  int64_t lines = 0, skipped = 0, outside = 0;
};

// The "id" string of one receipt line, or nullopt (not an object, no string id). simdjson reads
// a million lines several times faster than nlohmann (the --received check's largest cost on
// 1,000,000 rows); a line it refuses is read by nlohmann, which decides as before.
std::optional<std::string> ReceiptId(simdjson::dom::parser& parser, const std::string& line) {
  simdjson::dom::element doc;
  if (parser.parse(line).get(doc) == simdjson::SUCCESS) {
    simdjson::dom::object object;
    if (doc.get(object) != simdjson::SUCCESS) return std::nullopt;
    std::string_view id;
    if (object["id"].get(id) != simdjson::SUCCESS) return std::nullopt;
    return std::string(id);
  }
  auto json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json* id = json.is_object() && json.contains("id") ? &json["id"] : nullptr;
  if (id == nullptr || !id->is_string()) return std::nullopt;
  return id->get<std::string>();
}

Result<Receipts> ReadReceipts(const std::string& path, const Window& window) {
  std::ifstream in(path);
  if (!in) return NotFound("Cannot read the received file '" + path + "'.");
  Receipts out;
  std::string line;
  simdjson::dom::parser parser;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ++out.lines;
    std::optional<std::string> id = ReceiptId(parser, line);
    if (!id) {
      ++out.skipped;
      continue;
    }
    auto it = window.index.find(*id);
    if (it == window.index.end()) {
      ++out.outside;
      continue;
    }
    out.rows.push_back(it->second);
  }
  return out;
}

Finding RowFinding(const WindowRow& row) {
  return {{"id", row.id}, {"key", row.key}, {"sequence", std::to_string(row.sequence)}};
}

CheckResult MissingCheck(const Window& w, const std::vector<int32_t>& times, int max_rows) {
  CheckResult result("received", "Every row sent in the window was received.");
  std::map<int64_t, int32_t> missing;  // sequence -> position, listed in sequence order
  int64_t sent = 0;
  for (size_t i = 0; i < w.rows.size(); ++i) {
    if (!w.rows[i].sent) continue;
    ++sent;
    if (times[i] == 0) missing.emplace(w.rows[i].sequence, static_cast<int32_t>(i));
  }
  result.count = static_cast<int64_t>(missing.size());
  result.detail = std::to_string(sent) + " sent row(s) in the window.";
  for (const auto& [sequence, i] : missing) {
    if (static_cast<int>(result.rows.size()) >= max_rows) break;
    result.rows.push_back(RowFinding(w.rows[i]));
  }
  if (result.count > 0) result.outcome = Outcome::kBroken;
  return result;
}

CheckResult DuplicatesCheck(const Window& w, const Receipts& receipts,
                            const std::vector<int32_t>& times, int max_rows) {
  CheckResult result("duplicates",
                     "Deliveries beyond a row's first (allowed: delivery is at-least-once).");
  int64_t messages = 0, distinct = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    distinct += times[i] > 0;
    if (times[i] < 2) continue;
    ++messages;
    result.count += times[i] - 1;
    if (static_cast<int>(result.rows.size()) < max_rows) {
      Finding f = RowFinding(w.rows[i]);
      f.emplace_back("deliveries", std::to_string(times[i]));
      result.rows.push_back(std::move(f));
    }
  }
  result.detail = std::to_string(receipts.lines) +
                  " line(s): " + std::to_string(receipts.rows.size()) + " deliveries of " +
                  std::to_string(distinct) + " row(s) of the window, " + std::to_string(messages) +
                  " delivered more than once; " + std::to_string(receipts.outside) +
                  " of rows outside it";
  if (receipts.skipped > 0) {
    result.detail += "; " + std::to_string(receipts.skipped) + " unreadable line(s) skipped";
  }
  result.detail += ".";
  return result;
}

CheckResult OrderCheck(const Window& w, const Receipts& receipts, const Options& options) {
  CheckResult result("received-order", "Per key, the first receipts follow the sequence.");
  std::vector<bool> seen(w.rows.size());
  std::unordered_map<std::string_view, int32_t> last;  // key -> position of its highest receipt
  for (int32_t i : receipts.rows) {
    const WindowRow& row = w.rows[i];
    if (row.key.empty() || seen[i]) continue;
    seen[i] = true;
    auto [it, first] = last.emplace(row.key, i);
    if (first) continue;
    const WindowRow& top = w.rows[it->second];
    if (row.sequence > top.sequence) {
      it->second = i;
      continue;
    }
    ++result.count;
    if (static_cast<int>(result.rows.size()) < options.max_rows) {
      Finding f = RowFinding(row);
      f.emplace_back("received_after_id", top.id);
      f.emplace_back("received_after_sequence", std::to_string(top.sequence));
      result.rows.push_back(std::move(f));
    }
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

Result<std::vector<CheckResult>> CheckReceived(const CheckContext& c) {
  QB_ASSIGN_OR_RETURN(Window window, ReadWindow(c));
  QB_ASSIGN_OR_RETURN(Receipts receipts, ReadReceipts(*c.options.received_file, window));
  std::vector<int32_t> times(window.rows.size());
  for (int32_t i : receipts.rows) ++times[i];
  std::vector<CheckResult> out;
  out.push_back(MissingCheck(window, times, c.options.max_rows));
  out.push_back(DuplicatesCheck(window, receipts, times, c.options.max_rows));
  out.push_back(OrderCheck(window, receipts, c.options));
  return out;
}

}  // namespace queuebox::verify
