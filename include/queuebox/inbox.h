// inbox.h: the inbox store contract (QueueBox reference §2.2, §3.3, §4.5-4.6, §5.4-5.5, §11).
// One implementation per SQL dialect, reached through OutboxStore::inbox() (store.h): the inbox
// shares the outbox store's connections, because the relay writes both tables in one transaction.
//
// Callers, each taking the narrowest interface:
//   InboxIntake        sources (HTTP webhooks, brokers): store received messages, deduplicated
//   InboxRelayClaims   the inbox relay: claim push rows under a lease, forward them into the
//                      outbox (fenced, one transaction), dead-letter, renew, reclaim
//   InboxOperations    operators and the admin API: counts, dead rows, replay, retention
//   InboxStore         all three, plus the schema guard
//
// Every time decision (scheduled_at, leases, retention ages) is made with the database clock
// inside the statement, as in store.h. Batched calls issue one statement per batch (the forward:
// one transaction). Payloads are JSON text as the database returns it, never re-encoded.
//
// Errors: kUnavailable when the database cannot be reached (retry with backoff); kInvalidArgument
// for bad input; kInternal for a statement the database refused.
// Thread-safety: every method may be called from several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/message.h"
#include "queuebox/status.h"

namespace queuebox {

// Literal row states of the inbox (QueueBox reference §2.2).
inline constexpr const char* kInboxStatePending = "pending";
inline constexpr const char* kInboxStateProcessing = "processing";
inline constexpr const char* kInboxStateProcessed = "processed";
inline constexpr const char* kInboxStateDead = "dead";

// Headers the relay sets on the outbox row (QueueBox reference §9.2), replacing a received header
// of the same name in any letter case.
inline constexpr const char* kHeaderInboxId = "x-inbox-id";
inline constexpr const char* kHeaderSource = "x-source";
inline constexpr const char* kHeaderIdempotencyKey = "x-idempotency-key";
inline constexpr const char* kHeaderCorrelationId = "X-Correlation-Id";

// Column names of the inbox (database.columnMapping.inbox.*); defaults are QueueBox's (§3.3).
struct InboxColumns {
  std::string id = "id", source = "source", idempotency_key = "idempotency_key",
              aggregate_id = "aggregate_id", event_type = "event_type", payload = "payload",
              state = "state", created_at = "created_at", processed_at = "processed_at",
              claimed_at = "claimed_at", claim_token = "claim_token",
              lease_expires_at = "lease_expires_at", correlation_id = "correlation_id",
              consumption = "consumption", scheduled_at = "scheduled_at", attempt = "attempt",
              last_error = "last_error", headers = "headers";
  bool operator==(const InboxColumns&) const = default;
  bool IsDefault() const { return *this == InboxColumns{}; }
};

// Who consumes a source's rows (sources.<name>.consumption), stored on the row at receipt: push
// rows are forwarded into the outbox by the relay; pull rows are claimed by application workers
// and never touched by the relay (QueueBox reference §11.4, §11.7).
enum class InboxConsumption { kPush, kPull };

inline std::string_view ConsumptionName(InboxConsumption c) {
  return c == InboxConsumption::kPull ? "pull" : "push";
}

// A received message, as a source hands it to the store.
struct NewInboxMessage {
  // The row's id when the caller chose it (a lowercase UUID: the $messageId a source transform
  // saw); empty: the database makes one.
  std::string id;
  std::string source;           // sources.<name>; <= 255 characters
  std::string idempotency_key;  // the dedup key within the source; <= 255 characters, not empty
  std::optional<std::string> aggregate_id;    // unit of order (the outbox key); <= 255 characters
  std::optional<std::string> event_type;      // {{ eventType }} of the topic template; <= 255
  std::optional<std::string> correlation_id;  // X-Correlation-Id; <= 128 characters
  std::string payload;                        // JSON text (any JSON value); stored as is
  std::string headers = "{}";                 // JSON object of string values
  InboxConsumption consumption = InboxConsumption::kPush;
  // Stored `dead` at once, never `pending` (QueueBox reference §2.2: a broker body that is not
  // JSON, stored as {"raw": ...}; a source transform with onError Fail/Dead). `last_error` says
  // why (already redacted). A dead row gets no delay.
  bool dead = false;
  std::string last_error;
  // scheduled_at = min(publish time, database now) + delay_ms (QueueBox reference §11.5):
  // delay_ms is sources.<name>.initialDelay in ms (>= 0); publish_time_ms the message's publish
  // time in Unix ms (scheduledAtHeader/Path, a broker's timestamp), unset: the database now.
  int64_t delay_ms = 0;
  std::optional<int64_t> publish_time_ms;
};

// What Store did with one message.
struct InboxStoreOutcome {
  enum class Kind {
    kStored,     // a new row; `id` is its id (the 202 {"messageId": ...} of a webhook)
    kDuplicate,  // (source, idempotency_key) was already stored, or came earlier in this batch
    kRejected,   // bad input, nothing stored: `error` is kInvalidArgument naming the problem
  };
  Kind kind = Kind::kStored;
  std::string id;  // kStored only: UUID, lowercase text
  Status error;    // kRejected only
};

// Storing received messages (QueueBox reference §11.1 step 8, §11.3). The unique
// (source, idempotency_key) of the table is the dedup: across replicas and concurrent writers,
// a key is stored once.
class InboxIntake {
 public:
  virtual ~InboxIntake() = default;

