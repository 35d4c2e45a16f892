// inbox_common.h: helpers shared by the SQL dialects of the inbox store.
//
// - SQL templates for the inbox: {T} is the quoted inbox table and {id}, {source}, ... the quoted
//   mapped inbox columns (the InboxColumns member names); {O} is the quoted outbox table and
//   {o.topic}, {o.key}, ... its mapped columns (the statements that write both tables);
// - the checks of a received message before it is stored (InboxIntake::Store);
// - the retention state rule of the inbox.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/inbox.h"
#include "queuebox/status.h"
#include "queuebox/store.h"
#include "store/common.h"

namespace queuebox::store {

// Renders an inbox template (see above) with config's mapped, double-quoted names.
std::string RenderInboxSql(std::string_view tmpl, const DatabaseConfig& config);

// OK when `message` can be stored as given; otherwise kInvalidArgument naming the first problem
// (InboxIntake::Store lists the rules). Parses the payload once without building it (a SAX pass):
// valid JSON, UTF-8, nesting at most kMaxJsonDepth, no NUL character in a string (PostgreSQL's
// jsonb refuses \u0000, so SQLite refuses it too). Headers: a JSON object of strings.
Status CheckNewInboxMessage(const NewInboxMessage& message);

// A dialect's one-statement insert of checked messages; outcomes in the batch's order.
using InboxBatchInsert = std::function<Result<std::vector<InboxStoreOutcome>>(
    const std::vector<const NewInboxMessage*>&)>;

// InboxIntake::Store for every dialect: CheckNewInboxMessage on each message (a failure is that
// message's kRejected), one `insert` for the rest, and, when the database refuses a value the
// checks let through (kInvalidArgument), one insert per message so only that one is rejected.
// Other errors are returned as they are.
Result<std::vector<InboxStoreOutcome>> StoreInboxBatch(std::span<const NewInboxMessage> messages,
                                                       const InboxBatchInsert& insert);

// The outcome of each message of `batch` from the rows its insert returned (id, source,
// idempotency_key; a key already stored returns none): the first message of a returned key is
// kStored with the row's id, every other message kDuplicate. kInternal when a row lacks a column.
Result<std::vector<InboxStoreOutcome>> InboxInsertOutcomes(
    const std::vector<const NewInboxMessage*>& batch, const SqlRows& inserted);

// The deepest JSON nesting stored: SQLite's json_valid stops at 1000 levels.
inline constexpr int kMaxJsonDepth = 1000;

// Retention of the inbox may delete only finished rows: OK for "processed" and "dead", otherwise
// kInvalidArgument "Cannot delete active work" (QueueBox reference §5.5). Plus `limit_name` >= 0
// and batch > 0.
Status ValidateInboxRetention(const std::string& state, int64_t limit, const char* limit_name,
                              int batch);

// Stats from the queries every dialect runs: (source, state, count) rows and one row with the
// oldest pending push age in seconds (or NULL).
InboxStats ToInboxStats(const SqlRows& by_source_state, const SqlRows& oldest);
// A dead row from id, source, idempotency_key, aggregate_id, event_type, attempt, last_error,
// created_at.
DeadInboxRow ToDeadInboxRow(const SqlRow& row);
// A claimed row from the columns every dialect's claim returns, in this order: id, source,
// idempotency_key, aggregate_id, event_type, correlation_id, headers, attempt, claim_token,
// created_at, scheduled_at (more columns after those are ignored).
ClaimedInboxRow ToClaimedInboxRow(const SqlRow& row);

// The inbox replay UPDATE (QueueBox reference §5.4, its inbox requeue: processed and dead rows
// back to pending) as an inbox template, with its parameters; nullopt when an empty `ids` or
// `sources` list makes it match nothing. kInvalidArgument for a bad instant.
Result<std::optional<ReplayStatement>> BuildInboxReplay(const InboxReplayFilter& filter,
                                                        const ReplayDialect& dialect);

// The Java String.hashCode of `text` (UTF-16 code units of ASCII text: its bytes), sign-extended:
// the key QueueBox's relay passes to pg_advisory_xact_lock for the inbox table name (reference
// §4.6), so QueueBox and QueueBox C++ replicas on one database serialise their claims together.
int64_t JavaStringHash(std::string_view text);

}  // namespace queuebox::store
