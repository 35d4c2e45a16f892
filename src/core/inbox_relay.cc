// The inbox relay (inbox_relay.h): worker threads that claim, render and forward in cycles.
#include "core/inbox_relay.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/backoff.h"
#include "core/log.h"
#include "core/outcome.h"
#include "core/redaction.h"
#include "core/write_retry.h"
#include "telemetry/tracer.h"

namespace queuebox {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class NoopInboxObserver : public InboxRelayObserver {};

// The outbox's topic column: VARCHAR(255).
constexpr size_t kMaxTopicChars = 255;

// What a forward did: the inbox ids forwarded, and the rows it gave up on (refused by the
// database; they stay `processing` until their lease returns them). The rest lost their claim.
struct Forwarded {
  std::vector<std::string> done;
  size_t refused = 0;
};

// Inbox id -> (source, why) of the rows a cycle planned dead.
using DeadReasons = std::map<std::string, std::pair<std::string, std::string>>;
// The forward spans of one forward, by inbox id: begun at the plan, recorded once the row is
// forwarded.
struct ForwardSpan {
  telemetry::SpanStart start;
  std::string source, topic;
};
using ForwardSpans = std::map<std::string, ForwardSpan>;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// Characters of UTF-8 text (lead bytes), for the outbox's 255-character topic.
size_t Characters(std::string_view text) {
  size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

class InboxRelayImpl final : public InboxRelay {
 public:
  InboxRelayImpl(InboxRelayOptions options, InboxRelayClaims* claims, InboxOperations* operations,
                 InboxRelayObserver* observer)
      : options_(std::move(options)),
        claims_(claims),
        operations_(operations),
        observer_(observer != nullptr ? observer : &noop_) {}

  ~InboxRelayImpl() override { Stop(); }

  Status Start() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return FailedPrecondition("the inbox relay is already started");
    started_ = true;
    last_cycle_ = Clock::now();
    lane_empty_seq_.assign(static_cast<size_t>(Lanes()), 0);
    for (int w = 0; w < Workers(); ++w) threads_.emplace_back([this] { Loop(); });
    return Status::Ok();
  }

  // One worker runs for a wake; a worker whose claim takes a full batch wakes another (Loop).
  void Wake() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
    }
    cv_.notify_one();
  }

  Status WaitIdle(milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!started_) return FailedPrecondition("the inbox relay is not started");
    const uint64_t target = cycle_seq_ + 1;
    woken_ = true;
    cv_.notify_all();
    if (!idle_cv_.wait_for(lock, timeout, [&] { return idle_seq_ >= target || stopping_; })) {
      return DeadlineExceeded("the inbox relay did not become idle in time");
    }
    return Status::Ok();
  }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    stop_flag_ = true;
    cv_.notify_all();
    idle_cv_.notify_all();
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  double SecondsSinceLastCycle() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return std::chrono::duration<double>(Clock::now() - last_cycle_).count();
  }

  bool LastCycleOk() const override { return last_ok_.load(); }

  Result<int64_t> RunCycle() override {
    Cycle cycle = RunOneCycle(Lanes());
    if (!cycle.status.ok()) return cycle.status;
    return cycle.forwarded;
  }

 private:
  // One cycle: a pass over every lane (docs/inbox.md, "Lanes"), or the one claim of a store
  // without lanes.
  struct Cycle {
    Status status;
    size_t claimed = 0;
    int64_t forwarded = 0;
    bool full = false;              // some claim took a whole batch: more may be waiting
    std::vector<bool> empty_lanes;  // lanes whose claim found nothing (not held elsewhere)
  };

  int Lanes() const { return claims_->HasForwardDue() ? std::max(1, claims_->ForwardLanes()) : 1; }
  // Worker threads: inbox.relay.workers, at most one per lane.
  int Workers() const { return std::clamp(options_.relay.workers, 1, Lanes()); }

  void Loop() {
    int failures = 0;
    const int lanes = Lanes();
    while (true) {
      uint64_t seq;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) break;
        woken_ = false;  // this cycle starts after every wake so far
        seq = ++cycle_seq_;
      }
      Cycle cycle = RunOneCycle(lanes);
      int64_t wait_ms = options_.relay.poll_interval_ms;
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_cycle_ = Clock::now();
        if (cycle.status.ok()) {
          // Idle once every lane was found empty by a cycle begun after WaitIdle's call.
          for (size_t l = 0; l < cycle.empty_lanes.size() && l < lane_empty_seq_.size(); ++l) {
            if (cycle.empty_lanes[l]) lane_empty_seq_[l] = std::max(lane_empty_seq_[l], seq);
          }
          idle_seq_ = *std::min_element(lane_empty_seq_.begin(), lane_empty_seq_.end());
          idle_cv_.notify_all();
        }
      }
      if (cycle.status.ok()) {
        if (failures > 0) log::Info("The inbox relay reaches the database again; it resumes");
        failures = 0;
        if (cycle.full) {  // more may be waiting: go on, and have an idle worker join
          if (Workers() > 1) Wake();
          continue;
        }
      } else {
        wait_ms = ReconnectDelayMs(failures++, options_.relay.poll_interval_ms, 30000);
      }
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, milliseconds(wait_ms), [&] { return woken_ || stopping_; });
    }
  }

  // Counts and logs a failed cycle (rate-limited: an outage fails every cycle).
  void CycleFailed(const Status& status, const char* what) {
    observer_->OnInboxRelayError();
    int64_t suppressed = 0;
    if (db_limiter_.Allow(&suppressed)) {
      log::Error(what, {{"reason", SanitizeError(status.message(), kMaxLastErrorChars)},
                        {"suppressed", std::to_string(suppressed)}});
    }
  }

  // Reclaims expired leases when due and refreshes the gauge; one worker at a time (a worker
  // that finds another at it goes on).
  Status Maintain() {
    std::unique_lock<std::mutex> lock(maintenance_mu_, std::try_to_lock);
    if (!lock.owns_lock()) return Status::Ok();
    const auto reclaim_every =
        milliseconds(std::max<int64_t>(1, options_.relay.claim_timeout_ms / 5));
    if (!reclaimed_once_ || Clock::now() - last_reclaim_ >= reclaim_every) {
      Result<int64_t> n = claims_->ReclaimExpired();
      if (!n.ok()) return n.status();
      reclaimed_once_ = true;
      last_reclaim_ = Clock::now();
      if (*n > 0) {
        log::Warn("Returned inbox rows with an expired lease to pending",
                  {{"rows", std::to_string(*n)}});
      }
    }
    RefreshGauge();
    return Status::Ok();
  }

  Cycle RunOneCycle(int lanes) {
    Cycle cycle;
    cycle.empty_lanes.assign(static_cast<size_t>(lanes), false);
    const size_t batch = static_cast<size_t>(options_.relay.batch_size);
    if (Status m = Maintain(); !m.ok()) {
      cycle.status = m;
      CycleFailed(cycle.status, "The inbox relay cycle failed. The next cycle retries.");
      last_ok_ = false;
      return cycle;
    }
    if (claims_->HasForwardDue()) {
      // The claims of this cycle: -1 for one ForwardDue of every lane, else lanes. Without lanes,
      // or with fewer due rows than a batch, one ForwardDue takes them all (one transaction, as
      // without lanes); with more, the lanes side by side, each worker starting its pass at the
      // next lane so the passes spread over them.
      std::vector<int> steps = {-1};
      if (lanes > 1) {
        Result<InboxDueLanes> due = claims_->DueLanes(options_.relay.batch_size);
        if (!due.ok()) {
          cycle.status = due.status();
          CycleFailed(cycle.status, "The inbox relay cycle failed. The next cycle retries.");
          last_ok_ = false;
          return cycle;
        }
        if (due->lanes.empty()) {
          steps.clear();
          cycle.empty_lanes.assign(static_cast<size_t>(lanes), true);
        } else if (due->probe_full) {
          steps.clear();
          const int start =
              static_cast<int>(next_lane_.fetch_add(1) % static_cast<uint64_t>(lanes));
          for (int i = 0; i < lanes; ++i) steps.push_back((start + i) % lanes);
        }
      }
      bool refused = false;
      for (int step : steps) {
        DeadReasons reasons;
        ForwardSpans spans;
        auto plan = [&](const ClaimedInboxRow& row) { return Plan(row, reasons, spans); };
        Result<InboxForwardDue> due =
            step < 0 ? claims_->ForwardDue(options_.relay.batch_size, plan)
                     : claims_->ForwardDueInLane(step, options_.relay.batch_size, plan);
        if (due.ok()) {
          if (due->lane_busy) continue;  // another claimer is on it
          cycle.claimed += due->claimed;
          if (due->claimed == 0) {
            if (step < 0) {
              cycle.empty_lanes.assign(static_cast<size_t>(lanes), true);
            } else {
              cycle.empty_lanes[static_cast<size_t>(step)] = true;
            }
          }
          cycle.full = cycle.full || due->claimed >= batch;
          const auto forwarded = static_cast<int64_t>(due->forwarded.size());
          cycle.forwarded += forwarded;
          ReportDead(due->dead, reasons);
          EndSpans(due->forwarded, spans);
          if (forwarded > 0) {
            observer_->OnInboxForwarded(forwarded);
            if (options_.on_forwarded) options_.on_forwarded();
          }
          continue;
        }
        if (IsTransient(due.status().code())) {
          cycle.status = due.status();
          CycleFailed(cycle.status, "The inbox relay cycle failed. The next cycle retries.");
          last_ok_ = false;
          return cycle;
        }
        // Refused, not an outage (say the outbox refuses one row): the batch goes the two-step
        // way, whose row-by-row retry lets the other rows through.
        CycleFailed(due.status(), "Forwarding inbox rows failed; retrying them one at a time");
        refused = true;
        break;
      }
      if (!refused) {
        last_ok_ = true;
        return cycle;
      }
    }
    Result<int64_t> two_step = RunTwoStep(cycle);
    if (!two_step.ok()) return cycle;
    if (lanes == 1 && cycle.claimed == 0) cycle.empty_lanes[0] = true;
    return cycle;
  }

  // The two-step path (ClaimPush, then Forward and MarkDead, fenced by the lease); adds to
  // `cycle`. Returns the rows it claimed, or the error it also set in `cycle`.
  Result<int64_t> RunTwoStep(Cycle& cycle) {
    DeadReasons reasons;
    ForwardSpans spans;
    const auto claimed_at = Clock::now();
    Result<std::vector<ClaimedInboxRow>> rows =
        claims_->ClaimPush(options_.relay.batch_size, options_.relay.claim_timeout_ms);
    if (!rows.ok()) {
      cycle.status = rows.status();
      CycleFailed(cycle.status, "The inbox relay cycle failed. The next cycle retries.");
      last_ok_ = false;
      return cycle.status;
    }
    cycle.claimed += rows->size();
    cycle.full = cycle.full || rows->size() >= static_cast<size_t>(options_.relay.batch_size);
    if (rows->empty()) {
      last_ok_ = true;
      return int64_t{0};
    }
    std::vector<InboxForward> forwards;
    std::vector<DeadOrder> dead;
    forwards.reserve(rows->size());
    for (const ClaimedInboxRow& row : *rows) {
      InboxForwardPlan plan = Plan(row, reasons, spans);
      plan.forward.fence = {row.id, row.claim_token};
      if (!plan.dead_error.empty()) {
        // Its attempt, for a store that keeps the attempt history (no destination, no publish).
        Fence fence = plan.forward.fence;
        fence.record = AttemptRecord{row.attempt, {}, -1, {}};
        dead.push_back({std::move(fence), std::move(plan.dead_error)});
      } else {
        forwards.push_back(std::move(plan.forward));
      }
    }
    if (!dead.empty()) {
      Result<std::vector<std::string>> marked = claims_->MarkDead(dead);
      if (!marked.ok()) {
        CycleFailed(marked.status(),
                    "Marking inbox rows dead failed; they return after their lease");
      } else {
        ReportDead(*marked, reasons);
        if (marked->size() < dead.size()) ClaimsLost(dead.size() - marked->size(), "mark it dead");
      }
    }
    if (!forwards.empty()) {
      Result<Forwarded> result = ForwardWithRetry(forwards, claimed_at);
      if (!result.ok()) {
        cycle.status = result.status();
        last_ok_ = false;
        return cycle.status;
      }
      const auto forwarded = static_cast<int64_t>(result->done.size());
      cycle.forwarded += forwarded;
      EndSpans(result->done, spans);
      if (forwarded > 0) {
        observer_->OnInboxForwarded(forwarded);
        if (options_.on_forwarded) options_.on_forwarded();
      }
      size_t lost = forwards.size() - result->done.size() - result->refused;
      if (lost > 0) ClaimsLost(lost, "forward it");
    }
    last_ok_ = true;
    return static_cast<int64_t>(rows->size());
  }

  // The outbox row of `row`, or why it goes dead (a topic template that renders empty or too
  // long). Remembers the reason in `reasons` for ReportDead.
  InboxForwardPlan Plan(const ClaimedInboxRow& row, DeadReasons& reasons, ForwardSpans& spans) {
    InboxForwardPlan plan;
    auto it = options_.topic_templates.find(row.source);
    const std::string_view tmpl = it != options_.topic_templates.end()
                                      ? std::string_view(it->second)
                                      : kDefaultInboxTopicTemplate;
    std::string topic = RenderInboxTopic(tmpl, row.source, row.event_type);
    if (topic.empty()) {
      plan.dead_error = "The topic template of source '" + row.source + "' rendered empty";
    } else if (Characters(topic) > kMaxTopicChars) {
      plan.dead_error = "The topic template of source '" + row.source +
                        "' rendered a topic longer than " + std::to_string(kMaxTopicChars) +
                        " characters";
    }
    if (!plan.dead_error.empty()) {
      reasons[row.id] = {row.source, plan.dead_error};
      return plan;
    }
    std::optional<TraceHeaders> trace;
    if (options_.tracer) trace = BeginSpan(row, topic, spans);
    plan.forward = {{row.id, row.claim_token},
                    std::move(topic),
                    RelayHeaders(row.headers, row.id, row.source, row.idempotency_key,
                                 row.correlation_id, trace ? &*trace : nullptr),
                    options_.max_attempts};
    return plan;
  }

  // The forward span of `row`: a child of its traceparent (the receive span), or a new trace
  // (startTraces), or none; the trace headers its outbox row gets.
  TraceHeaders BeginSpan(const ClaimedInboxRow& row, const std::string& topic,
                         ForwardSpans& spans) {
    std::optional<telemetry::TraceContext> parent = telemetry::FromHeadersJson(row.headers);
    if (!parent && !options_.tracer->start_traces()) return {};
    ForwardSpan& s = spans[row.id];
    s = {telemetry::Begin(parent), row.source, topic};
    return {s.start.traceparent(), s.start.context.tracestate};
  }

  // Records the forward spans of the rows forwarded (`ids`), then forgets every span.
  void EndSpans(const std::vector<std::string>& ids, ForwardSpans& spans) {
    if (!options_.tracer) return;
    for (const std::string& id : ids) {
      auto it = spans.find(id);
      if (it == spans.end()) continue;
      const ForwardSpan& s = it->second;
      const telemetry::Attribute a[] = {
          {"messaging.system", std::string_view("queuebox")},
          {"messaging.operation.name", std::string_view("forward")},
          {"messaging.operation.type", std::string_view("process")},
          {"messaging.destination.name", std::string_view(s.topic)},
          {"messaging.message.id", std::string_view(id)},
          {"queuebox.source", std::string_view(s.source)},
          {"queuebox.topic", std::string_view(s.topic)},
      };
      options_.tracer->Record(s.start, {.name_prefix = "forward ",
                                        .name = s.source,
                                        .kind = telemetry::SpanKind::kConsumer,
                                        .attributes = a,
                                        .encoded_attributes = {},
                                        .error = false,
                                        .status_message = {}});
    }
    spans.clear();
  }

  // Counts and logs the rows that went dead (ids the store confirmed), then forgets the reasons.
  void ReportDead(const std::vector<std::string>& ids, DeadReasons& reasons) {
    for (const std::string& id : ids) {
      auto it = reasons.find(id);
      if (it == reasons.end()) continue;
      observer_->OnInboxRelayError();
      log::Error(it->second.second + " for message " + id +
                     ". The message is now dead; fix the template or the message's event type, "
                     "then replay it.",
                 {{"inbox_id", id}, {"source", it->second.first}});
    }
    reasons.clear();
  }

  // Forward, retrying an outage with capped backoff while the claims can still hold (one lease;
  // the lease is renewed on the way; core/write_retry.h). A refusal that is not an outage is
  // retried row by row.
  Result<Forwarded> ForwardWithRetry(const std::vector<InboxForward>& forwards,
                                     Clock::time_point claimed_at) {
    const auto lease = milliseconds(options_.relay.claim_timeout_ms);
    auto renewed_at = claimed_at;
    WriteRetryHooks hooks;
    hooks.retry = [&](const Status& failure) {
      CycleFailed(failure, "Forwarding inbox rows failed; retrying");
      return !stop_flag_.load() && Clock::now() - renewed_at < lease;
    };
    hooks.after_wait = [&] {
      if (Clock::now() - renewed_at < lease / 3) return;
      std::vector<Fence> fences;
      for (const InboxForward& f : forwards) fences.push_back(f.fence);
      if (claims_->Renew(fences, options_.relay.claim_timeout_ms).ok()) renewed_at = Clock::now();
    };
    Result<std::vector<std::string>> done =
        RetryTransientWrite([&] { return claims_->Forward(forwards); }, hooks);
    if (done.ok()) return Forwarded{std::move(done).value(), 0};
    if (IsTransient(done.status().code())) return done.status();
    CycleFailed(done.status(), "Forwarding inbox rows failed; retrying them one at a time");
    return ForwardOneByOne(forwards);
  }

  // Each row in its own forward: rows the outbox accepts go on; a row refused again stays
  // `processing` until its lease returns it (QueueBox reference §11.6). An outage on the way
  // leaves the remaining rows to their lease too.
  Forwarded ForwardOneByOne(const std::vector<InboxForward>& forwards) {
    Forwarded out;
    for (size_t i = 0; i < forwards.size(); ++i) {
      const InboxForward& f = forwards[i];
      Result<std::vector<std::string>> one = claims_->Forward(std::span<const InboxForward>(&f, 1));
      if (one.ok()) {
        out.done.insert(out.done.end(), one->begin(), one->end());
        continue;
      }
      observer_->OnInboxRelayError();
      log::Error("Forwarding an inbox message failed; it returns after its lease",
                 {{"inbox_id", f.fence.id},
                  {"topic", f.topic},
                  {"reason", SanitizeError(one.status().message(), kMaxLastErrorChars)}});
      if (IsTransient(one.status().code())) {
        out.refused += forwards.size() - i;
        return out;
      }
      ++out.refused;
    }
    return out;
  }

  void ClaimsLost(size_t n, const char* action) {
    observer_->OnInboxClaimsLost(static_cast<int64_t>(n));
    log::Error(std::string("The claim on ") + std::to_string(n) +
                   " inbox message(s) was lost, so the relay did not " + action +
                   " and wrote nothing for them; their new owner does. Raise "
                   "'inbox.relay.claimTimeoutMs' above the slowest forward.",
               {{"lost", std::to_string(n)}});
  }

  void RefreshGauge() {
    if (operations_ == nullptr) return;
    const auto every = milliseconds(options_.relay.pending_gauge_interval_ms);
    if (gauge_once_ && Clock::now() - last_gauge_ < every) return;
    Result<double> age = operations_->OldestPendingAgeSeconds();
    if (!age.ok()) return;  // the cycle's own statements report the outage
    gauge_once_ = true;
    last_gauge_ = Clock::now();
    observer_->OnInboxOldestPendingAge(*age);
  }

  InboxRelayOptions options_;
  InboxRelayClaims* claims_;
  InboxOperations* operations_;
  NoopInboxObserver noop_;
  InboxRelayObserver* observer_;

  mutable std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  bool started_ = false, stopping_ = false;
  bool woken_ = false;  // set by Wake, cleared by the worker whose cycle starts next
  std::atomic<bool> stop_flag_{false};
  std::atomic<bool> last_ok_{true};
  uint64_t cycle_seq_ = 0, idle_seq_ = 0;
  // Per lane: the latest cycle (its seq) that found the lane empty.
  std::vector<uint64_t> lane_empty_seq_;
  Clock::time_point last_cycle_;
  std::atomic<uint64_t> next_lane_{0};
  // Under maintenance_mu_.
  std::mutex maintenance_mu_;
  bool reclaimed_once_ = false, gauge_once_ = false;
  Clock::time_point last_reclaim_, last_gauge_;
  log::RateLimiter db_limiter_{milliseconds(5000)};
  std::vector<std::thread> threads_;
};

}  // namespace

