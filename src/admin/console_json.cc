#include "admin/console_json.h"

#include <httplib.h>

#include "core/log.h"
#include "core/redaction.h"

namespace queuebox {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

void Optional(ordered_json& j, const char* name, const std::optional<std::string>& v) {
  j[name] = v ? json(*v) : json(nullptr);
}

}  // namespace

ordered_json ConsoleRowJson(const ConsoleRow& row, const std::string& destination) {
  ordered_json j;
  j["id"] = row.id;
  j["table"] = row.table;
  j["state"] = row.state;
  if (row.table == "outbox") {
    j["topic"] = row.topic;
    if (!destination.empty()) j["destination"] = destination;
    Optional(j, "key", row.key);
    j["sequence"] = row.sequence ? json(*row.sequence) : json(nullptr);
    j["maxAttempts"] = row.max_attempts ? json(*row.max_attempts) : json(nullptr);
  } else {
    j["source"] = row.topic;
    Optional(j, "idempotencyKey", row.idempotency_key);
    Optional(j, "aggregateId", row.key);
    Optional(j, "eventType", row.event_type);
  }
  j["attempt"] = row.attempt;
  Optional(j, "lastError", row.last_error);
  j["createdAt"] = row.created_at;
  j["updatedAt"] = row.updated_at;
  Optional(j, "scheduledAt", row.scheduled_at);
  return j;
}

ordered_json AttemptJson(const AttemptRow& a) {
  ordered_json j;
  j["attempt"] = a.attempt;
  j["outcome"] = a.outcome;
  Optional(j, "destination", a.destination);
  j["durationMs"] = a.duration_ms ? json(*a.duration_ms) : json(nullptr);
  Optional(j, "answer", a.answer);
  Optional(j, "error", a.error);
  j["recordedAt"] = a.recorded_at;
  return j;
}

ordered_json RedactedHeaders(const std::string& text) {
  ordered_json parsed = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return text;
  for (auto& [name, value] : parsed.items()) {
    if (IsSecretKey(name)) value = "[REDACTED]";
  }
  return parsed;
}

json PayloadJson(const std::string& text) {
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? json(text) : parsed;
}

Result<ConsoleQuery> ConsoleQueryFrom(const std::map<std::string, std::string>& fields) {
  ConsoleQuery q;
  auto get = [&](const char* name) -> std::optional<std::string> {
    auto it = fields.find(name);
    if (it == fields.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  if (auto t = get("table")) q.table = *t;
  if (q.table != "outbox" && q.table != "inbox") {
    return InvalidArgument("'table' must be outbox or inbox");
  }
  q.state = get("state");
  if (auto topic = get("topic")) q.topics = std::vector<std::string>{*topic};
  q.source = get("source");
  q.key = get("key");
  q.error_contains = get("error");
  q.created_after = get("createdAfter");
  q.created_before = get("createdBefore");
  q.cursor = get("cursor");
  if (auto limit = get("limit")) {
    char* end = nullptr;
    long n = std::strtol(limit->c_str(), &end, 10);
    if (end == limit->c_str() || *end != '\0' || n < 1 || n > 500) {
      return InvalidArgument("'limit' must be 1..500");
    }
    q.limit = static_cast<int>(n);
  }
  return q;
}

void ConsoleAnswer(httplib::Response& res, int status, const ordered_json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
  res.set_header("Cache-Control", "no-store");
}

void ConsoleFailure(httplib::Response& res, const Status& status) {
  if (status.code() == StatusCode::kInvalidArgument) {
    return ConsoleAnswer(res, 400, {{"error", "Invalid request: " + status.message()}});
  }
  log::Error("A console request failed.", {{"reason", status.ToString()}});
  ConsoleAnswer(res, status.code() == StatusCode::kUnavailable ? 503 : 500,
                {{"error", "The database request failed"}});
}

}  // namespace queuebox
