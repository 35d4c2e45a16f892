// The outbox relay: poller, publish workers, lease keeper (QueueBox reference §4, §5, §13.8).
//
// Threads:
//   poller        reclaims expired leases (every lease/5), claims batchSize rows whenever that
//                 many fit under the claim-ahead limit (ClaimAheadLimit: the rows held, claimed
//                 and outcome not yet written, stay <= 2 x batchSize + concurrency),
//                 dead-letters unroutable rows, groups the rest by destination and queues one
//                 task per group.
//   workers       publish a task's rows in slices with at most `concurrency` messages in
//                 Destination::PublishBatch at once across the replica; the worker that publishes
//                 a task's last slice turns its outcomes into row decisions (core/outcome.h) and
//                 writes them with one fenced statement per kind.
//   lease keeper  renews every claim this replica holds (queued or publishing) in one statement
//                 every lease/3. A row the renewal did not renew is lost (another replica owns
//                 it): its publish is cancelled (OutboundMessage::cancel), it is counted in
//                 queuebox_claims_lost_total once, and the relay writes nothing to it.
// Outages (an Outcome of kind kUnavailable): with the destination's circuit breaker
// (core/circuit_breaker.h) the row is released, attempt unchanged; while the breaker is open a
// slice's rows are released without a publish, due again after the open time, so an outage
// costs one claim and one release per row per open time, never a hot loop.
// Per-key order needs no logic here: a claim never returns two rows of one key, and a key's
// next row becomes claimable only after this row's outcome is written, so rows queued ahead are
// all of different keys than every row in flight.
#include "queuebox/relay.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/backoff.h"
#include "core/circuit_breaker.h"
#include "core/log.h"
#include "core/outcome.h"
#include "core/redaction.h"
#include "core/router.h"
#include "core/template.h"

namespace queuebox {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class NoopObserver : public RelayObserver {};

// Collects the outcomes of one batch; a message the destination never reported is a failure.
class BatchSink : public OutcomeSink {
 public:
  explicit BatchSink(size_t n) : outcomes_(n), reported_(n, false) {}
  void Report(size_t index, Outcome outcome) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (index >= outcomes_.size() || reported_[index]) return;
    outcomes_[index] = std::move(outcome);
    reported_[index] = true;
  }
  std::vector<Outcome> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < outcomes_.size(); ++i) {
      if (!reported_[i])
        outcomes_[i] = Outcome::Retry("Publish failed: the destination reported no outcome");
    }
    return std::move(outcomes_);
  }

 private:
  std::mutex mu_;
  std::vector<Outcome> outcomes_;
  std::vector<bool> reported_;
};

// One destination's share of a claim. The rows [0, next) were handed to a publish; `publishing`
// of them are still in one; outcomes[i] is row i's outcome once its slice returned (each slice's
// worker writes only its own rows' entries).
struct BatchTask {
  Destination* destination = nullptr;
  std::vector<OutboxRow> rows;
  std::vector<std::optional<std::string>> routing_keys;
  std::vector<size_t> routes;  // the route each row matched
  bool transformed = false;    // some row's route or destination has a transform stage
  Clock::time_point claimed_at;
  // Guarded by the relay's mutex.
  size_t next = 0;
  size_t publishing = 0;
  bool abandoned = false;  // the shutdown timeout passed: rows [next, size) are never published
  std::vector<Outcome> outcomes;
  // cancel[i]: row i's claim is lost (set by the lease keeper). Shared with the claims map.
  std::shared_ptr<std::atomic<bool>[]> cancel;
  // Per row, for an Unavailable outcome under a circuit breaker: due again after this (ms).
  std::vector<int64_t> release_delay;
};

// A claim this replica holds, from Dispatch until its outcome write is accounted for.
struct HeldClaim {
  std::string token;
  std::shared_ptr<std::atomic<bool>[]> cancel;  // the row's task's flags; null: unroutable row
  size_t index = 0;                             // the row's flag in `cancel`
  bool writing = false;  // its outcome write started: the fenced write decides, not a renewal
  bool lost = false;     // a renewal missed it; counted in queuebox_claims_lost_total
};

// The most rows a replica holds (claimed, outcome not yet written): one batch waiting for its
// outcome write, one batch queued behind the `concurrency` messages in flight, and those.
// The poller claims only when a whole batch fits, so a claim never takes fewer than batchSize
// rows because publishes are in flight.
int64_t ClaimAheadLimit(const OutboxConfig& o) {
  return 2 * static_cast<int64_t>(o.batch_size) + o.concurrency;
}

std::string AttemptText(int attempt) { return std::to_string(attempt); }

// The start of last_error for a row the open circuit breaker released without a publish.
constexpr std::string_view kNotPublished = "Not published, its circuit breaker is open: ";

