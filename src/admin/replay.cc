#include "admin/replay.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "core/log.h"

namespace queuebox {
namespace {

using nlohmann::json;

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int ToInt(std::string_view s) {
  int v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return v;
}

Result<std::vector<std::string>> StringList(const json& j, const char* field) {
  if (!j.is_array())
    return InvalidArgument(std::string("'") + field + "' must be a list of strings");
  std::vector<std::string> out;
  for (const auto& v : j) {
    if (!v.is_string()) {
      return InvalidArgument(std::string("'") + field + "' must be a list of strings");
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<std::optional<std::string>> OptionalString(const json& body, const char* field) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return InvalidArgument(std::string("'") + field + "' must be a string");
  return std::optional<std::string>(it->get<std::string>());
}

void Intersect(std::optional<std::set<std::string>>& acc, const std::set<std::string>& with) {
  if (!acc) {
    acc = with;
    return;
  }
  std::set<std::string> out;
  std::set_intersection(acc->begin(), acc->end(), with.begin(), with.end(),
                        std::inserter(out, out.begin()));
  acc = std::move(out);
}

}  // namespace

bool IsUuid(std::string_view t) {
  if (t.size() != 36) return false;
  for (size_t i = 0; i < t.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (t[i] != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(t[i]))) {
      return false;
    }
  }
  return true;
}

Result<std::string> NormaliseInstant(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument("'" + std::string(text) + "' is not an ISO-8601 instant such as " +
                           "2024-05-01T10:00:00Z");
  };
  // YYYY-MM-DDTHH:MM:SS
  if (text.size() < 20) return bad();
  std::string_view d = text.substr(0, 19);
  if (d[4] != '-' || d[7] != '-' || (d[10] != 'T' && d[10] != 't' && d[10] != ' ') ||
      d[13] != ':' || d[16] != ':') {
    return bad();
  }
  std::string_view parts[6] = {d.substr(0, 4),  d.substr(5, 2),  d.substr(8, 2),
                               d.substr(11, 2), d.substr(14, 2), d.substr(17, 2)};
  for (auto p : parts) {
    if (!AllDigits(p)) return bad();
  }
  std::tm tm{};
  tm.tm_year = ToInt(parts[0]) - 1900;
  tm.tm_mon = ToInt(parts[1]) - 1;
  tm.tm_mday = ToInt(parts[2]);
  tm.tm_hour = ToInt(parts[3]);
  tm.tm_min = ToInt(parts[4]);
  tm.tm_sec = ToInt(parts[5]);
  if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return bad();
  }
  std::string_view rest = text.substr(19);
  std::string fraction;
  if (!rest.empty() && rest[0] == '.') {
    size_t n = 1;
    while (n < rest.size() && rest[n] >= '0' && rest[n] <= '9') ++n;
    if (n == 1 || n > 10) return bad();
    fraction = std::string(rest.substr(0, n));
    rest = rest.substr(n);
  }
  long offset_s = 0;
  if (rest == "Z" || rest == "z") {
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' &&
             AllDigits(rest.substr(1, 2)) && AllDigits(rest.substr(4, 2))) {
    int hh = ToInt(rest.substr(1, 2)), mm = ToInt(rest.substr(4, 2));
    if (hh > 18 || mm > 59) return bad();
    offset_s = (hh * 3600L + mm * 60L) * (rest[0] == '-' ? -1 : 1);
  } else {
    return bad();
  }
  int day = tm.tm_mday;
  std::time_t secs = timegm(&tm);  // normalises tm: 2024-02-30 becomes 2024-03-01
  if (tm.tm_mday != day) return bad();
  secs -= offset_s;
  std::tm utc{};
  gmtime_r(&secs, &utc);
  // Four-digit years only (the offset can move 0001 or 9999 out): %Y would print year 227 as
  // "227", which does not parse back (found by fuzz/replay_request_fuzz.cc).
  const int year = utc.tm_year + 1900;
  if (year < 1 || year > 9999) return bad();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d", year, utc.tm_mon + 1, utc.tm_mday,
                utc.tm_hour, utc.tm_min, utc.tm_sec);
  return std::string(buf) + fraction + "Z";
}

