// console.h: what the operator console (docs/console.md, /admin/api/) reads from a store: the
// rows of the outbox and the inbox by filter with keyset pagination, one message whole, counts
// that avoid a full-table scan, an inbox row by (source, idempotency key) with the outbox row it
// became, and the discard of dead rows. One implementation for every SQL dialect
// (src/store/console_sql.h), reached through OutboxStore::console().
//
// Errors: as store.h (kUnavailable, kInvalidArgument, kInternal).
// Thread-safety: every method may be called from several threads at once.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/status.h"

namespace queuebox {

// A list query, filters ANDed. `table` is "outbox" or "inbox".
struct ConsoleQuery {
  std::string table = "outbox";
  std::optional<std::string> state;                // a state literal of the table
  std::optional<std::vector<std::string>> topics;  // outbox: topic IN (...); empty matches none
  std::optional<std::string> source;               // inbox: source =
  std::optional<std::string> key;                  // outbox key / inbox aggregate_id =
  std::optional<std::string> error_contains;       // last_error contains (case-insensitive)
  std::optional<std::string> created_after;        // ISO-8601 instant, strict >
  std::optional<std::string> created_before;       // ISO-8601 instant, strict <
  // Keyset pagination: the `next` of the previous page (opaque), rows after it.
  std::optional<std::string> cursor;
  int limit = 50;  // 1..500
};

// One row of a list or of a message view. Times are ISO-8601 UTC (database clock).
struct ConsoleRow {
  std::string table;  // "outbox" | "inbox"
  std::string id, state;
  std::string topic;                           // outbox topic / inbox source
  std::optional<std::string> key;              // outbox key / inbox aggregate_id
  std::optional<std::string> event_type;       // inbox only
  std::optional<std::string> idempotency_key;  // inbox only
  int attempt = 0;
  std::optional<int> max_attempts;  // outbox only
  std::optional<int64_t> sequence;  // outbox only
  std::optional<std::string> last_error;
  std::string created_at, updated_at;  // inbox: updated_at is processed_at or created_at
  std::optional<std::string> scheduled_at;
  // Message view only (GetMessage): the JSON texts as stored.
  std::optional<std::string> payload, headers;
};

struct ConsolePage {
  std::vector<ConsoleRow> rows;
  std::optional<std::string> next;  // cursor of the next page; unset on the last page
  // With an error-text filter only: the rows of the other filters read for this page, at most
  // 10,000. A page that read all 10,000 holds the matches among them (perhaps none) and a `next`
  // to search on from the last row read, so that no page reads the whole table.
  std::optional<int64_t> searched;
};

// Rows per state of the outbox or the inbox. `estimated` lists the states whose figure is the
// planner's estimate (PostgreSQL: the table's row estimate less the other states' exact
// counts), read without a scan of the table.
struct ConsoleCounts {
  std::map<std::string, int64_t> rows_by_state;
  std::vector<std::string> estimated;
  double oldest_pending_age_seconds = 0;  // database clock; 0 when none pending
};

// How long queuebox_console_activity keeps a minute.
inline constexpr int kConsoleActivityKeepMinutes = 60;

// Messages sent and made dead in one minute, summed over every replica of the outbox table.
struct ConsoleMinute {
  int64_t unix_minute = 0;  // minutes since the epoch, database clock
  int64_t sent = 0, dead = 0;
};

class ConsoleQueries {
 public:
  virtual ~ConsoleQueries() = default;
  // A page of rows, newest first: the outbox by (updated_at, sequence), the inbox by
  // (created_at, id). kInvalidArgument for a bad state, cursor, instant or limit.
  virtual Result<ConsolePage> List(const ConsoleQuery& query) = 0;
  // The rows the query matches (its cursor and limit ignored).
  virtual Result<int64_t> Count(const ConsoleQuery& query) = 0;
  // One row of `table` with payload and headers; nullopt when there is none.
  virtual Result<std::optional<ConsoleRow>> Get(const std::string& table,
                                                const std::string& id) = 0;
  // Outbox rows of `key` after `sequence` that are pending or processing: they wait behind it.
  virtual Result<int64_t> WaitingBehind(const std::string& key, int64_t sequence) = 0;
  // Rows per state of `table` and the age of its oldest pending row.
  virtual Result<ConsoleCounts> Counts(const std::string& table) = 0;
  // The inbox row of (source, idempotency_key), nullopt when none.
  virtual Result<std::optional<ConsoleRow>> FindInbox(const std::string& source,
                                                      const std::string& idempotency_key) = 0;
  // The outbox row an inbox row became (its x-inbox-id header), nullopt when none (yet).
  virtual Result<std::optional<ConsoleRow>> ForwardedFrom(const std::string& inbox_id) = 0;
  // Deletes the `dead` rows of `table` among `ids` (other states are kept) with their attempt
  // history. Returns the rows deleted.
  virtual Result<int64_t> DiscardDead(const std::string& table,
                                      const std::vector<std::string>& ids) = 0;
  // Adds `sent` and `dead` (messages, >= 0) to the row of (this outbox table, the database
  // clock's current minute, `replica_id`) in queuebox_console_activity (V24, docs/schema.md),
  // and deletes the rows of every replica older than kConsoleActivityKeepMinutes. One row per
  // replica and minute: replicas never write the same row.
  virtual Status RecordActivity(const std::string& replica_id, int64_t sent, int64_t dead) = 0;
  // The last `minutes` (1..kConsoleActivityKeepMinutes) minutes ending with the database clock's
  // current minute, oldest first, each summed over every replica (zeros where none recorded).
  virtual Result<std::vector<ConsoleMinute>> Activity(int minutes) = 0;
};

}  // namespace queuebox
