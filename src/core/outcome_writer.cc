#include "core/outcome_writer.h"

#include <unordered_set>
#include <utility>

#include "core/redaction.h"
#include "core/write_retry.h"

namespace queuebox {
namespace {

std::string AttemptText(int attempt) { return std::to_string(attempt); }

// The status of rows given back for a rate limit: not an outcome (no message count, no
// processing duration).
constexpr std::string_view kThrottled = "throttled";

// The fence of a decided row; with `history`, the attempt's record for outbox_attempts.
Fence FenceOf(const DecidedRow& d, const std::string& destination, bool history) {
  Fence f{d.row->id, d.row->claim_token};
  if (!history) return f;
  AttemptRecord& r = f.record.emplace();
  r.attempt = d.row->attempt;
  r.destination = destination;
  if (d.attempt != nullptr) {
    if (d.attempt->publish_start) {
      r.duration_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(d.attempt->publish_duration)
              .count();
    }
    r.answer = d.attempt->outcome.answer;
  }
  return f;
}

std::vector<Fence> Fences(const std::vector<DecidedRow>& group, const std::string& destination,
                          bool history) {
  std::vector<Fence> out;
  out.reserve(group.size());
  for (const DecidedRow& d : group) out.push_back(FenceOf(d, destination, history));
  return out;
}

// RetryOrder or ReleaseOrder: the fence, the delay and the error of each decision.
template <typename Order>
std::vector<Order> Rescheduled(const std::vector<DecidedRow>& group, const std::string& destination,
                               bool history) {
  std::vector<Order> out;
  out.reserve(group.size());
  for (const DecidedRow& d : group) {
    out.push_back({FenceOf(d, destination, history), d.decision.delay_ms, d.decision.error});
  }
  return out;
}

std::vector<DeadOrder> Deads(const std::vector<DecidedRow>& group, const std::string& destination,
                             bool history) {
  std::vector<DeadOrder> out;
  out.reserve(group.size());
  for (const DecidedRow& d : group) {
    out.push_back({FenceOf(d, destination, history), d.decision.error});
  }
  return out;
}

}  // namespace

OutcomeWriter::OutcomeWriter(Options options, OutboxClaims* claims, ClaimLedger* ledger,
                             RelayObserver* observer, log::RateLimiter* db_limiter,
                             OnAccounted on_accounted)
    : options_(options),
      claims_(claims),
      ledger_(ledger),
      observer_(observer),
      db_limiter_(db_limiter),
      on_accounted_(std::move(on_accounted)) {}

void OutcomeWriter::Write(const DeliveryTask& task, size_t n, bool has_breaker) {
  WriteBatch(Decide(task, n, has_breaker));
}

OutcomeBatch OutcomeWriter::Decide(const DeliveryTask& task, size_t n, bool has_breaker) {
  OutcomeBatch batch;
  batch.destination = task.destination->name();
  batch.claimed_at = task.claimed_at;
  for (size_t i = 0; i < n; ++i) {
    const OutboxRow& row = task.rows[i];
    const DeliveryAttempt& attempt = task.attempts[i];
    const Outcome& outcome = attempt.outcome;
    if (outcome.kind == Outcome::Kind::kCancelled) {
      batch.cancelled.push_back(&row);  // the new owner writes the row
      continue;
    }
    DecidedRow d{&row, &attempt,
                 queuebox::Decide(row, outcome, options_.retry_base_delay_ms,
                                  has_breaker ? std::optional<int64_t>(attempt.release_delay_ms)
                                              : std::nullopt)};
    switch (d.decision.kind) {
      case RowDecision::Kind::kRelease:
        // Rows the open breaker kept from the destination are not logged one by one: its
        // transition said why.
        if (!outcome.error.starts_with(kNotPublished)) {
          LogRelease(row, batch.destination, d.decision);
        }
        batch.release.push_back(std::move(d));
        break;
      case RowDecision::Kind::kSent:
        batch.sent.push_back(std::move(d));
        break;
      case RowDecision::Kind::kRetry:
        LogFailure(row, batch.destination, d.decision, false, false);
        batch.retry.push_back(std::move(d));
        break;
      case RowDecision::Kind::kDead:
        LogFailure(row, batch.destination, d.decision, true,
                   outcome.kind == Outcome::Kind::kReject);
        batch.dead.push_back(std::move(d));
        break;
    }
  }
  return batch;
}

void OutcomeWriter::WriteUnroutable(std::span<const OutboxRow> rows,
                                    const std::vector<std::string>& reasons,
                                    RelayClock::time_point claimed_at) {
  OutcomeBatch batch;
  batch.claimed_at = claimed_at;
  for (size_t i = 0; i < rows.size(); ++i) {
    log::Error("No route matches the message's topic; it is now dead",
               {{"message_id", rows[i].id}, {"topic", rows[i].topic}});
    batch.dead.push_back({&rows[i], nullptr, {RowDecision::Kind::kDead, 0, reasons[i]}});
  }
  WriteBatch(batch);
}

void OutcomeWriter::WriteThrottled(std::span<const OutboxRow> rows,
                                   const std::vector<int64_t>& delays_ms, const std::string& reason,
                                   RelayClock::time_point claimed_at) {
  std::vector<DecidedRow> group;
  group.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    group.push_back({&rows[i], nullptr, {RowDecision::Kind::kRelease, delays_ms[i], reason}});
  }
  // A wait for tokens is not an attempt: no history record.
  const auto orders = Rescheduled<ReleaseOrder>(group, std::string(), false);
  WriteGroup(group, kThrottled, claimed_at, [&] { return claims_->Release(orders); });
}