  // Stores a batch with ONE statement (insert-or-skip on the unique key), in one transaction.
  // Returns one outcome per input, in input order. Within the batch the first occurrence of a
  // (source, idempotency_key) is stored and later ones answer kDuplicate. created_at follows the
  // input order, so the relay forwards one aggregate's messages of a batch in input order.
  // A message is kRejected (the others are still stored) when: the payload is not JSON; the
  // headers are not a JSON object of strings; a text is not UTF-8, contains NUL, or exceeds its
  // column (source/idempotency_key/aggregate_id/event_type 255 characters, correlation_id 128);
  // the source or idempotency key is empty; delay_ms < 0.
  // The Result fails only for the whole batch (kUnavailable: nothing was stored, retry).
  virtual Result<std::vector<InboxStoreOutcome>> Store(
      std::span<const NewInboxMessage> messages) = 0;
};

// A push row claimed by the relay (state `processing`, owned through `claim_token`). The payload
// is not read: the forward copies it inside the database.
struct ClaimedInboxRow {
  std::string id;  // UUID, lowercase text
  std::string source;
  std::string idempotency_key;
  std::optional<std::string> aggregate_id;
  std::optional<std::string> event_type;
  std::optional<std::string> correlation_id;
  std::string headers = "{}";  // JSON object as stored
  int attempt = 0;
  std::string claim_token;   // the fence
  std::string created_at;    // ISO-8601 UTC (display)
  std::string scheduled_at;  // ISO-8601 UTC (display)
};

// Forwarding one claimed row: the outbox row to insert, written only while the claim holds.
// The outbox row's key is the inbox aggregate_id and its payload the inbox payload (both copied
// in the database); its id, state, attempt and times take the outbox defaults.
struct InboxForward {
  Fence fence;           // the inbox row and its claim
  std::string topic;     // rendered from the source's topic template; 1..255 characters
  std::string headers;   // JSON object text (inbox headers + the relay headers of §9.2)
  int max_attempts = 5;  // inbox.relay.maxAttempts
};

// What the relay does with one row of a one-transaction forward (InboxRelayClaims::ForwardDue):
// forward it as `forward` says (its fence is ignored: the transaction holds the row), or, when
// `dead_error` is not empty, make it `dead` with that last_error instead.
struct InboxForwardPlan {
  InboxForward forward;
  std::string dead_error;
};

// Called by ForwardDue once per claimed row, on the caller's thread, inside the transaction: must
// be quick and touch no database. The row's claim_token is empty (no lease is taken).
using InboxForwardPlanner = std::function<InboxForwardPlan(const ClaimedInboxRow&)>;

// The answer of a one-transaction forward.
struct InboxForwardDue {
  size_t claimed = 0;                  // rows the claim took (forwarded + dead)
  std::vector<std::string> forwarded;  // inbox ids now `processed`, outbox rows inserted
  std::vector<std::string> dead;       // inbox ids now `dead` (their plan's dead_error)
  bool lane_busy = false;              // ForwardDueInLane: another claimer holds the lane
};

// The answer of InboxRelayClaims::DueLanes.
struct InboxDueLanes {
  std::vector<int> lanes;   // ascending
  bool probe_full = false;  // the probe read its every row: more may be due, in any lane
};

// The relay's path through the inbox (QueueBox reference §4.5, §4.6, §11.6).
class InboxRelayClaims {
 public:
  virtual ~InboxRelayClaims() = default;

