// pg_arrays.h: the text forms the PostgreSQL stores bind for their batch statements
// (`unnest($1::uuid[], ...)`), the replay dialect built on them and the schema guard's column
// query, shared by the outbox and inbox stores.
//
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "store/common.h"

namespace queuebox::store {

// A PostgreSQL array literal of text elements: {"a","b\"c"}. One allocation; the text between
// two characters to escape is appended at once (ids and tokens have none).
inline std::string PgArray(const std::vector<std::string>& items) {
  size_t size = 2;
  for (const std::string& item : items) size += item.size() + 3;
  std::string out;
  out.reserve(size);
  out += '{';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    const char* run = items[i].data();  // the text not yet appended
    const char* const end = run + items[i].size();
    for (const char* c = run; c != end; ++c) {
      if (*c != '"' && *c != '\\') continue;
      out.append(run, c).append(1, '\\').append(1, *c);
      run = c + 1;
    }
    out.append(run, end);
    out += '"';
  }
  out += '}';
  return out;
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

// Timestamps as ISO-8601 UTC text with microseconds, whatever the session's TimeZone.
inline std::string Ts(const std::string& col) {
  return "to_char(" + col + " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')";
}

inline constexpr const char* kMs = " * interval '1 millisecond'";

// The columns of table $1, for the schema guard (common.h RequireColumn): name, type
// (information_schema's data_type) and the session's client encoding. Like QueueBox's
// SchemaGuard: the table as written, lower or upper case; columns compared without case.
inline constexpr const char* kPgTableColumnsSql =
    "SELECT column_name::text, data_type::text, current_setting('client_encoding') FROM "
    "information_schema.columns WHERE table_schema = ANY (current_schemas(false)) AND "
    "table_name::text IN ($1::text, lower($1::text), upper($1::text))";

// A fence whose id or token is not a UUID can never match (QueueBox: a null token never
// matches), so it is left out instead of failing the whole batch on the uuid cast.
inline bool Matchable(const Fence& f) { return IsUuid(f.id) && IsUuid(f.claim_token); }

// The items of a fenced batch write in id order. Each fenced UPDATE locks its rows in the order of
// its arrays (the plan probes with them: docs/claim-plans.md, "Acknowledgement plan"), so one
// order for every batch write keeps two of them that share rows (a lease renewal and an
// acknowledgement of the same replica, on two pooled connections) from locking in opposite
// orders and deadlocking, which PostgreSQL would break by failing one of them.
template <typename T, typename FenceOf>
std::vector<const T*> InIdOrder(std::span<const T> items, FenceOf fence_of) {
  std::vector<const T*> out;
  out.reserve(items.size());
  for (const T& item : items) {
    if (Matchable(fence_of(item))) out.push_back(&item);
  }
  std::sort(out.begin(), out.end(),
            [&](const T* a, const T* b) { return fence_of(*a).id < fence_of(*b).id; });
  return out;
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
