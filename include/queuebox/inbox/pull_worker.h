// pull_worker.h: the QueueBox inbox pull client (reference §4.7, §11.7; QueueBox's client
// libraries QueueBox.Inbox / clients/go). A PullWorker claims the rows of one pull source, hands
// each to the application's handler inside a database transaction, and completes, retries or
// dead-letters it with the pull SQL contract (sql/pull/<dialect>/*.sql, embedded).
//
// The cycle (one source, PostgreSQL or SQLite):
//  1. Claim up to batch_size rows in a short transaction of its own, committed before any handler
//     starts (PostgreSQL: one statement, FOR UPDATE SKIP LOCKED; SQLite: BEGIN IMMEDIATE, since
//     SQLite has one writer and no row locks). At most one row per (source, aggregate_id) is in
//     flight across every worker; rows without an aggregate are unordered.
//  2. Renew the lease of every claimed, unfinished row every lease_ms / 3 (its own connection).
//     A renewal that changes no row means the claim was lost: the handler is cancelled and its
//     transaction rolled back; nothing is completed. A renewal that fails is retried next time.
//  3. Run the handler in a transaction the worker began on the handler's connection. Handler OK:
//     complete.sql in that same transaction, then commit: the business writes and the completion
//     commit together or not at all; a completion that changes no row (claim lost) rolls the
//     whole transaction back. Handler error: roll back, then ask the retry policy: RetryAfter
//     (retry.sql: attempt + 1, due after the delay; later rows of the aggregate may pass it) or
//     DeadLetter (dead.sql). The error text is redacted and cut (core/redaction.h) before it
//     reaches last_error or a log line.
//  4. After an empty claim (or a failed one) wait poll_interval_ms; never poll in a loop.
// Stop(): no new claim. Handlers that run keep shutdown_grace_ms to finish; then they are
// cancelled (HandlerContext, and the statement running on their connection is interrupted); a
// cancelled message is never completed and spends no attempt: its lease expires and another
// worker takes it. At most batch_size messages are held at a time.
//
// Delivery is at-least-once: a message whose lease expires (a crash, a lost renewal) is claimed
// again. Deduplicate external effects on (source, idempotency_key).
//
// Thread-safety: Run() is called once, from one thread; Stop() from any thread, any time. The
// handler runs on the worker's threads (up to max_concurrency at once) and must be thread-safe
// when max_concurrency > 1.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "queuebox/inbox/database.h"
#include "queuebox/status.h"

namespace queuebox::inbox {

// The inbox table and column names (QueueBox's database.columnMapping.inbox.*); the defaults are
// QueueBox's. Each name must be a plain identifier ([A-Za-z_][A-Za-z0-9_$]*, at most 63
// characters); they are quoted in the SQL. `schema` (optional) qualifies the table: a PostgreSQL
// schema, or an attached SQLite database.
struct InboxSchema {
  std::string schema;
  std::string table = "inbox";
  std::string id = "id";
  std::string source = "source";
  std::string idempotency_key = "idempotency_key";
  std::string aggregate_id = "aggregate_id";
  std::string event_type = "event_type";
  std::string payload = "payload";
  std::string state = "state";
  std::string created_at = "created_at";
  std::string processed_at = "processed_at";
  std::string claimed_at = "claimed_at";
  std::string correlation_id = "correlation_id";
  std::string claim_token = "claim_token";
  std::string lease_expires_at = "lease_expires_at";
  std::string consumption = "consumption";
  std::string scheduled_at = "scheduled_at";
  std::string attempt = "attempt";
  std::string last_error = "last_error";
  std::string headers = "headers";
};

// One claimed inbox row as the handler sees it. The claim token stays inside the worker.
struct Message {
  std::string id;               // the inbox row id (UUID text)
  std::string source;           // the source name
  std::string idempotency_key;  // unique within the source: dedupe on (source, idempotency_key)
  std::optional<std::string> aggregate_id;
  std::optional<std::string> event_type;
  std::string payload;                         // the stored JSON text
  std::map<std::string, std::string> headers;  // the stored headers; a non-string value as JSON
  int attempt = 0;                             // 0 on the first delivery; retries add one
  std::optional<std::string> correlation_id;
};

// What happens to a message whose handler failed.
struct FailureAction {
  bool retry = false;    // true: retry.sql after delay_ms; false: dead.sql
  int64_t delay_ms = 0;  // >= 0

