// outcome_writer.h: how the outbox relay writes what became of its claimed rows (relay.h;
// QueueBox reference §4.5, §5): decide, write fenced, retry the write, account for it.
//
//   decide    each row's DeliveryAttempt becomes a RowDecision (core/outcome.h): sent, retry,
//             dead or released; a Cancelled attempt (a lost claim) is not written at all, its
//             new owner writes the row. Failures and releases are logged (rate-limited).
//   write     one fenced statement per kind, in this order: MarkSent, ScheduleRetry, MarkDead,
//             Release (OutboxClaims). A database outage is retried with capped backoff
//             (core/write_retry.h) while the claims can hold (outbox.claimTimeoutMs from the
//             write's start); past that the rows are left to the reclaim step.
//   account  per statement: queuebox_outbox_messages_total{status} for the rows it changed; a
//             row it did not change lost its claim, logged and counted in
//             queuebox_claims_lost_total unless the lease keeper counted it
//             (ClaimLedger::CountedLost); the claim-to-outcome durations; then the ledger forgets
//             the claims and `on_accounted` gets the row count (the relay's in-flight count).
//
// Every written row passes through WriteBatch as a DecidedRow that names its attempt (outcome,
// error, publish start and duration) and, through the batch, its destination: the one place
// that sees every attempt's end, for records that must go with the same statements.
//
// Thread-safety: Write and WriteUnroutable may be called from several threads at once; the
// store, ledger, observer and limiter must outlive the writer and be thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/claim_ledger.h"
#include "core/delivery_task.h"
#include "core/log.h"
#include "core/outcome.h"
#include "queuebox/relay.h"
#include "queuebox/store.h"

namespace queuebox {

// One row's outcome as decided: the row, the attempt that led to it (null when it had none: an
// unroutable row), and the decision.
struct DecidedRow {
  const OutboxRow* row = nullptr;
  const DeliveryAttempt* attempt = nullptr;
  RowDecision decision;
};

// The decided rows of one delivery task, or the unroutable rows of one claim, by the statement
// that writes them. The rows stay in their task (no copy of the payloads).
struct OutcomeBatch {
  std::string destination;  // empty for unroutable rows
  RelayClock::time_point claimed_at;
  std::vector<DecidedRow> sent, retry, dead, release;
  std::vector<const OutboxRow*> cancelled;  // lost claims: nothing is written
  size_t size() const {
    return sent.size() + retry.size() + dead.size() + release.size() + cancelled.size();
  }
};

class OutcomeWriter {
 public:
  struct Options {
    int64_t retry_base_delay_ms = 1000;  // outbox.retryBaseDelayMs
    int64_t claim_timeout_ms = 30000;    // outbox.claimTimeoutMs: how long a write is retried
    // outbox.attemptHistory.enabled, and the store took it (EnableAttemptHistory): each fence
    // carries its attempt's AttemptRecord, written with the outcome.
    bool attempt_history = false;
  };
  using OnAccounted = std::function<void(int64_t rows)>;

  // `db_limiter` rate-limits the database error lines (shared with the relay's other ones).
  OutcomeWriter(Options options, OutboxClaims* claims, ClaimLedger* ledger, RelayObserver* observer,
                log::RateLimiter* db_limiter, OnAccounted on_accounted);

  // Decides rows [0, n) of `task` and writes them. `has_breaker`: the destination has a circuit
  // breaker, so an Unavailable outcome releases the row (else it is a retry).
  void Write(const DeliveryTask& task, size_t n, bool has_breaker);
  // Writes rows that no route or destination takes dead, reasons[i] being rows[i]'s last_error;
  // each is logged.
  void WriteUnroutable(std::span<const OutboxRow> rows, const std::vector<std::string>& reasons,
                       RelayClock::time_point claimed_at);

  // Gives back rows that wait for their destination's rate limit (Release: pending, attempt
  // unchanged, due after delays_ms[i], last_error `reason`). Not counted as outcomes.
  void WriteThrottled(std::span<const OutboxRow> rows, const std::vector<int64_t>& delays_ms,
                      const std::string& reason, RelayClock::time_point claimed_at);

  // The decisions for rows [0, n) of `task`, logged as they are made; nothing is written.
  OutcomeBatch Decide(const DeliveryTask& task, size_t n, bool has_breaker);
  // Writes `batch` (decide, above) and accounts for every row of it.
  void WriteBatch(const OutcomeBatch& batch);

 private:
  template <typename Statement>
  void WriteGroup(const std::vector<DecidedRow>& group, std::string_view status,
                  RelayClock::time_point claimed_at, Statement&& statement);
  template <typename Fn>
  Result<std::vector<std::string>> WithRetry(Fn&& write);
  void Account(std::span<const OutboxRow* const> rows,
               const Result<std::vector<std::string>>& changed, std::string_view status,
               RelayClock::time_point claimed_at);
  void LogRelease(const OutboxRow& row, const std::string& destination, const RowDecision& d);
  void LogFailure(const OutboxRow& row, const std::string& destination, const RowDecision& d,
                  bool dead, bool rejected);

  Options options_;
  OutboxClaims* claims_;
  ClaimLedger* ledger_;
  RelayObserver* observer_;
  log::RateLimiter* db_limiter_;
  OnAccounted on_accounted_;
  log::RateLimiter failure_limiter_{std::chrono::milliseconds(1000)};
};

}  // namespace queuebox