  // Claims up to `limit` due pending push rows in (scheduled_at, created_at) order, at most one
  // per aggregate_id in flight: a row is claimed only when no push row of its aggregate is in
  // `processing` and it is its aggregate's first pending row; rows without an aggregate_id are
  // unordered. Holds across every source and every replica (docs/inbox.md, "The claim").
  // lease = database now + lease_ms. kInvalidArgument unless limit > 0 and lease_ms > 0.
  virtual Result<std::vector<ClaimedInboxRow>> ClaimPush(int limit, int64_t lease_ms) = 0;

  // Claim and forward in ONE transaction, without a lease or the `processing` state: claims the
  // rows ClaimPush would (same order, same one-per-aggregate rule, rows locked so other claimers
  // skip them), asks `plan` for each in claim order, then marks each `processed` with its outbox
  // row inserted (in claim order) or `dead`, and commits. Each row changes state once instead of
  // twice, which halves the inbox's index writes. A failure rolls back everything: the rows stay
  // `pending` and nothing is inserted. kInvalidArgument unless limit > 0; kFailedPrecondition
  // when !HasForwardDue() (the relay then uses ClaimPush + Forward).
  virtual bool HasForwardDue() const { return false; }
  virtual Result<InboxForwardDue> ForwardDue(int /*limit*/, const InboxForwardPlanner& /*plan*/) {
    return FailedPrecondition("this inbox store has no one-transaction forward");
  }

  // Lanes (docs/inbox.md, "Lanes"): the push rows split into ForwardLanes() fixed lanes by a
  // hash of aggregate_id (of id without one), so one aggregate is always in one lane; each lane
  // is claimed by one transaction at a time, lanes side by side. ForwardDueInLane is ForwardDue
  // restricted to the rows of `lane` (0 <= lane < ForwardLanes()); when another claimer holds
  // the lane it returns at once with lane_busy and nothing claimed. A store without lanes
  // answers 1 (ForwardDue is its only lane).
  virtual int ForwardLanes() const { return 1; }
  // The lanes holding due pending push rows among the first `probe_rows` of them in claim order;
  // every lane, probe_full, when there are `probe_rows` or more (the rest may be in any lane).
  // One cheap read: the relay forwards fewer due rows than a batch in one ForwardDue, and more
  // in the lanes, side by side.
  virtual Result<InboxDueLanes> DueLanes(int /*probe_rows*/) {
    InboxDueLanes all;
    for (int lane = 0; lane < ForwardLanes(); ++lane) all.lanes.push_back(lane);
    all.probe_full = true;
    return all;
  }
  virtual Result<InboxForwardDue> ForwardDueInLane(int /*lane*/, int limit,
                                                   const InboxForwardPlanner& plan) {
    return ForwardDue(limit, plan);
  }