InboxRelayOptions InboxRelayOptions::FromConfig(const Config& config) {
  InboxRelayOptions o;
  o.relay = config.inbox.relay;
  o.max_attempts = config.inbox.relay.max_attempts.value_or(config.outbox.max_attempts);
  return o;
}

Result<std::unique_ptr<InboxRelay>> InboxRelay::Create(InboxRelayOptions options,
                                                       InboxRelayClaims* claims,
                                                       InboxOperations* operations,
                                                       InboxRelayObserver* observer) {
  if (claims == nullptr) return InvalidArgument("the inbox relay needs an inbox store");
  if (options.relay.batch_size <= 0) return InvalidArgument("inbox.relay.batchSize must be > 0");
  if (options.relay.claim_timeout_ms <= 0) {
    return InvalidArgument("inbox.relay.claimTimeoutMs must be > 0");
  }
  if (options.relay.poll_interval_ms <= 0) {
    return InvalidArgument("inbox.relay.pollIntervalMs must be > 0");
  }
  if (options.max_attempts <= 0) return InvalidArgument("inbox.relay.maxAttempts must be > 0");
  return std::unique_ptr<InboxRelay>(
      new InboxRelayImpl(std::move(options), claims, operations, observer));
}

std::string RenderInboxTopic(std::string_view tmpl, std::string_view source,
                             const std::optional<std::string>& event_type) {
  std::string out;
  size_t i = 0;
  while (i < tmpl.size()) {
    if (tmpl.compare(i, 2, "{{") == 0) {
      size_t end = tmpl.find("}}", i + 2);
      if (end != std::string_view::npos) {
        std::string_view name = TrimBlanks(tmpl.substr(i + 2, end - i - 2));
        if (name == "source") {
          out += source;
          i = end + 2;
          continue;
        }
        if (name == "eventType") {
          out += event_type.value_or("");
          i = end + 2;
          continue;
        }
      }
    }
    out += tmpl[i++];
  }
  return std::string(TrimBlanks(out));
}

