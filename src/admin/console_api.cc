// The console API's reads (console_api.h); the actions are in console_actions.cc.
#include "admin/console_api.h"

#include <httplib.h>

#include <algorithm>
#include <ctime>

#include "admin/console_json.h"
#include "admin/metrics.h"
#include "admin/replay.h"

namespace queuebox {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::map<std::string, std::string> ParamsOf(const httplib::Request& req) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : req.params) out.emplace(name, value);
  return out;
}

std::string MinuteText(int64_t unix_minute) {
  std::time_t t = static_cast<std::time_t>(unix_minute * 60);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:00Z", &tm);
  return buf;
}

const char* CircuitName(int state) {
  switch (state) {
    case 1:
      return "open";
    case 2:
      return "half_open";
    default:
      return "closed";
  }
}

ordered_json CountsJson(const ConsoleCounts& c) {
  return {{"rows", c.rows_by_state},
          {"estimated", c.estimated},
          {"oldestPendingAgeSeconds", c.oldest_pending_age_seconds}};
}

}  // namespace

std::string ConsoleApi::DestinationOf(const std::string& topic) const {
  auto i = router_.Match(topic);
  return i ? router_.route(*i).destination : std::string();
}

// Every replica's counts from the database; this replica's own when the table cannot be read (a
// schema without V24), with `scope` saying which.
nlohmann::ordered_json ConsoleApi::PerMinute(nlohmann::ordered_json& scope) {
  ordered_json minutes = ordered_json::array();
  auto cluster = console_.Activity(ActivityWindow::kMinutes);
  if (cluster.ok()) {
    scope = "cluster";
    for (const ConsoleMinute& m : *cluster) {
      minutes.push_back(
          {{"minute", MinuteText(m.unix_minute)}, {"sent", m.sent}, {"dead", m.dead}});
    }
    return minutes;
  }
  scope = "replica";
  if (metrics_ == nullptr) return minutes;
  for (const ActivityWindow::Minute& m : metrics_->Activity()) {
    minutes.push_back({{"minute", MinuteText(m.unix_minute)}, {"sent", m.sent}, {"dead", m.dead}});
  }
  return minutes;
}

void ConsoleApi::Overview(const httplib::Request&, httplib::Response& res) {
  ordered_json body;
  auto outbox = console_.Counts("outbox");
  if (!outbox.ok()) return ConsoleFailure(res, outbox.status());
  body["outbox"] = CountsJson(*outbox);
  if (inbox_ != nullptr) {
    auto inbox = console_.Counts("inbox");
    body["inbox"] = inbox.ok() ? CountsJson(*inbox) : ordered_json(nullptr);
  }
  ordered_json scope;
  body["perMinute"] = PerMinute(scope);
  body["perMinuteScope"] = scope;
  std::map<std::string, int> circuits;
  if (metrics_ != nullptr) circuits = metrics_->CircuitStates();
  ordered_json destinations = ordered_json::array();
  for (const auto& [name, d] : config_.destinations) {
    auto c = circuits.find(name);
    destinations.push_back({{"name", name},
                            {"type", d.type},
                            {"circuit", CircuitName(c == circuits.end() ? 0 : c->second)}});
  }
  body["destinations"] = destinations;
  ordered_json replicas = ordered_json::array();
  if (replicas_ != nullptr) {
    for (const ReplicaInfo& r : replicas_->Replicas()) {
      replicas.push_back({{"name", r.name},
                          {"heartbeatAgeSeconds", r.heartbeat_age_seconds},
                          {"startedAt", r.started_at}});
    }
  }
  body["replicas"] = replicas;
  body["capture"] = nullptr;
  if (metrics_ != nullptr) {
    if (auto capture = metrics_->Capture()) {
      body["capture"] = {
          {"streaming", capture->streaming},
          {"slotRetainedBytes",
           capture->slot_retained_bytes < 0 ? json(nullptr) : json(capture->slot_retained_bytes)}};
    }
  }
  ConsoleAnswer(res, 200, body);
}

