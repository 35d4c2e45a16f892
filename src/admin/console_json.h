// console_json.h: the console API's JSON (console_api.h): rows, filters read from a query string
// or a request body, headers with the values of secret names redacted, and error answers.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "queuebox/console.h"
#include "queuebox/message.h"
#include "queuebox/status.h"

namespace httplib {
struct Response;
}

namespace queuebox {

// A row as the API shows it (camelCase; the outbox's topic and key, the inbox's source,
// aggregateId, eventType, idempotencyKey). `destination` is shown for outbox rows when not empty.
nlohmann::ordered_json ConsoleRowJson(const ConsoleRow& row, const std::string& destination);
// An attempt of the history.
nlohmann::ordered_json AttemptJson(const AttemptRow& attempt);
// A JSON object of headers with the value of every secret name (IsSecretKey, as logs do)
// replaced by "[REDACTED]"; `text` that is not an object is returned as a string.
nlohmann::ordered_json RedactedHeaders(const std::string& text);
// A payload as its JSON value (the text when it does not parse).
nlohmann::json PayloadJson(const std::string& text);

// The filter names the API reads (query parameters or a body's "filter" object):
// table, state, topic, source, key, error, createdAfter, createdBefore, cursor, limit.
// `destination` is resolved by the caller into topics. kInvalidArgument naming a bad value.
Result<ConsoleQuery> ConsoleQueryFrom(const std::map<std::string, std::string>& fields);

// Writes `body` with `status` (application/json).
void ConsoleAnswer(httplib::Response& res, int status, const nlohmann::ordered_json& body);
// 400 "Invalid request: ..." for kInvalidArgument, 503 for kUnavailable, else 500 (logged).
void ConsoleFailure(httplib::Response& res, const Status& status);

}  // namespace queuebox
