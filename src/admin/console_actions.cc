// The console API's actions (console_api.h): replay and discard, by ids or by filter, counted
// first and done only with "confirm": true.
#include <httplib.h>

#include <algorithm>

#include "admin/console_api.h"
#include "admin/console_json.h"
#include "admin/replay.h"
#include "core/log.h"

namespace queuebox {
namespace {

using nlohmann::json;

// Rows acted on per statement when a filter selects them.
constexpr int kActionPage = 500;

}  // namespace

struct ConsoleApi::Target {
  std::string table = "outbox";
  std::optional<std::vector<std::string>> ids;
  ConsoleQuery query;  // when no ids
  bool confirm = false;
};

Result<ConsoleApi::Target> ConsoleApi::TargetOf(const std::string& body, bool discard) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("the body must be a JSON object");
  Target t;
  if (j.contains("table") && j["table"].is_string()) t.table = j["table"].get<std::string>();
  if (t.table != "outbox" && t.table != "inbox") {
    return InvalidArgument("'table' must be outbox or inbox");
  }
  if (t.table == "inbox" && inbox_ == nullptr) return InvalidArgument("this store has no inbox");
  t.confirm = j.value("confirm", false) == true;
  if (j.contains("ids")) {
    if (!j["ids"].is_array()) return InvalidArgument("'ids' must be a list of UUIDs");
    t.ids.emplace();
    for (const json& id : j["ids"]) {
      if (!id.is_string() || !IsUuid(id.get<std::string>())) {
        return InvalidArgument("'ids' must be a list of UUIDs");
      }
      std::string lower = id.get<std::string>();
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      t.ids->push_back(lower);
    }
    return t;
  }
  if (!j.contains("filter") || !j["filter"].is_object()) {
    return InvalidArgument("give 'ids' or a 'filter' object");
  }
  std::map<std::string, std::string> fields{{"table", t.table}};
  for (const auto& [name, value] : j["filter"].items()) {
    if (!value.is_string()) return InvalidArgument("'" + name + "' must be a string");
    fields[name] = value.get<std::string>();
  }
  fields.erase("cursor");
  fields.erase("limit");
  QB_ASSIGN_OR_RETURN(t.query, Query(fields));
  const std::string finished = t.table == "outbox" ? "sent" : "processed";
  if (!t.query.state) t.query.state = "dead";
  if (*t.query.state != "dead" && (discard || *t.query.state != finished)) {
    return InvalidArgument(discard ? "only dead rows are discarded"
                                   : "only dead and " + finished + " rows are replayed");
  }
  t.query.limit = kActionPage;
  return t;
}

Result<int64_t> ConsoleApi::Matching(const Target& t) {
  if (!t.ids) return console_.Count(t.query);
  int64_t n = 0;
  for (const std::string& id : *t.ids) {
    QB_ASSIGN_OR_RETURN(std::optional<ConsoleRow> row, console_.Get(t.table, id));
    if (row && row->state != "pending" && row->state != "processing") ++n;
  }
  return n;
}

Result<int64_t> ConsoleApi::ActOnIds(const std::string& table, const std::vector<std::string>& ids,
                                     bool discard) {
  if (discard) {
    QB_ASSIGN_OR_RETURN(int64_t gone, console_.DiscardDead(table, ids));
    log::Info("The console discarded " + std::to_string(gone) + " dead row(s).",
              {{"table", table}, {"deleted", std::to_string(gone)}});
    return gone;
  }
  ReplayRequest request;
  request.table = table;
  request.ids = ids;
  return table == "inbox" ? RunInboxReplay(request, *inbox_) : RunReplay(request, router_, store_);
}

// By filter: page after page of the matching rows, each from where the last one stopped (its
// `next`); the rows acted on leave the filter's state. A page of an error-text filter may be
// empty and still have a `next` (it searched its window), so only the last page ends the loop.
Result<int64_t> ConsoleApi::Act(const Target& t, bool discard) {
  if (t.ids) return ActOnIds(t.table, *t.ids, discard);
  ConsoleQuery query = t.query;
  int64_t done = 0;
  for (;;) {
    QB_ASSIGN_OR_RETURN(ConsolePage page, console_.List(query));
    if (!page.rows.empty()) {
      std::vector<std::string> ids;
      for (const ConsoleRow& r : page.rows) ids.push_back(r.id);
      QB_ASSIGN_OR_RETURN(int64_t n, ActOnIds(t.table, ids, discard));
      done += n;
    }
    if (!page.next) return done;
    query.cursor = page.next;
  }
}

void ConsoleApi::Action(const std::string& body, httplib::Response& res, bool discard) {
  auto target = TargetOf(body, discard);
  if (!target.ok()) return ConsoleFailure(res, target.status());
  if (!target->confirm) {
    auto n = Matching(*target);
    if (!n.ok()) return ConsoleFailure(res, n.status());
    return ConsoleAnswer(res, 200, {{"matching", *n}, {"confirmed", false}});
  }
  auto n = Act(*target, discard);
  if (!n.ok()) return ConsoleFailure(res, n.status());
  ConsoleAnswer(res, 200, {{discard ? "deleted" : "moved", *n}, {"confirmed", true}});
}

void ConsoleApi::Replay(const std::string& body, httplib::Response& res) {
  Action(body, res, /*discard=*/false);
}

void ConsoleApi::Discard(const std::string& body, httplib::Response& res) {
  Action(body, res, /*discard=*/true);
}

}  // namespace queuebox
