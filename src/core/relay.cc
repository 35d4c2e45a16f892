// The outbox relay (QueueBox reference §4, §5, §13.8) conducts three threads over three units:
// the claim ledger (core/claim_ledger.h: held claims, leases, cancel flags), the publish stage
// (core/publish_stage.h: admit -> transform -> drop cancelled -> publish -> record) and the
// outcome writer (core/outcome_writer.h: decide, fenced writes, retry of the write).
//   poller        reclaims expired leases (every lease/5), claims batchSize rows whenever that
//                 many fit under the claim-ahead limit (ClaimAheadLimit), dead-letters unroutable
//                 rows, groups the rest by destination and queues one task per group.
//   workers       publish a task's rows in slices with at most `concurrency` messages in
//                 Destination::PublishBatch at once across the replica (a destination that
//                 PipelinesBatch takes a task in one call, counted as one); the worker that
//                 publishes a task's last slice has its outcomes written, one fenced statement
//                 per kind.
//   lease keeper  renews every held claim in one statement every lease/3; a claim it did not
//                 renew is lost: its publish is cancelled, it is counted once, nothing is written.
// Per-key order needs no logic here: a claim never returns two rows of one key, and a key's
// next row becomes claimable only after this row's outcome is written, so rows queued ahead are
// all of different keys than every row in flight.
#include "queuebox/relay.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "core/backoff.h"
#include "core/claim_ledger.h"
#include "core/delivery_task.h"
#include "core/log.h"
#include "core/outcome_writer.h"
#include "core/publish_stage.h"
#include "core/rate_limit.h"
#include "core/redaction.h"
#include "core/router.h"
#include "core/template.h"

namespace queuebox {
namespace {

using Clock = RelayClock;
using std::chrono::milliseconds;

class NoopObserver : public RelayObserver {};

// A delivery task in the workers' queue. Guarded by the relay's mutex: the rows [0, next) were
// handed to a publish, `publishing` of them are still in one.
struct QueuedTask {
  DeliveryTask task;
  size_t next = 0;
  size_t publishing = 0;
  bool abandoned = false;  // the shutdown timeout passed: rows [next, size) are never published
};

// Rows of one destination that wait for its rate limit, and when each one's turn comes.
struct ThrottledRows {
  std::string reason;  // their last_error
  std::vector<OutboxRow> rows;
  std::vector<int64_t> delays_ms;
};

// The most rows a replica holds (claimed, outcome not yet written): a batch being written, a
// batch queued, and what is in flight: `concurrency` messages, or a whole batch when a destination
// PipelinesBatch (its task is one publish). The poller claims only when a whole batch fits.
int64_t ClaimAheadLimit(const OutboxConfig& o, bool pipelined) {
  const int64_t batch = o.batch_size;
  return 2 * batch + (pipelined ? std::max<int64_t>(batch, o.concurrency) : o.concurrency);
}

bool AnyPipelines(const std::map<std::string, std::unique_ptr<Destination>>& destinations) {
  return std::any_of(destinations.begin(), destinations.end(),
                     [](const auto& d) { return d.second->PipelinesBatch(); });
}

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
        claim_ahead_limit_(ClaimAheadLimit(options_.outbox, AnyPipelines(destinations_))),
        observer_(observer != nullptr ? observer : &noop_),
        publisher_(options_, destinations_, observer_),
        writer_({options_.outbox.retry_base_delay_ms, options_.outbox.claim_timeout_ms,
                 options_.outbox.attempt_history},
                outbox_, &ledger_, observer_, &db_limiter_,
                [this](int64_t rows) { Accounted(rows); }) {
    for (size_t i = 0; i < router_.size(); ++i) {
      const RouteConfig& r = router_.route(i);
      route_keys_.push_back(r.routing_key_template
                                ? std::optional<Template>(Template::CompileRoutingKey(
                                      *r.routing_key_template, r.routing_key_missing_field_default))
                                : std::nullopt);
    }
    for (const auto& [name, d] : destinations_) {
      auto limit = options_.rate_limits.find(name);
      if (limit == options_.rate_limits.end() || !limit->second.messages_per_second) continue;
      const auto per_second = static_cast<double>(*limit->second.messages_per_second);
      limits_[d.get()] = std::make_unique<RateLimit>(
          per_second, static_cast<double>(limit->second.burst.value_or(per_second)), Clock::now());
    }
    // Two at least: one can write a task's outcomes while another publishes.
    worker_count_ = std::clamp(options_.outbox.concurrency, 2, 16);
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
    for (auto& queued : tasks_) queued->abandoned = true;
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
    return publisher_.CircuitState(destination);
  }

