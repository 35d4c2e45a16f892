// delivery_task.h: what the outbox relay's units hand each other (relay.cc conducts them):
//
//   claim ledger    (claim_ledger.h)    holds the claims and gives each task its cancel flags
//   publish stage   (publish_stage.h)   fills DeliveryTask::attempts, one per row it publishes
//   outcome writer  (outcome_writer.h)  turns the attempts into fenced writes
//
// A DeliveryTask is one destination's share of one claim. Its rows never move once it is queued:
// messages, outcome lists and ledger entries point at them.
// Thread-safety: plain data. A task's rows are published in slices by several workers at once;
// each worker writes only its own slice's entries of `attempts`.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/destination.h"
#include "queuebox/message.h"

namespace queuebox {

using RelayClock = std::chrono::steady_clock;

// One flag per row of a task, set (never cleared) when the row's claim is lost: its publish is
// cancelled if not yet handed over (OutboundMessage::cancel). Shared by the task and the ledger.
using CancelFlags = std::shared_ptr<std::atomic<bool>[]>;

// The start of last_error for a row the open circuit breaker released without a publish.
inline constexpr std::string_view kNotPublished = "Not published, its circuit breaker is open: ";

// One delivery attempt of one row: what the destination (or a stage before it) answered, and
// the publish it was part of. Every row of a task gets one before its outcome is written; this is
// what an attempt history or a publish span would record.
struct DeliveryAttempt {
  Outcome outcome;
  // kUnavailable under a circuit breaker: the breaker's delay before the row is due again (ms).
  int64_t release_delay_ms = 0;
  // The PublishBatch the row went to: its start and how long it took (the whole slice's call).
  // Unset when the row never reached the destination (the breaker, a transform or a lost claim
  // kept it back).
  std::optional<RelayClock::time_point> publish_start;
  RelayClock::duration publish_duration{};
};

struct DeliveryTask {
  Destination* destination = nullptr;
  std::vector<OutboxRow> rows;
  std::vector<std::optional<std::string>> routing_keys;  // per row: the route's rendered key
  std::vector<size_t> routes;                            // per row: the route it matched
  bool transformed = false;  // some row's route or destination has a transform stage
  RelayClock::time_point claimed_at;
  CancelFlags cancel;                     // per row (ClaimLedger::HoldForPublish)
  std::vector<DeliveryAttempt> attempts;  // per row, once its slice returned
};

}  // namespace queuebox