class RelayImpl final : public Relay {
 public:
  RelayImpl(RelayOptions options, OutboxClaims* claims, ReplicaMembership* replicas, Router router,
            std::map<std::string, std::unique_ptr<Destination>> destinations,
            RelayObserver* observer)
      : options_(std::move(options)),
        outbox_(claims),
        replicas_(replicas),
        router_(std::move(router)),
        destinations_(std::move(destinations)),
        observer_(observer != nullptr ? observer : &noop_) {
    for (size_t i = 0; i < router_.size(); ++i) {
      const RouteConfig& r = router_.route(i);
      route_keys_.push_back(r.routing_key_template
                                ? std::optional<Template>(Template::CompileRoutingKey(
                                      *r.routing_key_template, r.routing_key_missing_field_default))
                                : std::nullopt);
    }
    for (const auto& [name, d] : destinations_) {
      auto found = options_.circuit_breakers.find(name);
      CircuitBreakerConfig c =
          found != options_.circuit_breakers.end() ? found->second : CircuitBreakerConfig{};
      if (!c.enabled) continue;
      const std::string dest = name;
      breakers_[name] = std::make_unique<CircuitBreaker>(
          c,
          [this, dest](CircuitBreaker::State from, CircuitBreaker::State to,
                       std::string_view reason) { OnBreakerTransition(dest, from, to, reason); });
      observer_->OnCircuitState(name, static_cast<int>(CircuitBreaker::State::kClosed));
    }
    // Two at least: one can write a task's outcomes while another publishes.
    int workers = std::clamp(options_.outbox.concurrency, 2, 16);
    worker_count_ = workers;
  }

  ~RelayImpl() override {
    Stop();
    for (auto& t : workers_) {
      if (t.joinable()) t.join();
    }
  }

  Status Start() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return FailedPrecondition("the relay is already started");
    started_ = true;
    last_cycle_ = Clock::now();
    poller_ = std::thread([this] { PollLoop(); });
    lease_keeper_ = std::thread([this] { LeaseLoop(); });
    for (int i = 0; i < worker_count_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
    return Status::Ok();
  }