std::string ReplayRequest::Describe() const {
  json j = json::object();
  if (inbox()) j["table"] = table;
  if (ids) j["ids"] = std::to_string(ids->size()) + " id(s)";
  if (topic) j["topic"] = *topic;
  if (topics) j["topics"] = *topics;
  if (destination) j["destination"] = *destination;
  if (source) j["source"] = *source;
  if (sources) j["sources"] = *sources;
  if (created_after) j["createdAfter"] = *created_after;
  if (created_before) j["createdBefore"] = *created_before;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Status NormaliseReplayRequest(ReplayRequest& r) {
  if (r.table != "outbox" && r.table != "inbox") {
    return InvalidArgument("'table' must be outbox or inbox, got '" + r.table + "'");
  }
  if (r.inbox()) {
    for (auto [set, field] : {std::pair<bool, const char*>{r.topic.has_value(), "topic"},
                              {r.topics.has_value(), "topics"},
                              {r.destination.has_value(), "destination"}}) {
      if (set) {
        return InvalidArgument(std::string("'") + field +
                               "' filters outbox rows; an inbox replay takes ids, source, sources, "
                               "createdAfter and createdBefore");
      }
    }
  } else {
    for (auto [set, field] : {std::pair<bool, const char*>{r.source.has_value(), "source"},
                              {r.sources.has_value(), "sources"}}) {
      if (set) {
        return InvalidArgument(std::string("'") + field +
                               "' filters inbox rows; set \"table\": \"inbox\" to replay the "
                               "inbox");
      }
    }
  }
  if (r.ids) {
    for (auto& id : *r.ids) {
      if (!IsUuid(id)) return InvalidArgument("'" + id + "' in 'ids' is not a UUID");
      std::transform(id.begin(), id.end(), id.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    }
  }
  for (auto* instant : {&r.created_after, &r.created_before}) {
    if (!*instant) continue;
    auto n = NormaliseInstant(**instant);
    if (!n.ok()) {
      const char* field = instant == &r.created_after ? "createdAfter" : "createdBefore";
      return InvalidArgument(std::string("'") + field + "': " + n.status().message());
    }
    *instant = std::move(n).value();
  }
  return Status::Ok();
}

Result<ReplayRequest> ParseReplayRequest(std::string_view body) {
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("the body is not valid JSON");
  if (!j.is_object()) return InvalidArgument("the body must be a JSON object");
  ReplayRequest r;
  if (auto it = j.find("ids"); it != j.end() && !it->is_null()) {
    QB_ASSIGN_OR_RETURN(r.ids, StringList(*it, "ids"));
  }
  if (auto it = j.find("topics"); it != j.end() && !it->is_null()) {
    QB_ASSIGN_OR_RETURN(r.topics, StringList(*it, "topics"));
  }
  if (auto it = j.find("sources"); it != j.end() && !it->is_null()) {
    QB_ASSIGN_OR_RETURN(r.sources, StringList(*it, "sources"));
  }
  QB_ASSIGN_OR_RETURN(std::optional<std::string> table, OptionalString(j, "table"));
  if (table) r.table = *table;
  QB_ASSIGN_OR_RETURN(r.source, OptionalString(j, "source"));
  QB_ASSIGN_OR_RETURN(r.topic, OptionalString(j, "topic"));
  QB_ASSIGN_OR_RETURN(r.destination, OptionalString(j, "destination"));
  QB_ASSIGN_OR_RETURN(r.created_after, OptionalString(j, "createdAfter"));
  QB_ASSIGN_OR_RETURN(r.created_before, OptionalString(j, "createdBefore"));
  QB_RETURN_IF_ERROR(NormaliseReplayRequest(r));
  return r;
}

Result<ReplayFilter> ResolveReplayFilter(const ReplayRequest& request, const Router& router,
                                         OutboxOperations& store) {
  if (!request.HasFilter()) return FailedPrecondition(std::string(kReplayNeedsFilter));
  ReplayFilter filter;
  filter.ids = request.ids;
  filter.created_after = request.created_after;
  filter.created_before = request.created_before;
  std::optional<std::set<std::string>> topics;
  if (request.topic) Intersect(topics, {*request.topic});
  if (request.topics) Intersect(topics, {request.topics->begin(), request.topics->end()});
  if (request.destination) {
    QB_ASSIGN_OR_RETURN(std::vector<std::string> all, store.DistinctTopics());
    std::set<std::string> routed;
    for (const auto& t : all) {
      auto i = router.Match(t);
      if (i && router.route(*i).destination == *request.destination) routed.insert(t);
    }
    Intersect(topics, routed);
  }
  if (topics) filter.topics = std::vector<std::string>(topics->begin(), topics->end());
  return filter;
}

Result<int64_t> RunReplay(const ReplayRequest& request, const Router& router,
                          OutboxOperations& store) {
  QB_ASSIGN_OR_RETURN(ReplayFilter filter, ResolveReplayFilter(request, router, store));
  int64_t moved = 0;
  // An empty resolved set (ids or topics) matches nothing: skip the statement.
  bool empty = (filter.ids && filter.ids->empty()) || (filter.topics && filter.topics->empty());
  if (!empty) {
    QB_ASSIGN_OR_RETURN(moved, store.Replay(filter));
  }
  log::Info("Replay moved " + std::to_string(moved) + " row(s). Filter: " + request.Describe(),
            {{"moved", std::to_string(moved)}});
  return moved;
}

Result<int64_t> RunInboxReplay(const ReplayRequest& request, InboxOperations& store) {
  if (!request.HasFilter()) return FailedPrecondition(std::string(kReplayNeedsFilter));
  InboxReplayFilter filter;
  filter.ids = request.ids;
  filter.created_after = request.created_after;
  filter.created_before = request.created_before;
  std::optional<std::set<std::string>> sources;
  if (request.source) Intersect(sources, {*request.source});
  if (request.sources) Intersect(sources, {request.sources->begin(), request.sources->end()});
  if (sources) filter.sources = std::vector<std::string>(sources->begin(), sources->end());
  QB_ASSIGN_OR_RETURN(int64_t moved, store.Replay(filter));
  log::Info(
      "Replay moved " + std::to_string(moved) + " inbox row(s). Filter: " + request.Describe(),
      {{"moved", std::to_string(moved)}, {"table", "inbox"}});
  return moved;
}

}  // namespace queuebox
