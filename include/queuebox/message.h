// message.h: the outbox row as the relay sees it, and the fenced orders it writes back.
//
// Shapes follow seed 000 (the `outbox` table). Text columns are UTF-8; `payload` and `headers`
// are JSON text exactly as the database returns it (never re-encoded by the core). Times are
// ISO-8601 UTC text as read from the database, used for display only: every time decision is
// made by the database clock inside the store's statements.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace queuebox {

// Literal row states of the outbox (QueueBox reference §2.1).
inline constexpr const char* kStatePending = "pending";
inline constexpr const char* kStateProcessing = "processing";
inline constexpr const char* kStateSent = "sent";
inline constexpr const char* kStateDead = "dead";

// One claimed outbox row (state `processing`, owned through `claim_token`).
struct OutboxRow {
  std::string id;                             // UUID, lowercase text
  std::string topic;                          // routing input, <= 255 chars
  std::optional<std::string> key;             // unit of order; null or "" = unordered
  std::string payload;                        // JSON document text (the HTTP body)
  std::string headers = "{}";                 // JSON object of string values
  std::optional<std::string> aggregate_type;  // e.g. "order"
  int attempt = 0;                            // failed deliveries so far; X-Attempt
  int max_attempts = 5;                       // the row's dead-letter ceiling
  int64_t sequence = 0;                       // insert order; decides the head of a key
  std::string claim_token;                    // UUID of this claim (the fence)
  std::string created_at;                     // ISO-8601 UTC (display)
  std::string scheduled_at;                   // ISO-8601 UTC (display)
  // True when the store's payload column holds nothing but JSON (PostgreSQL jsonb read as UTF-8,
  // as the schema guard found it): `payload` is one JSON document and destinations need not
  // check it. False (checked) for SQLite, json and text columns, and rows not claimed by a store.
  bool payload_is_json = false;

  bool ordered() const { return key.has_value() && !key->empty(); }
};

// One delivery attempt as the attempt history keeps it (table outbox_attempts, docs/schema.md):
// the outcome write that ends the attempt inserts it in the same statement, for its row only
// when the fence holds. The outcome and the error come from the write itself.
struct AttemptRecord {
  int attempt = 0;           // the row's attempt column when claimed (failures before this one)
  std::string destination;   // empty: none (an unroutable row; an inbox forward)
  int64_t duration_ms = -1;  // the publish's duration; -1: nothing was published
  std::string answer;        // the HTTP status or the broker's answer; empty: none
};

// A fence: a terminal write matches only this id, in `processing`, with this token and an
// unexpired lease on the database clock (QueueBox reference §4 "Claim fence").
struct Fence {
  std::string id;
  std::string claim_token;
  // Set on an outcome write when the attempt history is on (OutboxStore::EnableAttemptHistory).
  std::optional<AttemptRecord> record = std::nullopt;
};

// Literal outcomes of the attempt history.
inline constexpr const char* kAttemptSent = "sent";
inline constexpr const char* kAttemptRetry = "retry";
inline constexpr const char* kAttemptReleased = "released";
inline constexpr const char* kAttemptDead = "dead";

// A row of the attempt history, as read back (OutboxOperations::Attempts).
struct AttemptRow {
  std::string message_id;
  int attempt = 0;
  std::string row_table;  // "outbox" or "inbox"
  std::optional<std::string> destination;
  std::string outcome;  // kAttempt*
  std::optional<int64_t> duration_ms;
  std::optional<std::string> answer, error;
  std::string recorded_at;  // ISO-8601 UTC, database clock
};

// Retry: back to `pending`, attempt + 1, scheduled_at = database now + delay_ms.
struct RetryOrder {
  Fence fence;
  int64_t delay_ms = 0;  // milliseconds after the database clock's now
  std::string error;     // already redacted and cut; stored in last_error
};

// Release (a destination outage): back to `pending`, attempt unchanged, scheduled_at = database
// now + delay_ms, last_error = error (the outage's reason).
struct ReleaseOrder {
  Fence fence;
  int64_t delay_ms = 0;  // milliseconds after the database clock's now
  std::string error;     // already redacted and cut; stored in last_error
};

// Dead: state `dead`, attempt unchanged, last_error = error.
struct DeadOrder {
  Fence fence;
  std::string error;  // already redacted and cut
};

// A row the application writes (the seed's insert: only topic and payload are required).
struct NewOutboxRow {
  std::string topic;
  std::optional<std::string> key;
  std::string payload;                 // JSON text
  std::optional<std::string> headers;  // JSON object text; default '{}'
  std::optional<std::string> aggregate_type;
  std::optional<int> max_attempts;  // default: column default 5
  std::optional<int64_t> delay_ms;  // scheduled_at = database now + delay_ms
  std::optional<std::string> id;    // default: a random UUID
};

}  // namespace queuebox
