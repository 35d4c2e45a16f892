// common.h: helpers shared by the SQL dialects of the outbox store (src/store/<dialect>).
//
// - identifier validation (database.outboxTableName and database.columnMapping.outbox.* must be
//   plain SQL identifiers, QueueBox reference §12.2) and quoting;
// - SQL templates that name columns by their logical name ({id}, {state}, ... and {T} for the
//   table) and are rendered once per store with the mapped, double-quoted identifiers;
// - the migration guard message and the retention state check, identical in every dialect.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "queuebox/status.h"
#include "queuebox/store.h"
#include "store/columns.h"
#include "store/open_store.h"

namespace queuebox::store {

// True when `name` matches ^[A-Za-z_][A-Za-z0-9_]*$.
bool IsValidIdentifier(std::string_view name);

// ASCII case-insensitive equality (identifiers).
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// "name" with double quotes (the name is a valid identifier, so no escaping is needed).
std::string Quote(std::string_view name);

// kInvalidArgument naming every bad setting (database.outboxTableName,
// database.columnMapping.outbox.<field>, database.inboxTableName,
// database.columnMapping.inbox.<field>) when a table or column name is not an identifier.
Status ValidateIdentifiers(const DatabaseConfig& config);

// Replaces {T} with the quoted table and {id}, {topic}, ... {sequence} (the OutboxColumns field
// names) with the quoted mapped column names. Other text, including '{}', is kept.
std::string RenderSql(std::string_view tmpl, const std::string& table, const OutboxColumns& cols);

// RequireDefaultSchema: declared in store/open_store.h (the app's check-config uses it too).

// Retention may delete only finished rows: OK for "sent" and "dead", otherwise kInvalidArgument
// "Cannot delete active work" (QueueBox reference §5.5).
Status RequireFinishedState(const std::string& state);

// A column the schema guard (QueueBox reference §3.6) requires in a table.
struct RequiredColumn {
  std::string_view kind;      // "outbox" | "inbox": the table's role in the messages
  std::string table, column;  // mapped names
  std::string_view purpose;   // what QueueBox uses the column for, one sentence
  StatusCode missing_table;   // the code when the table does not exist
  std::string alter;          // the statement (or steps) that add the column
};
// The outbox's sequence column and the inbox's headers column of `config`, `alter` adding it.
RequiredColumn OutboxSequenceColumn(const DatabaseConfig& config, std::string alter);
RequiredColumn InboxHeadersColumn(const DatabaseConfig& config, std::string alter);

// The schema guard over the column names of the table (`columns`, empty when there is no table):
// `missing_table` "The <kind> table '<t>' does not exist. ..." when there are none;
// kFailedPrecondition when none equals the column without case: "The <kind> table '<t>' has no
// column '<c>'. <purpose> Add the column, then start QueueBox again: <alter>".
Status RequireColumn(const RequiredColumn& required, const std::vector<std::string>& columns);

// FNV-1a (32 bit) of a migration's text, stored as its checksum in queuebox_schema_history.
int32_t MigrationChecksum(std::string_view sql);

// Integer parse without exceptions; nullopt on anything that is not a whole number.
std::optional<int64_t> ParseInt(std::string_view text);
// A result column as an integer (`fallback` when NULL or not a whole number) or as text ("" when
// NULL).
int64_t IntOr(const std::optional<std::string>& v, int64_t fallback);
std::string TextOr(const std::optional<std::string>& v);
// The same, moving the text out of `v` ("" for NULL).
std::string TakeText(std::optional<std::string>& v);

// The claim's window, in rows per row of the batch, in every store: twice the batch, so a few
// blocked rows among the heads never cost the key walk (postgres/claim.sql) or the skip scan.
inline constexpr int64_t kClaimWindowFactor = 2;

// A bound statement parameter (NULL, integer or text) and a result row read as text.
using SqlParam = std::variant<std::monostate, int64_t, std::string>;
using SqlRow = std::vector<std::optional<std::string>>;
using SqlRows = std::vector<SqlRow>;

// Result rows with their column names, for statements whose results are read by name.
struct SqlTable {
  std::vector<std::string> columns;
  SqlRows rows;
  // The position of the column `name`; kInternal naming it when the result has no such column.
  Result<size_t> Column(std::string_view name) const;
};

// A claimed row from the columns id, topic, key, payload, headers, aggregate_type, attempt,
// max_attempts, sequence, claim_token, created_at, scheduled_at (every dialect selects them in
// this order, timestamps as ISO-8601 UTC text).
OutboxRow ToOutboxRow(const SqlRow& row);
// Sorts claimed rows by (scheduled_at, sequence): RETURNING order is undefined (reference §4.1).
void SortClaimed(std::vector<OutboxRow>& rows);
// A dead row from id, topic, key, attempt, last_error, updated_at.
DeadRow ToDeadRow(const SqlRow& row);

// The attempt history (outbox_attempts): the columns an AttemptRow reads, in order, and the row.
inline constexpr const char* kAttemptColumns =
    "attempt, row_table, destination, outcome, duration_ms, answer, error";
AttemptRow ToAttemptRow(const SqlRow& row);  // message_id, kAttemptColumns, recorded_at

// Stats from the queries every dialect runs: (state, count) rows, one row with the oldest
// pending age in seconds (or NULL), (topic, count) rows of dead rows.
OutboxStats ToStats(const SqlRows& by_state, const SqlRows& oldest, const SqlRows& dead);
// PendingGauges' result from one row (pending count, oldest pending age in seconds or NULL).
OutboxStats ToPendingStats(const SqlRows& count_and_age);
// The first column of every row ("" for NULL).
std::vector<std::string> FirstColumn(const SqlRows& rows);
// The same, moving the texts out of `rows`.
std::vector<std::string> FirstColumn(SqlRows&& rows);
// RequireFinishedState plus `limit_name` >= 0 and batch > 0.
Status ValidateRetention(const std::string& state, int64_t limit, const char* limit_name,
                         int batch);

// How a dialect writes the parts of the replay statement.
struct ReplayDialect {
  std::string now;                 // the database clock
  std::string (*param)(size_t n);  // parameter n (1-based): "$1" / "?1"
  std::string (*in_list)(const std::string& column, const std::string& param);  // column IN list
  std::string (*list_value)(const std::vector<std::string>& items);             // list as text
  std::string (*instant)(const std::string& param);  // an ISO-8601 parameter as a timestamp
};

// The replay UPDATE (reference §5.4) as a template for RenderSql, with its parameters; nullopt
// when an empty `ids` or `topics` list makes it match nothing. kInvalidArgument for a bad instant.
struct ReplayStatement {
  std::string sql;
  std::vector<SqlParam> params;
};
Result<std::optional<ReplayStatement>> BuildReplay(const ReplayFilter& filter,
                                                   const ReplayDialect& dialect);

// kInvalidArgument unless limit > 0 and lease_ms > 0.
Status ValidateClaim(int limit, int64_t lease_ms);
// kInvalidArgument unless `value` is an ISO-8601 instant with a zone: 2024-01-31T10:00:00Z,
// 2024-01-31T10:00:00.123+02:00. `what` names the filter in the message.
Status ValidateInstant(const std::string& value, const char* what);

}  // namespace queuebox::store