  // In ONE transaction: marks `processed` every inbox row whose fence holds (id, token,
  // `processing`, lease not passed) and inserts the outbox row of each of those rows, and only
  // of those. Returns the inbox ids forwarded; an id missing from the answer lost its claim and
  // nothing was inserted for it. A failure rolls back everything (nothing half-written).
  virtual Result<std::vector<std::string>> Forward(std::span<const InboxForward> forwards) = 0;
  // Fenced: `dead` with last_error (a topic template that rendered empty). Returns ids changed.
  virtual Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) = 0;
  // Fenced: lease_expires_at = database now + lease_ms. Returns ids still owned.
  virtual Result<std::vector<std::string>> Renew(std::span<const Fence> fences,
                                                 int64_t lease_ms) = 0;
  // Every `processing` push row whose lease is null or passed goes back to `pending`, attempt
  // kept, claimed_at null (pull rows are left to the pull claim). Returns the rows moved.
  virtual Result<int64_t> ReclaimExpired() = 0;
};

// Counts for `queuebox status` and the inbox gauges.
struct InboxStats {
  // source -> state -> rows
  std::map<std::string, std::map<std::string, int64_t>> rows_by_source_state;
  // Age in seconds of the oldest pending push row's created_at (database clock); 0 when none.
  double oldest_pending_age_seconds = 0;
};

// A dead inbox row for `queuebox dead list --table inbox`.
struct DeadInboxRow {
  std::string id, source, idempotency_key;
  std::optional<std::string> aggregate_id, event_type;
  int attempt = 0;
  std::string last_error;
  std::string created_at;  // ISO-8601 UTC; the inbox has no updated_at
};

// Filters of an inbox replay (`queuebox replay --table inbox`, POST /admin/replay with
// "table": "inbox"), ANDed.
struct InboxReplayFilter {
  std::optional<std::vector<std::string>> ids;      // empty list matches nothing
  std::optional<std::vector<std::string>> sources;  // source IN (...); empty matches nothing
  std::optional<std::string> created_after;         // ISO-8601 instant, strict >
  std::optional<std::string> created_before;        // ISO-8601 instant, strict <
};

// What operators do with the inbox: read it and move finished rows, never rows in flight.
class InboxOperations {
 public:
  virtual ~InboxOperations() = default;

  virtual Result<InboxStats> Stats() = 0;
  // InboxStats::oldest_pending_age_seconds alone: one index read (idx_inbox_state_created), for
  // the gauge the relay refreshes.
  virtual Result<double> OldestPendingAgeSeconds() = 0;
  // Moves matching `processed`/`dead` rows back to `pending` (attempt 0, due now, last_error,
  // claim, claimed_at and processed_at cleared; id kept). Never touches `pending` or
  // `processing`. A replayed push row is forwarded again as a new outbox row (new id).
  virtual Result<int64_t> Replay(const InboxReplayFilter& filter) = 0;
  // Dead rows, newest created_at first; kInvalidArgument unless limit > 0.
  virtual Result<std::vector<DeadInboxRow>> ListDead(int limit) = 0;
  // Retention AGE: deletes up to `batch` rows of `state` ("processed" or "dead" only; anything
  // else is kInvalidArgument "Cannot delete active work") whose created_at (the receipt time) is
  // older than max_age_ms on the database clock. Returns rows deleted. Deleting a row ends the
  // dedup of its (source, idempotency_key).
  virtual Result<int64_t> DeleteOlderThan(const std::string& state, int64_t max_age_ms,
                                          int batch) = 0;
  // Retention COUNT: deletes up to `batch` rows of `state` beyond the newest `max_count` by
  // created_at.
  virtual Result<int64_t> DeleteBeyondCount(const std::string& state, int64_t max_count,
                                            int batch) = 0;
};

class InboxStore : public InboxIntake, public InboxRelayClaims, public InboxOperations {
 public:
  ~InboxStore() override = default;

  // Schema guard (QueueBox reference §3.6, SchemaGuard.requireInboxHeadersColumn).
  // kNotFound when the (mapped) inbox table does not exist. kFailedPrecondition when its headers
  // column is missing: "The inbox table '<t>' has no column '<c>'. QueueBox stores the message
  // headers there. Add the column, then start QueueBox again: ALTER TABLE ...".
  virtual Status CheckSchema() = 0;
};

}  // namespace queuebox
