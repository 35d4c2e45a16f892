// pg_arrays.h: the text forms the PostgreSQL stores bind for their batch statements
// (`unnest($1::uuid[], ...)`) and the replay dialect built on them, shared by the outbox and inbox
// stores.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "store/common.h"

namespace queuebox::store {

// A PostgreSQL array literal of text elements: {"a","b\"c"}.
inline std::string PgArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

// True for a UUID in 8-4-4-4-12 hex form (either case).
inline bool IsUuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return false;
    }
  }
  return true;
}

// Replay's PostgreSQL forms (common.h BuildReplay / BuildInboxReplay): $n placeholders, array
// parameters, database-clock timestamps. Ids are UUIDs: a malformed one is kInvalidArgument
// (SQLSTATE 22P02).
inline const ReplayDialect& PgReplayDialect() {
  static const ReplayDialect kDialect{
      "clock_timestamp()", [](size_t n) { return "$" + std::to_string(n); },
      [](const std::string& col, const std::string& p) {
        return col + " = ANY (" + p + (col == "{id}" ? "::uuid[])" : "::text[])");
      },
      &PgArray, [](const std::string& p) { return p + "::timestamptz"; }};
  return kDialect;
}

}  // namespace queuebox::store