  static FailureAction RetryAfter(int64_t delay_ms) { return {true, delay_ms < 0 ? 0 : delay_ms}; }
  static FailureAction DeadLetter() { return {false, 0}; }
};

// Decides for a failed message; `error` is the handler's Status (not yet redacted). Called on the
// worker's threads.
using RetryPolicy = std::function<FailureAction(const Message& message, const Status& error)>;

// QueueBox's default policy: while message.attempt < max_attempts, RetryAfter(min(base_ms *
// 2^attempt, max_ms) +- jitter * that delay, uniformly); then DeadLetter. The row starts at attempt
// 0, so max_attempts = 5 allows 6 deliveries. Defaults: 5 attempts, 1 s base, 5 min ceiling, 0.2.
RetryPolicy DefaultRetryPolicy(int max_attempts = 5, int64_t base_ms = 1000,
                               int64_t max_ms = 300000, double jitter = 0.2);

// Cancellation as the handler sees it: set when the claim is lost or a stop ran out of grace.
class HandlerContext {
 public:
  explicit HandlerContext(std::stop_token token) : token_(std::move(token)) {}
  bool cancelled() const { return token_.stop_requested(); }
  // Waits up to `ms` milliseconds or until cancelled; true when cancelled.
  bool WaitFor(int64_t ms) const;
  const std::stop_token& stop_token() const { return token_; }

 private:
  std::stop_token token_;
};

// The application's work for one message. Write every business change through `tx` (or its
// native connection); do not commit or roll back. Return OK when done: the worker completes the
// message in `tx` and commits. A non-OK Status rolls `tx` back and goes to the retry policy.
using Handler =
    std::function<Status(const Message& message, Transaction& tx, const HandlerContext& context)>;

enum class LogLevel { kInfo, kWarn, kError };
// Receives the worker's log lines; the text is already redacted and names the message id, never
// its payload. Called on the worker's threads.
using Logger = std::function<void(LogLevel level, const std::string& text)>;

struct PullOptions {
  std::string source;                 // required: the configured pull source
  int batch_size = 10;                // rows per claim, > 0; also the most messages held at once
  int64_t lease_ms = 30000;           // claim lease, >= 3 (renewed every lease_ms / 3)
  int max_concurrency = 1;            // handlers running at once, > 0 (capped at batch_size)
  int64_t poll_interval_ms = 1000;    // wait after an empty or failed claim, > 0
  int64_t shutdown_grace_ms = 30000;  // how long Stop() lets running handlers finish, >= 0
  RetryPolicy retry_policy = {};      // empty: DefaultRetryPolicy()
  InboxSchema schema = {};            // table and column names
  Logger logger = {};                 // empty: no logging
  // Test and metrics seam: called with poll_interval_ms each time the worker is about to wait
  // after an empty claim (on the claiming thread).
  std::function<void(int64_t wait_ms)> on_idle = {};
};

// cand_limit = LEAST(GREATEST(3 * batch, 50), 500): the bound of each candidate list of the claim,
// computed from the batch on every claim (reference §4.7). Not a setting.
int64_t CandidateLimit(int64_t batch_size);

class PullWorker {
 public:
  // kInvalidArgument naming the option: empty source, batch_size <= 0, lease_ms < 3,
  // max_concurrency <= 0, poll_interval_ms <= 0, shutdown_grace_ms < 0, a schema name that is not
  // a plain identifier, no handler. `connections` is shared with the caller and must be of the
  // dialect it reports. Opens no connection yet.
  static Result<std::unique_ptr<PullWorker>> Create(std::shared_ptr<ConnectionFactory> connections,
                                                    PullOptions options, Handler handler);
  ~PullWorker();  // Stop() and wait for Run() to return
  PullWorker(const PullWorker&) = delete;
  PullWorker& operator=(const PullWorker&) = delete;

  // Claims and handles messages until Stop(); returns OK once every handler has returned. A
  // failed claim or connection is logged and retried after poll_interval_ms; Run() does not
  // return for it. kFailedPrecondition when Run() is called twice.
  Status Run();

  // Starts the shutdown (see above). Thread-safe, returns at once.
  void Stop();

  // Counters since Create (thread-safe reads).
  struct Stats {
    int64_t claims = 0;     // claim statements run
    int64_t claimed = 0;    // messages claimed
    int64_t completed = 0;  // completions committed
    int64_t retried = 0;    // retry.sql that changed the row
    int64_t dead = 0;       // dead.sql that changed the row
    int64_t lost = 0;       // claims found lost (renewal or write changed nothing)
    int64_t abandoned = 0;  // messages dropped by a stop (no attempt spent)
  };
  Stats stats() const;

 private:
  class Impl;
  explicit PullWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace queuebox::inbox