std::string RelayHeaders(std::string_view inbox_headers, std::string_view inbox_id,
                         std::string_view source, std::string_view idempotency_key,
                         const std::optional<std::string>& correlation_id,
                         const TraceHeaders* trace) {
  nlohmann::json in = nlohmann::json::parse(inbox_headers, nullptr, false);
  nlohmann::json out = nlohmann::json::object();
  if (in.is_object()) {
    for (auto it = in.begin(); it != in.end(); ++it) {
      const std::string& name = it.key();
      if (EqualsIgnoreCase(name, kHeaderInboxId) || EqualsIgnoreCase(name, kHeaderSource) ||
          EqualsIgnoreCase(name, kHeaderIdempotencyKey) ||
          EqualsIgnoreCase(name, kHeaderCorrelationId) ||
          (trace != nullptr && telemetry::IsTraceHeader(name))) {
        continue;
      }
      out[name] = it.value().is_string() ? it.value() : nlohmann::json(it.value().dump());
    }
  }
  out[kHeaderInboxId] = std::string(inbox_id);
  out[kHeaderSource] = std::string(source);
  out[kHeaderIdempotencyKey] = std::string(idempotency_key);
  if (correlation_id) out[kHeaderCorrelationId] = *correlation_id;
  if (trace != nullptr && !trace->traceparent.empty()) {
    out[std::string(telemetry::kTraceparent)] = trace->traceparent;
    if (!trace->tracestate.empty()) out[std::string(telemetry::kTracestate)] = trace->tracestate;
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace queuebox