 private:
  // ---- poller ----
  void PollLoop() {
    int db_failures = 0;
    while (true) {
      int64_t room;
      uint64_t cycle;
      bool started_idle;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) break;
        wake_ = false;
        cycle = ++cycle_seq_;
        room = claim_ahead_limit_ - in_flight_;
        started_idle = in_flight_ == 0 && tasks_.empty();
      }
      Status cycle_status = ReclaimWhenDue();
      size_t claimed = 0;
      if (cycle_status.ok() && room >= options_.outbox.batch_size) {
        auto rows = outbox_->Claim(options_.outbox.batch_size, options_.outbox.claim_timeout_ms);
        if (rows.ok()) {
          claimed = rows->size();
          if (claimed > 0) Dispatch(std::move(rows).value());
        } else {
          cycle_status = rows.status();
        }
      }
      observer_->OnPollCycle(cycle_status.ok());
      int64_t wait_ms = AfterCycle(cycle_status, db_failures, cycle, claimed, started_idle);
      const bool full = claimed == static_cast<size_t>(options_.outbox.batch_size);
      if (full && cycle_status.ok()) continue;  // more may be due right now
      if (cycle_status.ok() && options_.outbox.capture.mode != "polling" && !WakePending()) {
        const int64_t cap =
            std::max<int64_t>(1, options_.outbox.capture.reconciliation_interval_ms);
        auto next = outbox_->NextWakeDelayMs(cap);
        wait_ms = next.ok() ? *next : cap;
      }
      // Rows waiting for a rate limit are due at their turns: claim again when a bucket refilled.
      if (cycle_status.ok()) wait_ms = ThrottleWaitMs(wait_ms);
      std::unique_lock<std::mutex> lock(mu_);
      poll_cv_.wait_for(lock, milliseconds(wait_ms), [&] { return wake_ || stopping_; });
    }
  }

  int64_t ThrottleWaitMs(int64_t wait_ms) const {
    const auto now = Clock::now();
    for (const auto& [d, limit] : limits_) {
      if (std::optional<int64_t> wake = limit->WakeInMs(now)) wait_ms = std::min(wait_ms, *wake);
    }
    return wait_ms;
  }

  // Takes the rate limits' tokens for the groups' rows: the rows without one leave their task
  // (an emptied task is dropped) and are returned with their turns.
  std::vector<ThrottledRows> Throttle(std::map<Destination*, DeliveryTask>& groups,
                                      Clock::time_point now) {
    std::vector<ThrottledRows> out;
    for (auto it = groups.begin(); it != groups.end();) {
      auto limit = limits_.find(it->first);
      DeliveryTask& task = it->second;
      if (limit == limits_.end()) {
        ++it;
        continue;
      }
      RateLimit::Grant g = limit->second->Take(task.rows.size(), now);
      if (g.throttled_s > 0) observer_->OnThrottled(it->first->name(), g.throttled_s);
      if (g.granted < task.rows.size()) {
        ThrottledRows t;
        t.reason = "Waiting for destinations." + it->first->name() + ".rateLimit (" +
                   std::to_string(static_cast<int64_t>(limit->second->per_second())) +
                   "/s); no attempt spent";
        const auto first = task.rows.begin() + static_cast<std::ptrdiff_t>(g.granted);
        t.rows.assign(std::make_move_iterator(first), std::make_move_iterator(task.rows.end()));
        task.rows.resize(g.granted);
        task.routing_keys.resize(g.granted);
        task.routes.resize(g.granted);
        t.delays_ms = std::move(g.delays_ms);
        out.push_back(std::move(t));
      }
      it = task.rows.empty() ? groups.erase(it) : std::next(it);
    }
    return out;
  }

  // Returns expired leases to pending every claimTimeoutMs / 5; the cycle's status so far.
  Status ReclaimWhenDue() {
    const auto every = milliseconds(std::max<int64_t>(1, options_.outbox.claim_timeout_ms / 5));
    if (Clock::now() - last_reclaim_ < every) return Status::Ok();
    auto n = outbox_->ReclaimExpired();
    if (!n.ok()) return n.status();
    last_reclaim_ = Clock::now();
    if (*n > 0) {
      observer_->OnReclaimed(*n);
      log::Warn("Returned rows with an expired lease to pending", {{"rows", std::to_string(*n)}});
    }
    return Status::Ok();
  }

  // Liveness, idleness and the outage log after a cycle; returns the wait before the next.
  int64_t AfterCycle(const Status& status, int& db_failures, uint64_t cycle, size_t claimed,
                     bool started_idle) {
    if (status.ok()) {
      if (db_failures > 0) log::Info("The database is reachable again; delivery resumes");
      db_failures = 0;
      std::lock_guard<std::mutex> lock(mu_);
      last_cycle_ = Clock::now();
      if (claimed == 0 && started_idle && in_flight_ == 0 && tasks_.empty()) {
        idle_seq_ = cycle;
        idle_cv_.notify_all();
      }
      return options_.outbox.poll_interval_ms;
    }
    ++db_failures;
    const int64_t wait_ms =
        ReconnectDelayMs(db_failures - 1, options_.outbox.poll_interval_ms, 30000);
    int64_t suppressed = 0;
    if (db_limiter_.Allow(&suppressed)) {
      log::Error("The poll cycle failed. The next cycle retries.",
                 {{"reason", SanitizeError(status.message(), kMaxLastErrorChars)},
                  {"retry_in_ms", std::to_string(wait_ms)},
                  {"suppressed", std::to_string(suppressed)}});
    }
    observer_->OnProcessError();
    return wait_ms;
  }

  bool WakePending() {
    std::lock_guard<std::mutex> lock(mu_);
    return wake_ || stopping_;
  }

  // Routes the claimed rows: unroutable ones are written dead at once, the others grouped by
  // destination into tasks for the workers. Their claims are held (renewed) from here.
  void Dispatch(std::vector<OutboxRow> rows) {
    const auto now = Clock::now();
    std::map<Destination*, DeliveryTask> groups;
    std::vector<OutboxRow> unroutable;
    std::vector<std::string> reasons;
    const auto claimed = static_cast<int64_t>(rows.size());
    for (auto& row : rows) {
      auto route = router_.Match(row.topic);
      auto it = route ? destinations_.find(router_.route(*route).destination) : destinations_.end();
      if (it == destinations_.end()) {
        reasons.push_back(route ? "No publisher supports destination '" +
                                      router_.route(*route).destination + "'"
                                : "No route matches topic '" + row.topic + "'");
        unroutable.push_back(std::move(row));
        continue;
      }
      DeliveryTask& task = groups[it->second.get()];
      task.destination = it->second.get();
      task.claimed_at = now;
      task.routing_keys.push_back(route_keys_[*route]
                                      ? std::optional<std::string>(route_keys_[*route]->Render(
                                            TemplateContext::ForRow(row)))
                                      : std::nullopt);
      task.routes.push_back(*route);
      if (options_.transforms && options_.transforms->Applies(*route)) task.transformed = true;
      task.rows.push_back(std::move(row));
    }
    std::vector<ThrottledRows> throttled = Throttle(groups, now);
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_ += claimed;
    }
    ledger_.HoldForWrite(unroutable);
    for (const ThrottledRows& t : throttled) ledger_.HoldForWrite(t.rows);
    for (auto& [d, task] : groups) task.cancel = ledger_.HoldForPublish(task.rows);
    if (!unroutable.empty()) writer_.WriteUnroutable(unroutable, reasons, now);
    for (const ThrottledRows& t : throttled) {
      writer_.WriteThrottled(t.rows, t.delays_ms, t.reason, now);
    }
    if (groups.empty()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [d, task] : groups) {
        observer_->OnQueueDepth(d->name(), static_cast<int64_t>(task.rows.size()));
        task.attempts.resize(task.rows.size());
        tasks_.push_back(std::make_shared<QueuedTask>(QueuedTask{std::move(task)}));
      }
    }
    task_cv_.notify_one();  // the worker that takes a slice wakes the next one
  }

  // ---- workers ----
  void WorkerLoop() {
    const auto concurrency = static_cast<size_t>(options_.outbox.concurrency);
    while (true) {
      std::shared_ptr<QueuedTask> queued;
      size_t begin = 0, end = 0, slots = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        task_cv_.wait(
            lock, [&] { return workers_stop_ || (!tasks_.empty() && publishing_ < concurrency); });
        if (workers_stop_) return;
        // The next slice of the oldest task: as many rows as there are free publish slots, or
        // the rest of the task in one slot for a destination that pipelines a batch.
        queued = tasks_.front();
        const size_t size = queued->task.rows.size();
        begin = queued->next;
        const bool pipelined = queued->task.destination->PipelinesBatch();
        end = pipelined ? size : begin + std::min(size - begin, concurrency - publishing_);
        slots = pipelined ? 1 : end - begin;
        queued->next = end;
        queued->publishing += end - begin;
        publishing_ += slots;
        if (end == size) tasks_.pop_front();
        // One waiting worker per slice that can start (no herd on every change).
        if (!tasks_.empty() && publishing_ < concurrency) task_cv_.notify_one();
      }
      publisher_.Publish(queued->task, begin, end);
      size_t written = 0;  // rows whose outcomes this worker writes: the task's published ones
      {
        std::lock_guard<std::mutex> lock(mu_);
        publishing_ -= slots;
        queued->publishing -= end - begin;
        if (queued->publishing == 0 &&
            (queued->next == queued->task.rows.size() || queued->abandoned)) {
          written = queued->next;
        }
      }
      task_cv_.notify_one();
      if (written == 0) continue;
      DeliveryTask& task = queued->task;
      ledger_.StartWriting(std::span<const OutboxRow>(task.rows).first(written));
      writer_.Write(task, written, publisher_.HasBreaker(*task.destination));
    }
  }

  // An outcome write of `rows` rows is accounted for: they leave the in-flight count.
  void Accounted(int64_t rows) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_ -= rows;
      wake_ = true;
    }
    poll_cv_.notify_all();
    done_cv_.notify_all();
  }

  // ---- lease keeper ----
  void LeaseLoop() {
    const auto every = milliseconds(std::max<int64_t>(1, options_.outbox.claim_timeout_ms / 3));
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_done_) {
      lease_cv_.wait_for(lock, every, [&] { return stop_done_; });
      if (stop_done_) break;
      lock.unlock();
      ClaimLedger::Renewal renewal = ledger_.Renew(*outbox_, options_.outbox.claim_timeout_ms);
      int64_t suppressed = 0;
      if (!renewal.status.ok() && db_limiter_.Allow(&suppressed)) {
        log::Error("Renewing the leases of in-flight messages failed",
                   {{"reason", SanitizeError(renewal.status.message(), kMaxLastErrorChars)},
                    {"suppressed", std::to_string(suppressed)}});
      }
      if (renewal.lost > 0) {
        observer_->OnClaimsLost(renewal.lost);
        log::Warn(
            "Some in-flight claims were lost (another replica owns the rows); their publishes "
            "are cancelled where not yet sent, and their outcomes are not written. Raise "
            "'outbox.claimTimeoutMs' above the slowest publish.",
            {{"lost", std::to_string(renewal.lost)}});
      }
      lock.lock();
    }
  }

  RelayOptions options_;
  OutboxClaims* outbox_;         // claims and outcomes
  ReplicaMembership* replicas_;  // nullptr: no replica set to leave
  Router router_;
  std::vector<std::optional<Template>> route_keys_;
  std::map<std::string, std::unique_ptr<Destination>> destinations_;
  const int64_t claim_ahead_limit_;                            // ClaimAheadLimit
  std::map<Destination*, std::unique_ptr<RateLimit>> limits_;  // destinations with a rateLimit
  NoopObserver noop_;
  RelayObserver* observer_;
  log::RateLimiter db_limiter_{milliseconds(5000)};
  ClaimLedger ledger_;
  PublishStage publisher_;
  OutcomeWriter writer_;
  int worker_count_ = 1;

  mutable std::mutex mu_;
  std::condition_variable poll_cv_, task_cv_, done_cv_, idle_cv_, lease_cv_;
  bool started_ = false, stopping_ = false, workers_stop_ = false, stop_done_ = false;
  bool wake_ = false;
  uint64_t cycle_seq_ = 0, idle_seq_ = 0;
  int64_t in_flight_ = 0;
  int64_t abandoned_ = 0;
  std::deque<std::shared_ptr<QueuedTask>> tasks_;  // tasks with rows not yet handed to a publish
  // Publish slots taken now (one a message, or one a pipelined call), <= concurrency.
  size_t publishing_ = 0;
  Clock::time_point last_cycle_;
  Clock::time_point last_reclaim_{};  // the poller's

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