void OutcomeWriter::WriteBatch(const OutcomeBatch& b) {
  const bool h = options_.attempt_history;
  if (!b.sent.empty()) {
    const std::vector<Fence> fences = Fences(b.sent, b.destination, h);
    WriteGroup(b.sent, "sent", b.claimed_at, [&] { return claims_->MarkSent(fences); });
  }
  if (!b.retry.empty()) {
    const auto orders = Rescheduled<RetryOrder>(b.retry, b.destination, h);
    WriteGroup(b.retry, "failed", b.claimed_at, [&] { return claims_->ScheduleRetry(orders); });
  }
  if (!b.dead.empty()) {
    const std::vector<DeadOrder> orders = Deads(b.dead, b.destination, h);
    WriteGroup(b.dead, "dead", b.claimed_at, [&] { return claims_->MarkDead(orders); });
  }
  if (!b.cancelled.empty()) {
    Account(b.cancelled, std::vector<std::string>{}, "cancelled", b.claimed_at);
  }
  if (!b.release.empty()) {
    const auto orders = Rescheduled<ReleaseOrder>(b.release, b.destination, h);
    WriteGroup(b.release, "released", b.claimed_at, [&] { return claims_->Release(orders); });
  }
}

template <typename Statement>
void OutcomeWriter::WriteGroup(const std::vector<DecidedRow>& group, std::string_view status,
                               RelayClock::time_point claimed_at, Statement&& statement) {
  std::vector<const OutboxRow*> rows;
  rows.reserve(group.size());
  for (const DecidedRow& d : group) rows.push_back(d.row);
  Account(rows, WithRetry(statement), status, claimed_at);
}

// Retries a database outage while the claims can still be valid (one lease from now).
template <typename Fn>
Result<std::vector<std::string>> OutcomeWriter::WithRetry(Fn&& write) {
  const auto give_up = RelayClock::now() + std::chrono::milliseconds(options_.claim_timeout_ms);
  WriteRetryHooks hooks;
  hooks.retry = [&](const Status& failure) {
    if (RelayClock::now() >= give_up) return false;
    int64_t suppressed = 0;
    if (db_limiter_->Allow(&suppressed)) {
      log::Error("Writing delivery outcomes failed; retrying",
                 {{"reason", SanitizeError(failure.message(), kMaxLastErrorChars)},
                  {"suppressed", std::to_string(suppressed)}});
    }
    return true;
  };
  return RetryTransientWrite(write, hooks);
}

void OutcomeWriter::Account(std::span<const OutboxRow* const> rows,
                            const Result<std::vector<std::string>>& changed,
                            std::string_view status, RelayClock::time_point claimed_at) {
  if (!changed.ok()) {
    observer_->OnProcessError();
    log::Error("Could not write delivery outcomes; the rows return after their lease",
               {{"reason", SanitizeError(changed.status().message(), kMaxLastErrorChars)},
                {"rows", std::to_string(rows.size())}});
  } else if (status != "cancelled") {
    // A cancelled publish sent nothing: the lease keeper's count and warning say it all.
    std::unordered_set<std::string_view> ok(changed->begin(), changed->end());
    std::vector<bool> counted(rows.size(), false);  // lost and counted by the lease keeper
    if (ok.size() < rows.size()) counted = ledger_->CountedLost(rows);
    int64_t lost = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (ok.count(rows[i]->id) > 0) continue;
      if (!counted[i]) ++lost;
      log::Error(
          "The claim on the message was already lost, so its outcome was not "
          "written. Raise 'outbox.claimTimeoutMs' above the slowest publish.",
          {{"message_id", rows[i]->id},
           {"topic", rows[i]->topic},
           {"outcome", std::string(status)}});
    }
    if (lost > 0) observer_->OnClaimsLost(lost);
    const auto written = static_cast<int64_t>(changed->size());
    if (written > 0 && status != kThrottled) observer_->OnMessages(status, written);
  }
  if (status != kThrottled) {
    const double seconds = std::chrono::duration<double>(RelayClock::now() - claimed_at).count();
    observer_->OnProcessingDurations(seconds, static_cast<int64_t>(rows.size()));
  }
  ledger_->Release(rows);
  on_accounted_(static_cast<int64_t>(rows.size()));
}

void OutcomeWriter::LogRelease(const OutboxRow& row, const std::string& destination,
                               const RowDecision& decision) {
  int64_t suppressed = 0;
  if (!failure_limiter_.Allow(&suppressed)) return;
  log::Warn("The destination is unavailable; the message was released without spending an attempt",
            {{"message_id", row.id},
             {"topic", row.topic},
             {"attempt", AttemptText(row.attempt)},
             {"destination", destination},
             {"reason", decision.error},
             {"retry_in_ms", std::to_string(decision.delay_ms)},
             {"suppressed", std::to_string(suppressed)}});
}

void OutcomeWriter::LogFailure(const OutboxRow& row, const std::string& destination,
                               const RowDecision& decision, bool dead, bool rejected) {
  int64_t suppressed = 0;
  if (!failure_limiter_.Allow(&suppressed)) return;
  std::initializer_list<log::Field> fields = {{"message_id", row.id},
                                              {"topic", row.topic},
                                              {"key", row.key.value_or("")},
                                              {"attempt", AttemptText(row.attempt)},
                                              {"destination", destination},
                                              {"reason", decision.error},
                                              {"suppressed", std::to_string(suppressed)}};
  if (rejected) {
    log::Error("The message cannot be delivered and is now dead", fields);
  } else if (dead) {
    log::Error("The message reached its last attempt and is now dead", fields);
  } else {
    log::Warn("The delivery failed; a retry is scheduled", fields);
  }
}

}  // namespace queuebox