  void Wake() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      wake_ = true;
    }
    poll_cv_.notify_all();
  }

  Status WaitIdle(milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!started_) return FailedPrecondition("the relay is not started");
    uint64_t target = cycle_seq_ + 1;
    wake_ = true;
    poll_cv_.notify_all();
    bool ok = idle_cv_.wait_for(lock, timeout, [&] { return idle_seq_ >= target || stopping_; });
    if (!ok) return DeadlineExceeded("the relay did not become idle in time");
    return Status::Ok();
  }

  int64_t Stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!started_ || stop_done_) return abandoned_;
      stopping_ = true;
    }
    poll_cv_.notify_all();
    lease_cv_.notify_all();
    idle_cv_.notify_all();
    if (poller_.joinable()) poller_.join();
    // No more claims from this replica: hand its keys to the others now (key affinity), not after
    // the in-flight publishes below or the heartbeat's ttl.
    if (replicas_ != nullptr) replicas_->LeaveReplicaSet();
    // Let in-flight publishes finish and write their outcomes, within shutdownTimeoutMs.
    std::unique_lock<std::mutex> lock(mu_);
    auto deadline = Clock::now() + milliseconds(options_.outbox.shutdown_timeout_ms);
    done_cv_.wait_until(lock, deadline, [&] { return in_flight_ == 0 && tasks_.empty(); });
    abandoned_ = in_flight_;
    workers_stop_ = true;
    // Rows queued behind the publishes are abandoned with them: no worker starts another slice.
    for (auto& task : tasks_) task->abandoned = true;
    tasks_.clear();
    stop_done_ = true;
    lock.unlock();
    task_cv_.notify_all();
    lease_cv_.notify_all();
    if (lease_keeper_.joinable()) lease_keeper_.join();
    if (abandoned_ > 0) {
      log::Warn(
          "The shutdown timeout elapsed; in-flight messages were abandoned. The reclaim "
          "step recovers them after their lease.",
          {{"shutdown_timeout_ms", std::to_string(options_.outbox.shutdown_timeout_ms)},
           {"abandoned", std::to_string(abandoned_)}});
      return abandoned_;
    }
    for (auto& t : workers_) {
      if (t.joinable()) t.join();
    }
    for (auto& [name, d] : destinations_) d->Stop();
    return 0;
  }

  double SecondsSinceLastCycle() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return std::chrono::duration<double>(Clock::now() - last_cycle_).count();
  }

  int64_t InFlight() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_;
  }

  std::string CircuitState(const std::string& destination) const override {
    auto it = breakers_.find(destination);
    if (it == breakers_.end()) return "";
    return std::string(CircuitBreaker::Name(it->second->state()));
  }

 private:
  // ---- poller ----
  void PollLoop() {
    int db_failures = 0;
    Clock::time_point last_reclaim{};
    const auto reclaim_every =
        milliseconds(std::max<int64_t>(1, options_.outbox.claim_timeout_ms / 5));
    while (true) {
      int64_t room;
      uint64_t cycle;
      bool started_idle;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) break;
        wake_ = false;
        cycle = ++cycle_seq_;
        room = ClaimAheadLimit(options_.outbox) - in_flight_;
        started_idle = in_flight_ == 0 && tasks_.empty();
      }
      Status cycle_status = Status::Ok();
      bool full = false;
      if (Clock::now() - last_reclaim >= reclaim_every) {
        auto n = outbox_->ReclaimExpired();
        if (n.ok()) {
          last_reclaim = Clock::now();
          if (*n > 0) {
            observer_->OnReclaimed(*n);
            log::Warn("Returned rows with an expired lease to pending",
                      {{"rows", std::to_string(*n)}});
          }
        } else {
          cycle_status = n.status();
        }
      }
      size_t claimed = 0;
      if (cycle_status.ok() && room >= options_.outbox.batch_size) {
        const int limit = options_.outbox.batch_size;
        auto rows = outbox_->Claim(limit, options_.outbox.claim_timeout_ms);
        if (rows.ok()) {
          claimed = rows->size();
          full = claimed == static_cast<size_t>(limit);
          if (claimed > 0) Dispatch(std::move(rows).value());
        } else {
          cycle_status = rows.status();
        }
      }
      observer_->OnPollCycle(cycle_status.ok());
      int64_t wait_ms = options_.outbox.poll_interval_ms;
      if (cycle_status.ok()) {
        if (db_failures > 0) log::Info("The database is reachable again; delivery resumes");
        db_failures = 0;
        std::lock_guard<std::mutex> lock(mu_);
        last_cycle_ = Clock::now();
        if (claimed == 0 && started_idle && in_flight_ == 0 && tasks_.empty()) {
          idle_seq_ = cycle;
          idle_cv_.notify_all();
        }
      } else {
        ++db_failures;
        wait_ms = ReconnectDelayMs(db_failures - 1, options_.outbox.poll_interval_ms, 30000);
        int64_t suppressed = 0;
        if (db_limiter_.Allow(&suppressed)) {
          log::Error("The poll cycle failed. The next cycle retries.",
                     {{"reason", SanitizeError(cycle_status.message(), kMaxLastErrorChars)},
                      {"retry_in_ms", std::to_string(wait_ms)},
                      {"suppressed", std::to_string(suppressed)}});
        }
        observer_->OnProcessError();
      }
      if (full && cycle_status.ok()) continue;  // more may be due right now
      if (cycle_status.ok() && options_.outbox.capture.mode != "polling" && !WakePending()) {
        const int64_t cap =
            std::max<int64_t>(1, options_.outbox.capture.reconciliation_interval_ms);
        auto next = outbox_->NextWakeDelayMs(cap);
        wait_ms = next.ok() ? *next : cap;
      }
      std::unique_lock<std::mutex> lock(mu_);
      poll_cv_.wait_for(lock, milliseconds(wait_ms), [&] { return wake_ || stopping_; });
    }
  }

  bool WakePending() {
    std::lock_guard<std::mutex> lock(mu_);
    return wake_ || stopping_;
  }

  void Dispatch(std::vector<OutboxRow> rows) {
    const auto now = Clock::now();
    std::map<Destination*, BatchTask> groups;
    std::vector<DeadOrder> unroutable;
    const int64_t claimed = static_cast<int64_t>(rows.size());
    std::vector<OutboxRow> unroutable_rows;
    for (auto& row : rows) {
      auto route = router_.Match(row.topic);
      if (!route) {
        unroutable.push_back(
            {{row.id, row.claim_token}, "No route matches topic '" + row.topic + "'"});
        unroutable_rows.push_back(std::move(row));
        continue;
      }
      const RouteConfig& rc = router_.route(*route);
      auto it = destinations_.find(rc.destination);
      if (it == destinations_.end()) {
        unroutable.push_back({{row.id, row.claim_token},
                              "No publisher supports destination '" + rc.destination + "'"});
        unroutable_rows.push_back(std::move(row));
        continue;
      }
      BatchTask& task = groups[it->second.get()];
      task.destination = it->second.get();
      task.claimed_at = now;
      std::optional<std::string> routing_key;
      if (route_keys_[*route]) {
        routing_key = route_keys_[*route]->Render(TemplateContext::ForRow(row));
      }
      task.routing_keys.push_back(std::move(routing_key));
      task.routes.push_back(*route);
      if (options_.transforms && options_.transforms->Applies(*route)) task.transformed = true;
      task.rows.push_back(std::move(row));
    }
    {
      // The claims are held (renewed) from here; the tasks' rows get cancel flags.
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_ += claimed;
      for (const auto& r : unroutable_rows) {
        HeldClaim& c = Hold(r.id, r.claim_token);
        c.writing = true;  // written dead below
      }
      for (auto& [d, task] : groups) {
        task.cancel =
            std::shared_ptr<std::atomic<bool>[]>(new std::atomic<bool>[task.rows.size()]());
        for (size_t i = 0; i < task.rows.size(); ++i) {
          HeldClaim& c = Hold(task.rows[i].id, task.rows[i].claim_token);
          c.cancel = task.cancel;
          c.index = i;
        }
      }
    }
    if (!unroutable.empty()) {
      for (const auto& r : unroutable_rows) {
        log::Error("No route matches the message's topic; it is now dead",
                   {{"message_id", r.id}, {"topic", r.topic}});
      }
      std::vector<const OutboxRow*> dead_rows;
      for (const auto& r : unroutable_rows) dead_rows.push_back(&r);
      WriteDead(unroutable, dead_rows, now);
    }
    if (groups.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [d, task] : groups) {
        observer_->OnQueueDepth(d->name(), static_cast<int64_t>(task.rows.size()));
        task.outcomes.resize(task.rows.size());
        task.release_delay.assign(task.rows.size(), 0);
        tasks_.push_back(std::make_shared<BatchTask>(std::move(task)));
      }
    }
    task_cv_.notify_one();  // the worker that takes a slice wakes the next one
  }

  // ---- workers ----
  void WorkerLoop() {
    const auto concurrency = static_cast<size_t>(options_.outbox.concurrency);
    while (true) {
      std::shared_ptr<BatchTask> task;
      size_t begin = 0, end = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        task_cv_.wait(
            lock, [&] { return workers_stop_ || (!tasks_.empty() && publishing_ < concurrency); });
        if (workers_stop_) return;
        // The next slice of the oldest task, as many rows as there are free publish slots.
        task = tasks_.front();
        begin = task->next;
        end = begin + std::min(task->rows.size() - begin, concurrency - publishing_);
        task->next = end;
        task->publishing += end - begin;
        publishing_ += end - begin;
        if (end == task->rows.size()) tasks_.pop_front();
        // One waiting worker per slice that can start (no herd on every change).
        if (!tasks_.empty() && publishing_ < concurrency) task_cv_.notify_one();
      }
      PublishSlice(*task, begin, end);
      size_t written = 0;  // rows whose outcomes this worker writes: the task's published ones
      {
        std::lock_guard<std::mutex> lock(mu_);
        publishing_ -= end - begin;
        task->publishing -= end - begin;
        if (task->publishing == 0 && (task->next == task->rows.size() || task->abandoned)) {
          written = task->next;
          for (size_t i = 0; i < written; ++i) {
            if (HeldClaim* c = Held(task->rows[i].id, task->rows[i].claim_token)) {
              c->writing = true;
            }
          }
        }
      }
      task_cv_.notify_one();
      if (written > 0) WriteOutcomes(*task, written);
    }
  }

  // Runs the transform stages of rows [begin, end) of a task (QueueBox reference §8): the rows to
  // publish go to `messages` with their bodies (and their row index to `index`); a row that a
  // failed stage keeps from the destination gets its outcome in task.outcomes (Fail: retry,
  // Dead: reject).
  void Transform(BatchTask& task, const std::vector<size_t>& rows,
                 std::vector<OutboundMessage>& messages, std::vector<size_t>& index) {
    std::vector<DeliveryTransforms::Message> in(rows.size());
    for (size_t k = 0; k < rows.size(); ++k) in[k] = {&task.rows[rows[k]], task.routes[rows[k]]};
    std::vector<DeliveryTransforms::Result> out(rows.size());
    options_.transforms->Apply(in, out);
    for (size_t k = 0; k < rows.size(); ++k) {
      const size_t i = rows[k];
      DeliveryTransforms::Result& r = out[k];
      if (!r.failed_strategy.empty()) observer_->OnTransformFailure(r.failed_strategy);
      switch (r.kind) {
        case DeliveryTransforms::Result::Kind::kDeliver:
          messages.push_back({.row = &task.rows[i],
                              .routing_key = task.routing_keys[i],
                              .transformed_body = std::move(r.body),
                              .cancel = &task.cancel[i]});
          index.push_back(i);
          break;
        case DeliveryTransforms::Result::Kind::kRetry:
          task.outcomes[i] = Outcome::Retry(std::move(r.error));
          break;
        case DeliveryTransforms::Result::Kind::kDead:
          task.outcomes[i] = Outcome::Reject(std::move(r.error));
          break;
      }
    }
  }

  // Publishes rows [begin, end) of a task and keeps their outcomes in the task. Only this
  // worker touches those rows' entries until the slice is accounted for under the mutex.
  void PublishSlice(BatchTask& task, size_t begin, size_t end) {
    // The circuit breaker admits the rows to publish; the others are released without a publish.
    CircuitBreaker* breaker = BreakerOf(*task.destination);
    std::vector<size_t> admitted;
    std::vector<uint64_t> probe(end - begin, 0);  // each row's Admission::probe
    admitted.reserve(end - begin);
    const auto admit_time = Clock::now();
    for (size_t i = begin; i < end; ++i) {
      if (breaker == nullptr) {
        admitted.push_back(i);
        continue;
      }
      CircuitBreaker::Admission a = breaker->Admit(admit_time);
      if (a.publish) {
        admitted.push_back(i);
        probe[i - begin] = a.probe;
      } else {
        task.outcomes[i] = Outcome::Unavailable(std::string(kNotPublished) + "destination '" +
                                                task.destination->name() + "' is out");
        task.release_delay[i] = a.release_delay_ms;
      }
    }
    // messages[j] is task.rows[index[j]]; a row without a message has its outcome already.
    std::vector<OutboundMessage> messages;
    std::vector<size_t> index;
    messages.reserve(admitted.size());
    index.reserve(admitted.size());
    if (task.transformed) {
      Transform(task, admitted, messages, index);
    } else {
      for (size_t i : admitted) {
        messages.push_back(
            {.row = &task.rows[i], .routing_key = task.routing_keys[i], .cancel = &task.cancel[i]});
        index.push_back(i);
      }
    }
    // Rows whose claim was lost while they were queued are not published at all.
    size_t kept = 0;
    for (size_t j = 0; j < messages.size(); ++j) {
      if (messages[j].cancel_requested()) {
        task.outcomes[index[j]] = Outcome::Cancelled();
        continue;
      }
      if (kept != j) {
        messages[kept] = std::move(messages[j]);
        index[kept] = index[j];
      }
      ++kept;
    }
    messages.resize(kept);
    index.resize(kept);
    BatchSink sink(messages.size());
    auto start = Clock::now();
    if (!messages.empty()) task.destination->PublishBatch(messages, sink);
    const auto done = Clock::now();
    double seconds = std::chrono::duration<double>(done - start).count();
    std::vector<Outcome> published = sink.Take();
    std::vector<char> recorded(end - begin, 0);
    int64_t successes = 0, failures = 0;
    for (size_t j = 0; j < index.size(); ++j) {
      if (published[j].kind == Outcome::Kind::kCancelled) {
        // Only a lost claim cancels; a destination that cancels a held claim failed it.
        if (!messages[j].cancel_requested()) {
          published[j] = Outcome::Retry("Publish failed: cancelled by the destination");
        } else {
          task.outcomes[index[j]] = std::move(published[j]);
          continue;  // nothing was published
        }
      }
      Outcome& o = published[j];
      ++(o.kind == Outcome::Kind::kDelivered ? successes : failures);
      if (breaker != nullptr) {
        const size_t i = index[j];
        const bool outage = o.kind == Outcome::Kind::kUnavailable;
        task.release_delay[i] =
            breaker->Record(outage, probe[i - begin], o.retry_after_ms, done, o.error);
        recorded[i - begin] = 1;
      }
      task.outcomes[index[j]] = std::move(o);
    }
    observer_->OnPublishes(*task.destination, successes, failures, seconds);
    // A probe a transform kept from the destination has no verdict.
    if (breaker != nullptr) {
      for (size_t k = 0; k < probe.size(); ++k) {
        if (probe[k] != 0 && recorded[k] == 0) breaker->Abandon(probe[k]);
      }
    }
    observer_->OnQueueDepth(task.destination->name(), -static_cast<int64_t>(end - begin));
  }

  // Turns the outcomes of the task's first `n` rows into row decisions and writes them, one
  // fenced statement per kind.
  void WriteOutcomes(BatchTask& task, size_t n) {
    std::vector<Fence> sent;
    // The rows stay in `task`; the outcome lists point at them (no copy of the payloads).
    std::vector<const OutboxRow*> sent_rows, retry_rows, dead_rows, cancelled_rows, release_rows;
    std::vector<RetryOrder> retries;
    std::vector<DeadOrder> deads;
    std::vector<ReleaseOrder> releases;
    const bool has_breaker = BreakerOf(*task.destination) != nullptr;
    for (size_t i = 0; i < n; ++i) {
      const OutboxRow& row = task.rows[i];
      const Outcome& outcome = task.outcomes[i];
      if (outcome.kind == Outcome::Kind::kCancelled) {
        cancelled_rows.push_back(&row);  // the new owner writes the row
        continue;
      }
      RowDecision d =
          Decide(row, outcome, options_.outbox.retry_base_delay_ms,
                 has_breaker ? std::optional<int64_t>(task.release_delay[i]) : std::nullopt);
      Fence fence{row.id, row.claim_token};
      switch (d.kind) {
        case RowDecision::Kind::kRelease:
          // Rows the open breaker kept from the destination are not logged one by one: its
          // transition said why.
          if (!outcome.error.starts_with(kNotPublished)) LogRelease(row, *task.destination, d);
          releases.push_back({fence, d.delay_ms, d.error});
          release_rows.push_back(&row);
          break;
        case RowDecision::Kind::kSent:
          sent.push_back(fence);
          sent_rows.push_back(&row);
          break;
        case RowDecision::Kind::kRetry:
          LogFailure(row, *task.destination, d, false, false);
          retries.push_back({fence, d.delay_ms, d.error});
          retry_rows.push_back(&row);
          break;
        case RowDecision::Kind::kDead:
          LogFailure(row, *task.destination, d, true, outcome.kind == Outcome::Kind::kReject);
          deads.push_back({fence, d.error});
          dead_rows.push_back(&row);
          break;
      }
    }
    if (!sent.empty()) {
      auto changed = WriteWithRetry([&] { return outbox_->MarkSent(sent); });
      Finish(sent_rows, changed, "sent", task.claimed_at);
    }
    if (!retries.empty()) {
      auto changed = WriteWithRetry([&] { return outbox_->ScheduleRetry(retries); });
      Finish(retry_rows, changed, "failed", task.claimed_at);
    }
    if (!deads.empty()) WriteDead(deads, dead_rows, task.claimed_at);
    if (!cancelled_rows.empty()) {
      Finish(cancelled_rows, std::vector<std::string>{}, "cancelled", task.claimed_at);
    }
    if (!releases.empty()) {
      auto changed = WriteWithRetry([&] { return outbox_->Release(releases); });
      Finish(release_rows, changed, "released", task.claimed_at);
    }
  }

  CircuitBreaker* BreakerOf(const Destination& d) const {
    auto it = breakers_.find(d.name());
    return it == breakers_.end() ? nullptr : it->second.get();
  }

  // One log line per transition (the breaker's lock is held: no call back into it).
  void OnBreakerTransition(const std::string& destination, CircuitBreaker::State from,
                           CircuitBreaker::State to, std::string_view reason) {
    observer_->OnCircuitState(destination, static_cast<int>(to));
    std::string from_name(CircuitBreaker::Name(from)), to_name(CircuitBreaker::Name(to));
    switch (to) {
      case CircuitBreaker::State::kOpen:
        log::Warn(
            "The destination is unavailable; its circuit breaker is open. Its messages are "
            "released without spending an attempt until a probe succeeds.",
            {{"destination", destination},
             {"from", from_name},
             {"to", to_name},
             {"reason", SanitizeError(std::string(reason), kMaxLastErrorChars)}});
        break;
      case CircuitBreaker::State::kHalfOpen:
        log::Info("The circuit breaker of the destination is half-open; probing",
                  {{"destination", destination}, {"from", from_name}, {"to", to_name}});
        break;
      case CircuitBreaker::State::kClosed:
        log::Info("The destination is available again; its circuit breaker is closed",
                  {{"destination", destination}, {"from", from_name}, {"to", to_name}});
        break;
    }
  }

  void LogRelease(const OutboxRow& row, const Destination& d, const RowDecision& decision) {
    int64_t suppressed = 0;
    if (!failure_limiter_.Allow(&suppressed)) return;
    log::Warn(
        "The destination is unavailable; the message was released without spending an attempt",
        {{"message_id", row.id},
         {"topic", row.topic},
         {"attempt", AttemptText(row.attempt)},
         {"destination", d.name()},
         {"reason", decision.error},
         {"retry_in_ms", std::to_string(decision.delay_ms)},
         {"suppressed", std::to_string(suppressed)}});
  }

  void LogFailure(const OutboxRow& row, const Destination& d, const RowDecision& decision,
                  bool dead, bool rejected) {
    int64_t suppressed = 0;
    if (!failure_limiter_.Allow(&suppressed)) return;
    std::initializer_list<log::Field> fields = {{"message_id", row.id},
                                                {"topic", row.topic},
                                                {"key", row.key.value_or("")},
                                                {"attempt", AttemptText(row.attempt)},
                                                {"destination", d.name()},
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

  void WriteDead(const std::vector<DeadOrder>& orders, const std::vector<const OutboxRow*>& rows,
                 Clock::time_point claimed_at) {
    auto changed = WriteWithRetry([&] { return outbox_->MarkDead(orders); });
    Finish(rows, changed, "dead", claimed_at);
  }

  // Writes an outcome batch, retrying a database outage with capped backoff while the claims
  // can still be valid (one lease). Past that, the rows are left to the reclaim step.
  template <typename Fn>
  Result<std::vector<std::string>> WriteWithRetry(Fn&& fn) {
    auto give_up = Clock::now() + milliseconds(options_.outbox.claim_timeout_ms);
    int failures = 0;
    while (true) {
      auto r = fn();
      if (r.ok() || !IsTransient(r.status().code()) || Clock::now() >= give_up) return r;
      int64_t suppressed = 0;
      if (db_limiter_.Allow(&suppressed)) {
        log::Error("Writing delivery outcomes failed; retrying",
                   {{"reason", SanitizeError(r.status().message(), kMaxLastErrorChars)},
                    {"suppressed", std::to_string(suppressed)}});
      }
      std::this_thread::sleep_for(milliseconds(ReconnectDelayMs(failures++, 50, 5000)));
    }
  }

  // Bookkeeping after an outcome write: counts, lost claims, in-flight release, wake-up.
  void Finish(const std::vector<const OutboxRow*>& rows,
              const Result<std::vector<std::string>>& changed, std::string_view status,
              Clock::time_point claimed_at) {
    if (!changed.ok()) {
      observer_->OnProcessError();
      log::Error("Could not write delivery outcomes; the rows return after their lease",
                 {{"reason", SanitizeError(changed.status().message(), kMaxLastErrorChars)},
                  {"rows", std::to_string(rows.size())}});
    } else {
      std::unordered_set<std::string_view> ok(changed->begin(), changed->end());
      std::vector<bool> counted(rows.size(), false);  // lost and counted by the lease keeper
      if (ok.size() < rows.size()) {
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t i = 0; i < rows.size(); ++i) {
          const HeldClaim* c = Held(rows[i]->id, rows[i]->claim_token);
          counted[i] = c != nullptr && c->lost;
        }
      }
      int64_t lost = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        const OutboxRow* row = rows[i];
        // A cancelled publish sent nothing: the lease keeper's count and warning say it all.
        if (ok.count(row->id) == 0 && status != "cancelled") {
          if (!counted[i]) ++lost;
          log::Error(
              "The claim on the message was already lost, so its outcome was not "
              "written. Raise 'outbox.claimTimeoutMs' above the slowest publish.",
              {{"message_id", row->id}, {"topic", row->topic}, {"outcome", std::string(status)}});
        }
      }
      if (lost > 0) observer_->OnClaimsLost(lost);
      int64_t written = static_cast<int64_t>(changed->size());
      if (written > 0) observer_->OnMessages(status, written);
    }
    double seconds = std::chrono::duration<double>(Clock::now() - claimed_at).count();
    observer_->OnProcessingDurations(seconds, static_cast<int64_t>(rows.size()));
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const OutboxRow* row : rows) {
        // Only this claim's entry: the row may be held again under a newer claim.
        if (Held(row->id, row->claim_token) != nullptr) claims_.erase(row->id);
      }
      in_flight_ -= static_cast<int64_t>(rows.size());
      wake_ = true;
    }
    poll_cv_.notify_all();
    done_cv_.notify_all();
  }

  // The entry of the claim (id, token), created or taken over; mu_ held. A row this replica
  // claims again while an older claim of it is still held (that lease passed mid-publish and
  // the row came back) replaces the entry: the older claim is lost, its publish cancelled where
  // not yet sent, and its own fenced write later finds it lost and counts it.
  HeldClaim& Hold(const std::string& id, const std::string& token) {
    auto [it, inserted] = claims_.try_emplace(id);
    if (!inserted && it->second.token != token) {
      if (it->second.cancel) it->second.cancel[it->second.index].store(true);
      it->second = HeldClaim{};
    }
    it->second.token = token;
    return it->second;
  }

  // The entry of exactly this claim, or nullptr; mu_ held.
  HeldClaim* Held(const std::string& id, const std::string& token) {
    auto it = claims_.find(id);
    return it != claims_.end() && it->second.token == token ? &it->second : nullptr;
  }

  // ---- lease keeper ----
  void LeaseLoop() {
    const auto every = milliseconds(std::max<int64_t>(1, options_.outbox.claim_timeout_ms / 3));
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_done_) {
      lease_cv_.wait_for(lock, every, [&] { return stop_done_; });
      if (stop_done_) break;
      std::vector<Fence> fences;
      fences.reserve(claims_.size());
      for (const auto& [id, claim] : claims_) {
        if (!claim.lost) fences.push_back({id, claim.token});
      }
      if (fences.empty()) continue;
      lock.unlock();
      auto renewed = outbox_->Renew(fences, options_.outbox.claim_timeout_ms);
      if (!renewed.ok()) {
        int64_t suppressed = 0;
        if (db_limiter_.Allow(&suppressed)) {
          log::Error("Renewing the leases of in-flight messages failed",
                     {{"reason", SanitizeError(renewed.status().message(), kMaxLastErrorChars)},
                      {"suppressed", std::to_string(suppressed)}});
        }
      }
      lock.lock();
      if (renewed.ok() && renewed->size() < fences.size()) {
        // Not renewed and not yet being written: lost (the fence makes that final). Its publish
        // is cancelled if not yet handed over, and it is counted now, once. A row whose outcome
        // write started is left to that fenced write (Finish counts it if it changed nothing).
        std::unordered_set<std::string_view> kept(renewed->begin(), renewed->end());
        int64_t lost = 0;
        for (const Fence& f : fences) {
          if (kept.count(f.id) > 0) continue;
          HeldClaim* c = Held(f.id, f.claim_token);  // a newer claim of the row is not this one
          if (c == nullptr || c->writing || c->lost) continue;
          c->lost = true;
          if (c->cancel) c->cancel[c->index].store(true);
          ++lost;
        }
        if (lost > 0) {
          observer_->OnClaimsLost(lost);
          log::Warn(
              "Some in-flight claims were lost (another replica owns the rows); their publishes "
              "are cancelled where not yet sent, and their outcomes are not written. Raise "
              "'outbox.claimTimeoutMs' above the slowest publish.",
              {{"lost", std::to_string(lost)}});
        }
      }
    }
  }

  RelayOptions options_;
  OutboxClaims* outbox_;         // claims and outcomes
  ReplicaMembership* replicas_;  // nullptr: no replica set to leave
  Router router_;
  std::vector<std::optional<Template>> route_keys_;
  std::map<std::string, std::unique_ptr<Destination>> destinations_;
  NoopObserver noop_;
  RelayObserver* observer_;
  // By destination name, for destinations whose breaker is enabled; fixed after construction.
  std::map<std::string, std::unique_ptr<CircuitBreaker>> breakers_;
  int worker_count_ = 1;

  mutable std::mutex mu_;
  std::condition_variable poll_cv_, task_cv_, done_cv_, idle_cv_, lease_cv_;
  bool started_ = false, stopping_ = false, workers_stop_ = false, stop_done_ = false;
  bool wake_ = false;
  uint64_t cycle_seq_ = 0, idle_seq_ = 0;
  int64_t in_flight_ = 0;
  int64_t abandoned_ = 0;
  std::deque<std::shared_ptr<BatchTask>> tasks_;  // tasks with rows not yet handed to a publish
  size_t publishing_ = 0;                         // messages in PublishBatch now, <= concurrency
  std::unordered_map<std::string, HeldClaim> claims_;  // by row id, in flight
  Clock::time_point last_cycle_;
  log::RateLimiter db_limiter_{milliseconds(5000)};
  log::RateLimiter failure_limiter_{milliseconds(1000)};

  std::thread poller_, lease_keeper_;
  std::vector<std::thread> workers_;
};

}  // namespace

