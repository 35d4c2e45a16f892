// inbox_relay.h: the inbox relay (QueueBox reference §4.5, §4.6, §9.2, §11.6). It forwards push
// rows of the inbox into the outbox, where the outbox relay delivers them:
//
//   claim     up to inbox.relay.batchSize due pending push rows under a lease of
//             inbox.relay.claimTimeoutMs, one statement (InboxRelayClaims::ClaimPush): at most
//             one row per aggregate_id in flight across every source and replica, in
//             scheduled_at, created_at order;
//   render    each row's topic from its source's topic template ({{ source }}, {{ eventType }},
//             trimmed); an empty topic (or one longer than the outbox's 255 characters) makes the
//             row dead, fenced, with a relay error and an ERROR log;
//   forward   the others in one transaction, fenced (InboxRelayClaims::Forward): each outbox row
//             (topic, key = aggregate_id, payload, the inbox headers plus x-inbox-id, x-source,
//             x-idempotency-key and X-Correlation-Id, max_attempts = inbox.relay.maxAttempts)
//             and the inbox row `processed`; a lost claim inserts nothing and is counted
//             (queuebox_claims_lost_total{component="inbox"}).
//
// On a store that can (InboxRelayClaims::HasForwardDue: PostgreSQL and SQLite), claim, render and
// forward are ONE transaction (ForwardDue): no lease and no `processing` step, so each row is
// written once. A batch the outbox refuses (not an outage) then goes the two-step way above,
// whose row-by-row retry lets the other rows through.
//
// The outbox key is the aggregate_id, so an aggregate's order continues through the outbox's key
// order to the destination. A database outage during a forward is retried with capped backoff
// while the claims can still hold (one lease); nothing is ever half-written, and rows whose lease
// ran out return through the reclaim step (every claimTimeoutMs / 5). A forward refused for good
// (not an outage) is retried row by row, so one row the outbox refuses cannot hold back the rest
// of its batch; that row stays `processing` until its lease returns it.
//
// Lanes (docs/inbox.md, "Lanes"): on a store with lanes (PostgreSQL) a cycle is a pass over every
// lane, each lane its own transaction, and inbox.relay.workers threads (at most one per lane) run
// cycles side by side; a lane another claimer holds is skipped. An aggregate is always in one
// lane and a lane is forwarded one transaction at a time, so each aggregate keeps its order.
//
// Thread-safety: Start/Stop from one controlling thread; RunCycle from one thread at a time and
// never while started; the observer and on_forwarded are called from the relay's worker threads,
// possibly at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "queuebox/config.h"
#include "queuebox/destination.h"
#include "queuebox/inbox.h"
#include "queuebox/status.h"

namespace queuebox::telemetry {
class Tracer;
}

namespace queuebox {

// Hooks for metrics (src/admin implements them). No-op defaults; cheap, thread-safe, no throw.
class InboxRelayObserver {
 public:
  virtual ~InboxRelayObserver() = default;
  // queuebox_inbox_messages_total{status="forwarded"}
  virtual void OnInboxForwarded(int64_t /*n*/) {}
  // queuebox_inbox_relay_errors_total: a failed cycle, or a row whose topic rendered empty
  virtual void OnInboxRelayError() {}
  // queuebox_claims_lost_total{component="inbox"}
  virtual void OnInboxClaimsLost(int64_t /*n*/) {}
  // queuebox_inbox_oldest_pending_age_seconds (database clock)
  virtual void OnInboxOldestPendingAge(double /*seconds*/) {}
};

// The default topic template of a source the relay has no template for (QueueBox reference
// §11.6: an unknown source renders `{{ eventType }}`).
inline constexpr std::string_view kDefaultInboxTopicTemplate = "{{ eventType }}";

struct InboxRelayOptions {
  InboxRelayConfig relay;
  // max_attempts of the outbox rows the relay writes: inbox.relay.maxAttempts, else
  // outbox.maxAttempts (ResolveMaxAttempts).
  int max_attempts = 5;
  // Topic template per source name (sources.<name>.topic); a source not listed renders
  // kDefaultInboxTopicTemplate.
  std::map<std::string, std::string> topic_templates;
  // Called on a relay worker's thread after a forward wrote outbox rows (the app wakes the
  // outbox relay with it). Optional; must be cheap and thread-safe.
  std::function<void()> on_forwarded;
  // telemetry.enabled: each forwarded row gets a forward span, a child of the inbox row's
  // traceparent (the receive span) or a new trace, and the outbox row carries the span's
  // traceparent. Null: off.
  std::shared_ptr<telemetry::Tracer> tracer;

  // The options of `config`: inbox.relay.*, the resolved max_attempts, no templates.
  static InboxRelayOptions FromConfig(const Config& config);
};

class InboxRelay {
 public:
  // `claims` and `operations` are not owned and must outlive the relay; `operations` (nullable)
  // feeds the oldest-pending gauge. kInvalidArgument for a batch size, lease or ceiling below 1.
  static Result<std::unique_ptr<InboxRelay>> Create(InboxRelayOptions options,
                                                    InboxRelayClaims* claims,
                                                    InboxOperations* operations = nullptr,
                                                    InboxRelayObserver* observer = nullptr);
  virtual ~InboxRelay() = default;

  // Starts the relay's worker threads: each runs cycles back to back while one of its claims
  // takes a full batch, otherwise every inbox.relay.pollIntervalMs. kFailedPrecondition when
  // started twice.
  virtual Status Start() = 0;
  // Wakes the relay now (a webhook stored a message). Cheap; conflated.
  virtual void Wake() = 0;
  // Waits until every lane was found with nothing to claim by cycles that began after this call
  // (the inbox holds nothing forwardable), or `timeout` (kDeadlineExceeded). Requires Start().
  virtual Status WaitIdle(std::chrono::milliseconds timeout) = 0;
  // Stops after the cycle in progress (a forward retrying through an outage gives up; its rows
  // return after their lease). Idempotent.
  virtual void Stop() = 0;
  // Seconds since the last cycle finished, any outcome (health: inbox-relay).
  virtual double SecondsSinceLastCycle() const = 0;
  // True while the last cycle succeeded (health: inbox-relay).
  virtual bool LastCycleOk() const = 0;

  // One cycle on the caller's thread (tests, benchmarks): reclaim when due, claim, forward,
  // refresh the gauge when due. Returns the rows forwarded; an error when the claim or the
  // forward failed (the failure is also counted and logged).
  virtual Result<int64_t> RunCycle() = 0;
};

// The outbox topic for a row of `source` with `event_type`: `tmpl` with `{{ source }}` and
// `{{ eventType }}` (spaces inside the braces optional) replaced, other text literal, the result
// trimmed of spaces. A missing event type renders as empty text. (QueueBox reference §11.4.)
std::string RenderInboxTopic(std::string_view tmpl, std::string_view source,
                             const std::optional<std::string>& event_type);

// The outbox headers of a forwarded row (QueueBox reference §9.2): the inbox headers, without any
// named x-inbox-id, x-source, x-idempotency-key or X-Correlation-Id in any letter case, plus
// those four set by the relay (X-Correlation-Id only when the row has one). Values that are not
// strings are kept as their JSON text. Headers that are not a JSON object count as none. With
// `trace` (tracing on), the inbox's traceparent and tracestate (any letter case) are replaced by
// its values (none when its traceparent is empty).
std::string RelayHeaders(std::string_view inbox_headers, std::string_view inbox_id,
                         std::string_view source, std::string_view idempotency_key,
                         const std::optional<std::string>& correlation_id,
                         const TraceHeaders* trace = nullptr);

}  // namespace queuebox
