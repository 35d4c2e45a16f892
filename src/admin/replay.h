// replay.h: the replay request of POST /admin/replay and `queuebox replay` (QueueBox reference
// §5.4). Parsing validates the filters; resolution turns `topic`, `topics` and `destination` into
// the one topic set the store filters on, and the store moves matching `sent`/`dead` rows back to
// `pending` (never `pending` or `processing`).
//
// Rules implemented:
//  - every filter is optional, the filters are ANDed, at least one is required
//    ("A replay needs at least one filter.");
//  - `ids` are UUIDs (lowercased); an empty list matches nothing;
//  - `createdAfter` / `createdBefore` are ISO-8601 instants, strict > / <, normalised to UTC
//    ("2024-05-01T10:00:00Z", fraction kept);
//  - `destination` is resolved through the live routes: the outbox's distinct topics are routed
//    (first match wins) and the topics whose destination equals the filter are kept; with
//    `topic`/`topics` as well only the intersection is kept (never adds a topic); nothing left
//    means 0 rows move (never "all").
//  - `table` picks the table (QueueBox C++ only; QueueBox replays the outbox and documents SQL for
//    the inbox, reference §5.4): "outbox" (default) or "inbox". An inbox replay moves `processed`
//    and `dead` inbox rows back to `pending` (attempt 0, due now; a replayed push row is
//    forwarded again as a new outbox row) and takes `ids`, `source`, `sources`, `createdAfter`,
//    `createdBefore`; `topic`, `topics` and `destination` belong to the outbox, `source` and
//    `sources` to the inbox (kInvalidArgument naming the field otherwise).
//
// Thread-safety: plain functions; RunReplay calls the store, which is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/router.h"
#include "queuebox/inbox.h"
#include "queuebox/status.h"
#include "queuebox/store.h"

namespace queuebox {

// The filters as the caller gave them (before resolution).
struct ReplayRequest {
  std::string table = "outbox";  // "outbox" | "inbox"
  std::optional<std::vector<std::string>> ids;
  std::optional<std::string> topic;
  std::optional<std::vector<std::string>> topics;
  std::optional<std::string> destination;
  std::optional<std::string> source;                // inbox only
  std::optional<std::vector<std::string>> sources;  // inbox only
  std::optional<std::string> created_after;         // ISO-8601 instant
  std::optional<std::string> created_before;        // ISO-8601 instant

  bool HasFilter() const {
    return ids || topic || topics || destination || source || sources || created_after ||
           created_before;
  }
  bool inbox() const { return table == "inbox"; }
  // A short description for the log line "Replay moved n row(s). Filter: ...". Ids are
  // counted, not listed.
  std::string Describe() const;
};

inline constexpr std::string_view kReplayNeedsFilter = "A replay needs at least one filter.";

// Parses a JSON request body. Unknown fields are ignored; null counts as absent.
// kInvalidArgument "<reason>" for invalid JSON, a wrong type, a bad UUID or a bad instant
// (the HTTP layer prefixes "Invalid request: "). Does not check HasFilter().
Result<ReplayRequest> ParseReplayRequest(std::string_view body);

// Validates and normalises the table, ids and instants in place (what ParseReplayRequest does
// after reading JSON). kInvalidArgument naming the bad value, or a filter of the other table.
Status NormaliseReplayRequest(ReplayRequest& request);

// Resolves the request into the store's filter. `router` is the live router (routes of the
// running configuration). kFailedPrecondition when the request has no filter.
Result<ReplayFilter> ResolveReplayFilter(const ReplayRequest& request, const Router& router,
                                         OutboxOperations& store);

// Resolves and runs the replay; returns the number of rows moved and logs
// "Replay moved n row(s). Filter: ...".
Result<int64_t> RunReplay(const ReplayRequest& request, const Router& router,
                          OutboxOperations& store);

// An inbox replay (request.table "inbox"): the store's filter from ids, source/sources
// (intersected) and the instants, then InboxOperations::Replay; logs
// "Replay moved n inbox row(s). Filter: ...". kFailedPrecondition without a filter.
Result<int64_t> RunInboxReplay(const ReplayRequest& request, InboxOperations& store);

// "Z"-normalised ISO-8601 instant, or kInvalidArgument. Accepts `YYYY-MM-DDTHH:MM:SS` with an
// optional fraction (1-9 digits) and a `Z` or `±HH:MM` offset (`t`/`z` and a space separator too).
Result<std::string> NormaliseInstant(std::string_view text);

// True for a UUID in 8-4-4-4-12 hex form.
bool IsUuid(std::string_view text);

}  // namespace queuebox
