// inbox_row_checks.h: what every inbox row a source builds must be for the store to take it
// (queuebox/inbox.h, NewInboxMessage): shared by the broker message targets.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "queuebox/inbox.h"

namespace queuebox::fuzz {

// UTF-8 without NUL: text PostgreSQL and SQLite store as it is.
inline bool StorableText(std::string_view v) {
  return ValidUtf8(v) && v.find('\0') == std::string_view::npos;
}

inline void RequireStorableRow(const NewInboxMessage& row) {
  Require(!row.idempotency_key.empty() && StorableText(row.idempotency_key) &&
              CodePoints(row.idempotency_key) <= 255,
          "row: the idempotency key is 1-255 characters of UTF-8 without NUL");
  for (const std::optional<std::string>* v : {&row.aggregate_id, &row.event_type}) {
    if (*v) {
      Require(StorableText(**v) && CodePoints(**v) <= 255,
              "row: aggregate id and event type are at most 255 characters of UTF-8 without NUL");
    }
  }
  if (row.correlation_id) {
    Require(StorableText(*row.correlation_id) && CodePoints(*row.correlation_id) <= 128,
            "row: the correlation id is at most 128 characters of UTF-8 without NUL");
  }
  Require(StorableText(row.payload) &&
              !nlohmann::json::parse(row.payload, nullptr, false).is_discarded(),
          "row: the payload is one JSON document");
  nlohmann::json headers = nlohmann::json::parse(row.headers, nullptr, false);
  Require(headers.is_object(), "row: the headers are a JSON object");
  for (const auto& [name, value] : headers.items()) {
    Require(value.is_string() && StorableText(name) &&
                StorableText(value.get_ref<const std::string&>()),
            "row: each stored header is a string of UTF-8 without NUL");
  }
  Require(!row.dead || !row.last_error.empty(), "row: a dead row says why");
}

}  // namespace queuebox::fuzz