Result<ConsoleQuery> ConsoleApi::Query(const std::map<std::string, std::string>& fields) {
  QB_ASSIGN_OR_RETURN(ConsoleQuery q, ConsoleQueryFrom(fields));
  auto destination = fields.find("destination");
  if (destination == fields.end() || destination->second.empty()) return q;
  if (q.table != "outbox") return InvalidArgument("'destination' filters the outbox");
  QB_ASSIGN_OR_RETURN(std::vector<std::string> all, store_.DistinctTopics());
  std::vector<std::string> routed;
  for (const std::string& t : all) {
    if (DestinationOf(t) != destination->second) continue;
    if (!q.topics || std::find(q.topics->begin(), q.topics->end(), t) != q.topics->end()) {
      routed.push_back(t);
    }
  }
  q.topics = routed;
  return q;
}

void ConsoleApi::Messages(const httplib::Request& req, httplib::Response& res) {
  auto query = Query(ParamsOf(req));
  if (!query.ok()) return ConsoleFailure(res, query.status());
  auto page = console_.List(*query);
  if (!page.ok()) return ConsoleFailure(res, page.status());
  ordered_json rows = ordered_json::array();
  for (const ConsoleRow& r : page->rows) rows.push_back(ConsoleRowJson(r, DestinationOf(r.topic)));
  ordered_json answer{{"rows", rows}, {"next", page->next ? json(*page->next) : json()}};
  if (page->searched) answer["searched"] = *page->searched;
  ConsoleAnswer(res, 200, answer);
}

void ConsoleApi::Message(const httplib::Request& req, httplib::Response& res) {
  const std::string table = req.has_param("table") ? req.get_param_value("table") : "outbox";
  std::string id = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  auto row = console_.Get(table, id);
  if (!row.ok()) return ConsoleFailure(res, row.status());
  if (!*row) return ConsoleAnswer(res, 404, {{"error", "No such message"}});
  ordered_json body = ConsoleRowJson(**row, table == "outbox" ? DestinationOf((*row)->topic) : "");
  body["payload"] = PayloadJson((*row)->payload.value_or("null"));
  body["headers"] = RedactedHeaders((*row)->headers.value_or("{}"));
  auto attempts = store_.Attempts(id);
  ordered_json timeline = ordered_json::array();
  if (attempts.ok()) {
    for (const AttemptRow& a : *attempts) timeline.push_back(AttemptJson(a));
  }
  body["attempts"] = timeline;
  if (table == "outbox") {
    int64_t behind = 0;
    if ((*row)->key && (*row)->sequence) {
      auto waiting = console_.WaitingBehind(*(*row)->key, *(*row)->sequence);
      if (!waiting.ok()) return ConsoleFailure(res, waiting.status());
      behind = *waiting;
    }
    body["waitingBehind"] = behind;
  } else {
    auto forwarded = console_.ForwardedFrom(id);
    if (!forwarded.ok()) return ConsoleFailure(res, forwarded.status());
    body["forwardedTo"] = *forwarded
                              ? ConsoleRowJson(**forwarded, DestinationOf((*forwarded)->topic))
                              : ordered_json(nullptr);
  }
  ConsoleAnswer(res, 200, body);
}

void ConsoleApi::InboxLookup(const httplib::Request& req, httplib::Response& res) {
  const std::string source = req.get_param_value("source");
  const std::string key = req.get_param_value("idempotencyKey");
  if (source.empty() || key.empty()) {
    return ConsoleAnswer(
        res, 400, {{"error", "Invalid request: 'source' and 'idempotencyKey' are required"}});
  }
  auto row = console_.FindInbox(source, key);
  if (!row.ok()) return ConsoleFailure(res, row.status());
  if (!*row) return ConsoleAnswer(res, 404, {{"error", "No such message"}});
  ordered_json body = ConsoleRowJson(**row, "");
  auto forwarded = console_.ForwardedFrom((*row)->id);
  if (!forwarded.ok()) return ConsoleFailure(res, forwarded.status());
  body["forwardedTo"] = *forwarded ? ConsoleRowJson(**forwarded, DestinationOf((*forwarded)->topic))
                                   : ordered_json(nullptr);
  ConsoleAnswer(res, 200, body);
}

}  // namespace queuebox