Result<std::unique_ptr<Relay>> Relay::Create(
    RelayOptions options, OutboxClaims* claims,
    std::map<std::string, std::unique_ptr<Destination>> destinations, RelayObserver* observer,
    ReplicaMembership* replicas) {
  if (claims == nullptr) return InvalidArgument("the relay needs a store");
  if (options.outbox.batch_size <= 0) return InvalidArgument("outbox.batchSize must be > 0");
  if (options.outbox.concurrency <= 0) return InvalidArgument("outbox.concurrency must be > 0");
  if (options.outbox.claim_timeout_ms <= 0) {
    return InvalidArgument("outbox.claimTimeoutMs must be > 0");
  }
  if (options.outbox.capture.reconciliation_interval_ms <= 0) {
    return InvalidArgument("outbox.capture.reconciliationIntervalMs must be > 0");
  }
  for (size_t i = 0; i < options.routes.size(); ++i) {
    if (destinations.count(options.routes[i].destination) == 0) {
      return InvalidArgument("routes[" + std::to_string(i) +
                             "].destination: no destination named '" +
                             options.routes[i].destination + "'");
    }
  }
  QB_ASSIGN_OR_RETURN(Router router, Router::Create(options.routes));
  return std::unique_ptr<Relay>(new RelayImpl(
      std::move(options), claims, replicas, std::move(router), std::move(destinations), observer));
}

}  // namespace queuebox
