// pull_worker.cc: PullWorker (pull_worker.h).
//
// Threads: Run()'s thread claims; `slots` handler threads (min(max_concurrency, batch_size)) run
// the handlers, each on its own connection; one lease thread renews the leases of every claimed,
// unfinished message and, after a stop, cancels what still runs once the grace is over. A new
// claim starts only when every message of the previous one is finished, so at most batch_size
// messages are held.
#include "queuebox/inbox/pull_worker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "core/redaction.h"
#include "inbox_client/pull_sql.h"

namespace queuebox::inbox {

using internal::PullStatement;
using internal::RenderedSql;
using Clock = std::chrono::steady_clock;

int64_t CandidateLimit(int64_t batch_size) {
  return std::min<int64_t>(std::max<int64_t>(3 * batch_size, 50), 500);
}

bool HandlerContext::WaitFor(int64_t ms) const {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_for(lock, token_, std::chrono::milliseconds(std::max<int64_t>(ms, 0)),
              [] { return false; });
  return token_.stop_requested();
}

RetryPolicy DefaultRetryPolicy(int max_attempts, int64_t base_ms, int64_t max_ms, double jitter) {
  return [=](const Message& message, const Status&) {
    if (message.attempt >= max_attempts) return FailureAction::DeadLetter();
    const int exponent = std::clamp(message.attempt, 0, 30);
    const double bounded = std::min(static_cast<double>(base_ms) * std::ldexp(1.0, exponent),
                                    static_cast<double>(max_ms));
    if (jitter <= 0) return FailureAction::RetryAfter(static_cast<int64_t>(bounded));
    thread_local std::mt19937_64 random{std::random_device{}()};
    std::uniform_real_distribution<double> band(-1.0, 1.0);
    return FailureAction::RetryAfter(
        static_cast<int64_t>(std::llround(bounded + band(random) * jitter * bounded)));
  };
}

namespace {

struct Statements {
  RenderedSql claim, renew, complete, retry, dead;
};

Result<Statements> Render(Dialect dialect, const InboxSchema& schema) {
  const auto one = [&](PullStatement s) {
    return internal::RenderPullSql(internal::PullSqlText(dialect, s), dialect, schema);
  };
  QB_ASSIGN_OR_RETURN(RenderedSql claim, one(PullStatement::kClaim));
  QB_ASSIGN_OR_RETURN(RenderedSql renew, one(PullStatement::kRenew));
  QB_ASSIGN_OR_RETURN(RenderedSql complete, one(PullStatement::kComplete));
  QB_ASSIGN_OR_RETURN(RenderedSql retry, one(PullStatement::kRetry));
  QB_ASSIGN_OR_RETURN(RenderedSql dead, one(PullStatement::kDead));
  return Statements{std::move(claim), std::move(renew), std::move(complete), std::move(retry),
                    std::move(dead)};
}

// The Transaction a handler sees: the handler's connection without Begin/Commit/Rollback.
class HandlerTransaction final : public Transaction {
 public:
  explicit HandlerTransaction(Connection& conn) : conn_(conn) {}
  Dialect dialect() const override { return conn_.dialect(); }
  Result<int64_t> Execute(std::string_view sql, std::span<const SqlValue> params) override {
    return conn_.Execute(sql, params);
  }
  Result<SqlRows> Query(std::string_view sql, std::span<const SqlValue> params) override {
    return conn_.Query(sql, params);
  }
  pg_conn* postgres() override { return conn_.postgres(); }
  sqlite3* sqlite() override { return conn_.sqlite(); }

 private:
  Connection& conn_;
};

}  // namespace

class PullWorker::Impl {
 public:
  Impl(std::shared_ptr<ConnectionFactory> connections, PullOptions options, Handler handler,
       Statements statements)
      : connections_(std::move(connections)),
        options_(std::move(options)),
        handler_(std::move(handler)),
        sql_(std::move(statements)),
        slots_(std::min(options_.max_concurrency, options_.batch_size)),
        renew_every_(std::chrono::milliseconds(std::max<int64_t>(1, options_.lease_ms / 3))) {
    if (!options_.retry_policy) options_.retry_policy = DefaultRetryPolicy();
  }

  ~Impl() {
    Stop();
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !running_; });
  }

  Status Run();
  void Stop();
  Stats stats() const;

 private:
  // One claimed message until it is finished.
  struct InFlight {
    Message message;
    std::string token;
    std::stop_source cancel;           // claim lost, or the stop's grace is over
    std::atomic<bool> lost = false;    // a renewal changed no row
    std::mutex mu;                     // guards running_on and finishing
    Connection* running_on = nullptr;  // the handler's connection while the handler runs
    bool finishing = false;            // the handler returned: renewals stop
  };
  using InFlightPtr = std::shared_ptr<InFlight>;

  void Log(LogLevel level, const std::string& text) const {
    if (options_.logger) options_.logger(level, SanitizeError(text));
  }
  // Waits up to `ms` or until Stop(); true when stopping.
  bool WaitUnlessStopped(int64_t ms) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stopping_; });
    return stopping_;
  }

  Result<std::vector<InFlightPtr>> Claim();
  Result<InFlightPtr> ReadRow(const SqlRows& rows, size_t r) const;
  void HandlerLoop();
  void Process(const InFlightPtr& m, std::unique_ptr<Connection>& conn);
  // Process's steps. Begin: false when the message was abandoned (no connection or no BEGIN).
  bool Begin(const std::string& id, std::unique_ptr<Connection>& conn);
  Status RunHandler(const InFlightPtr& m, Connection& conn);
  // True (rolled back and counted) when the claim was lost or the stop cancelled the handler.
  bool RolledBackAfterCancel(const InFlightPtr& m, Connection& conn);
  void Complete(const InFlightPtr& m, Connection& conn);
  void RecordFailure(const InFlightPtr& m, Connection& conn, const Status& outcome);
  void Finish(const InFlightPtr& m);
  void LeaseLoop();
  void RenewAll(std::unique_ptr<Connection>& conn);
  void Cancel(const InFlightPtr& m);

  std::shared_ptr<ConnectionFactory> connections_;
  PullOptions options_;
  Handler handler_;
  Statements sql_;
  const int slots_;
  const Clock::duration renew_every_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  bool running_ = false;
  bool stopping_ = false;
  bool exit_threads_ = false;
  Clock::time_point grace_ends_{};
  bool grace_over_ = false;
  std::deque<InFlightPtr> queue_;  // claimed, not yet started
  std::vector<InFlightPtr> held_;  // claimed, not yet finished (renewed)
  std::unique_ptr<Connection> claim_conn_;

  std::atomic<int64_t> claims_ = 0, claimed_ = 0, completed_ = 0, retried_ = 0, dead_ = 0,
                       lost_ = 0, abandoned_ = 0;
};

Status PullWorker::Impl::Run() {
  {
    std::lock_guard lock(mu_);
    if (started_) return FailedPrecondition("PullWorker::Run was already called");
    started_ = running_ = true;
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < slots_; ++i) threads.emplace_back([this] { HandlerLoop(); });
  threads.emplace_back([this] { LeaseLoop(); });

  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
    auto batch = Claim();
    if (!batch.ok()) {
      Log(LogLevel::kError,
          "The pull claim of source '" + options_.source + "' failed: " + batch.status().message());
      if (WaitUnlessStopped(options_.poll_interval_ms)) break;
      continue;
    }
    if (batch->empty()) {
      if (options_.on_idle) options_.on_idle(options_.poll_interval_ms);
      if (WaitUnlessStopped(options_.poll_interval_ms)) break;
      continue;
    }
    std::unique_lock lock(mu_);
    for (auto& m : *batch) {
      held_.push_back(m);
      queue_.push_back(std::move(m));
    }
    cv_.notify_all();
    // The next claim waits for this batch: never more than batch_size messages held.
    cv_.wait(lock, [&] { return held_.empty(); });
  }

  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return held_.empty(); });
    exit_threads_ = true;
    cv_.notify_all();
  }
  for (auto& t : threads) t.join();
  claim_conn_.reset();
  std::lock_guard lock(mu_);
  running_ = false;
  cv_.notify_all();
  return Status::Ok();
}

void PullWorker::Impl::Stop() {
  std::lock_guard lock(mu_);
  if (stopping_) return;
  stopping_ = true;
  grace_ends_ = Clock::now() + std::chrono::milliseconds(options_.shutdown_grace_ms);
  cv_.notify_all();
}

PullWorker::Stats PullWorker::Impl::stats() const {
  return Stats{claims_.load(), claimed_.load(), completed_.load(), retried_.load(),
               dead_.load(),   lost_.load(),    abandoned_.load()};
}

Result<std::vector<PullWorker::Impl::InFlightPtr>> PullWorker::Impl::Claim() {
  if (claim_conn_ == nullptr || !claim_conn_->healthy()) {
    claim_conn_.reset();
    QB_ASSIGN_OR_RETURN(claim_conn_, connections_->Open());
  }
  QB_ASSIGN_OR_RETURN(auto params,
                      sql_.claim.Bind({{"source", options_.source},
                                       {"batch", int64_t{options_.batch_size}},
                                       {"lease_ms", options_.lease_ms},
                                       {"cand_limit", CandidateLimit(options_.batch_size)}}));
  ++claims_;
  // Its own short transaction, committed before any handler starts. PostgreSQL: the statement
  // alone is that transaction. SQLite: BEGIN IMMEDIATE takes the write lock before the claim
  // reads (no SKIP LOCKED there; one writer at a time).
  const bool sqlite = claim_conn_->dialect() == Dialect::kSQLite;
  if (sqlite) QB_RETURN_IF_ERROR(claim_conn_->Begin(/*write=*/true));
  auto rows = claim_conn_->Query(sql_.claim.sql(), params);
  if (sqlite) {
    Status end = rows.ok() ? claim_conn_->Commit() : claim_conn_->Rollback();
    if (rows.ok() && !end.ok()) {
      (void)claim_conn_->Rollback();
      return end;
    }
  }
  if (!rows.ok()) return rows.status();

  // RETURNING has no order: handle the rows in claim order (scheduled_at, created_at, id).
  std::vector<size_t> order(rows->rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const int at = rows->Column(options_.schema.scheduled_at);
  const int created = rows->Column(options_.schema.created_at);
  const int id = rows->Column(options_.schema.id);
  if (at >= 0 && created >= 0 && id >= 0) {
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const auto& ra = rows->rows[a];
      const auto& rb = rows->rows[b];
      return std::tie(ra[at], ra[created], ra[id]) < std::tie(rb[at], rb[created], rb[id]);
    });
  }
  std::vector<InFlightPtr> batch;
  for (size_t r : order) {
    auto m = ReadRow(*rows, r);
    if (!m.ok()) {
      // A row the worker cannot read stays claimed; its lease expires. The columns are the
      // statement's own, so this is a schema mapping out of step with the table.
      Log(LogLevel::kError, "A claimed pull row was not readable: " + m.status().message());
      continue;
    }
    batch.push_back(std::move(*m));
  }
  claimed_ += static_cast<int64_t>(batch.size());
  return batch;
}

Result<PullWorker::Impl::InFlightPtr> PullWorker::Impl::ReadRow(const SqlRows& rows,
                                                                size_t r) const {
  const auto& row = rows.rows[r];
  const auto column = [&](const std::string& name) -> Result<std::optional<std::string>> {
    const int at = rows.Column(name);
    if (at < 0) return Internal("the claim returned no column " + name);
    return row[static_cast<size_t>(at)];
  };
  const InboxSchema& s = options_.schema;
  auto m = std::make_shared<InFlight>();
  QB_ASSIGN_OR_RETURN(auto id, column(s.id));
  QB_ASSIGN_OR_RETURN(auto token, column(s.claim_token));
  if (!id || !token) return Internal("a claimed row has no id or no claim token");
  m->message.id = *id;
  m->token = *token;
  QB_ASSIGN_OR_RETURN(auto source, column(s.source));
  QB_ASSIGN_OR_RETURN(auto key, column(s.idempotency_key));
  QB_ASSIGN_OR_RETURN(m->message.aggregate_id, column(s.aggregate_id));
  QB_ASSIGN_OR_RETURN(m->message.event_type, column(s.event_type));
  QB_ASSIGN_OR_RETURN(m->message.correlation_id, column(s.correlation_id));
  QB_ASSIGN_OR_RETURN(auto payload, column(s.payload));
  QB_ASSIGN_OR_RETURN(auto headers, column(s.headers));
  QB_ASSIGN_OR_RETURN(auto attempt, column(s.attempt));
  m->message.source = source.value_or("");
  m->message.idempotency_key = key.value_or("");
  m->message.payload = payload.value_or("null");
  try {
    m->message.attempt = attempt ? std::stoi(*attempt) : 0;
  } catch (const std::exception&) {
    return Internal("the attempt column of message " + *id + " is not a number");
  }
  if (headers) {
    const auto parsed = nlohmann::json::parse(*headers, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) {
      for (const auto& [name, value] : parsed.items()) {
        m->message.headers[name] = value.is_string() ? value.get<std::string>() : value.dump();
      }
    }
  }
  return m;
}

void PullWorker::Impl::HandlerLoop() {
  std::unique_ptr<Connection> conn;
  while (true) {
    InFlightPtr m;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return exit_threads_ || !queue_.empty(); });
      if (queue_.empty()) return;  // exit_threads_
      m = std::move(queue_.front());
      queue_.pop_front();
    }
    Process(m, conn);
    Finish(m);
  }
}

void PullWorker::Impl::Finish(const InFlightPtr& m) {
  std::lock_guard lock(mu_);
  held_.erase(std::remove(held_.begin(), held_.end(), m), held_.end());
  cv_.notify_all();
}

// One message, step by step: skip it if cancelled before it started, begin its transaction,
// run the handler, roll back if the claim was lost or the stop cancelled it, else record the
// outcome (complete, or retry/dead-letter through the policy).
void PullWorker::Impl::Process(const InFlightPtr& m, std::unique_ptr<Connection>& conn) {
  if (m->cancel.stop_requested()) {
    // Lost before it started, or the stop's grace ran out while it waited: not started, not
    // completed, no attempt spent; the lease expires.
    if (m->lost) {
      ++lost_;
    } else {
      ++abandoned_;
    }
    return;
  }
  if (!Begin(m->message.id, conn)) return;
  const Status outcome = RunHandler(m, *conn);
  if (RolledBackAfterCancel(m, *conn)) return;
  if (outcome.ok()) {
    Complete(m, *conn);
  } else {
    RecordFailure(m, *conn, outcome);
  }
}

bool PullWorker::Impl::Begin(const std::string& id, std::unique_ptr<Connection>& conn) {
  if (conn == nullptr || !conn->healthy()) {
    conn.reset();
    auto opened = connections_->Open();
    if (!opened.ok()) {
      Log(LogLevel::kError,
          "Message " + id + " was abandoned; its lease will expire: " + opened.status().message());
      ++abandoned_;
      return false;
    }
    conn = std::move(*opened);
  }
  if (Status begun = conn->Begin(false); !begun.ok()) {
    Log(LogLevel::kError,
        "Message " + id + " was abandoned; its lease will expire: " + begun.message());
    ++abandoned_;
    return false;
  }
  return true;
}

Status PullWorker::Impl::RunHandler(const InFlightPtr& m, Connection& conn) {
  {
    std::lock_guard lock(m->mu);
    m->running_on = &conn;
  }
  Status outcome;
  {
    HandlerTransaction tx(conn);
    const HandlerContext context(m->cancel.get_token());
    try {
      outcome = handler_(m->message, tx, context);
    } catch (const std::exception& e) {
      outcome = Internal(std::string("the handler threw: ") + e.what());
    } catch (...) {
      outcome = Internal("the handler threw");
    }
  }
  {
    std::lock_guard lock(m->mu);
    m->running_on = nullptr;
    m->finishing = true;  // no renewal from here on: the fenced writes below decide
  }
  return outcome;
}

bool PullWorker::Impl::RolledBackAfterCancel(const InFlightPtr& m, Connection& conn) {
  const std::string& id = m->message.id;
  if (m->lost) {
    (void)conn.Rollback();
    ++lost_;
    Log(LogLevel::kWarn, "The claim on message " + id + " was lost, so its work was rolled back.");
    return true;
  }
  if (m->cancel.stop_requested()) {
    (void)conn.Rollback();
    ++abandoned_;
    Log(LogLevel::kInfo,
        "The stop cancelled message " + id + "; nothing was completed and no attempt was spent.");
    return true;
  }
  return false;
}

void PullWorker::Impl::Complete(const InFlightPtr& m, Connection& conn) {
  const std::string& id = m->message.id;
  const auto params = sql_.complete.Bind({{"id", id}, {"token", m->token}});
  auto changed =
      params.ok() ? conn.Execute(sql_.complete.sql(), *params) : Result<int64_t>(params.status());
  if (!changed.ok()) {
    (void)conn.Rollback();
    Log(LogLevel::kError,
        "The completion of message " + id +
            " failed, so its work was rolled back: " + changed.status().message());
    return;
  }
  if (*changed != 1) {
    (void)conn.Rollback();
    ++lost_;
    Log(LogLevel::kWarn, "The completion of message " + id +
                             " changed no row (the claim was lost), so its work was rolled back.");
    return;
  }
  if (Status committed = conn.Commit(); !committed.ok()) {
    (void)conn.Rollback();
    Log(LogLevel::kError, "The commit of message " + id + " failed: " + committed.message());
    return;
  }
  ++completed_;
}

// The handler failed: its writes go, then the policy decides.
void PullWorker::Impl::RecordFailure(const InFlightPtr& m, Connection& conn,
                                     const Status& outcome) {
  const std::string& id = m->message.id;
  (void)conn.Rollback();
  const FailureAction action = options_.retry_policy(m->message, outcome);
  const std::string error =
      SanitizeError(outcome.message().empty() ? "the handler failed" : outcome.message());
  const RenderedSql& statement = action.retry ? sql_.retry : sql_.dead;
  const auto params =
      action.retry
          ? statement.Bind(
                {{"id", id}, {"token", m->token}, {"delay_ms", action.delay_ms}, {"error", error}})
          : statement.Bind({{"id", id}, {"token", m->token}, {"error", error}});
  auto changed =
      params.ok() ? conn.Execute(statement.sql(), *params) : Result<int64_t>(params.status());
  if (!changed.ok()) {
    Log(LogLevel::kError,
        "The failure of message " + id + " was not recorded: " + changed.status().message());
  } else if (*changed != 1) {
    ++lost_;
    Log(LogLevel::kWarn,
        "The failure of message " + id + " changed nothing, because the claim was lost.");
  } else if (action.retry) {
    ++retried_;
    Log(LogLevel::kWarn,
        "Message " + id + " retries in " + std::to_string(action.delay_ms) + " ms: " + error);
  } else {
    ++dead_;
    Log(LogLevel::kError, "Message " + id + " reached the dead letter: " + error);
  }
}

void PullWorker::Impl::Cancel(const InFlightPtr& m) {
  m->cancel.request_stop();
  std::lock_guard lock(m->mu);
  if (m->running_on != nullptr) m->running_on->Interrupt();
}

void PullWorker::Impl::LeaseLoop() {
  std::unique_ptr<Connection> conn;
  Clock::time_point next = Clock::now() + renew_every_;
  while (true) {
    std::vector<InFlightPtr> cancel;
    bool renew = false;
    {
      std::unique_lock lock(mu_);
      const auto wake = [&] {
        return exit_threads_ || Clock::now() >= next ||
               (stopping_ && !grace_over_ && Clock::now() >= grace_ends_);
      };
      while (!wake()) {
        auto until = next;
        if (stopping_ && !grace_over_) until = std::min(until, grace_ends_);
        cv_.wait_until(lock, until);
      }
      if (exit_threads_) return;
      if (stopping_ && !grace_over_ && Clock::now() >= grace_ends_) {
        grace_over_ = true;
        cancel = held_;
      }
      renew = Clock::now() >= next;
    }
    for (const auto& m : cancel) Cancel(m);
    if (renew) {
      RenewAll(conn);
      next = Clock::now() + renew_every_;
    }
  }
}

void PullWorker::Impl::RenewAll(std::unique_ptr<Connection>& conn) {
  std::vector<InFlightPtr> held;
  {
    std::lock_guard lock(mu_);
    held = held_;
  }
  for (const auto& m : held) {
    {
      std::lock_guard lock(m->mu);
      if (m->finishing || m->lost) continue;
    }
    if (conn == nullptr || !conn->healthy()) {
      conn.reset();
      auto opened = connections_->Open();
      if (!opened.ok()) {
        Log(LogLevel::kWarn, "The lease renewal could not connect: " + opened.status().message());
        return;  // the leases run on; the next round tries again
      }
      conn = std::move(*opened);
    }
    const auto params = sql_.renew.Bind(
        {{"id", m->message.id}, {"token", m->token}, {"lease_ms", options_.lease_ms}});
    auto changed =
        params.ok() ? conn->Execute(sql_.renew.sql(), *params) : Result<int64_t>(params.status());
    if (!changed.ok()) {
      // Not a lost claim: the next renewal tries again, and the lease expires if none works.
      Log(LogLevel::kWarn, "The lease renewal of message " + m->message.id +
                               " failed: " + changed.status().message());
      continue;
    }
    if (*changed == 0) {
      {
        std::lock_guard lock(m->mu);
        if (m->finishing) continue;  // its completion or failure write got there first
      }
      m->lost = true;
      Log(LogLevel::kWarn, "The claim on message " + m->message.id +
                               " was lost to another worker; its handler is cancelled.");
      Cancel(m);
    }
  }
}

// ---- PullWorker ----

Result<std::unique_ptr<PullWorker>> PullWorker::Create(
    std::shared_ptr<ConnectionFactory> connections, PullOptions options, Handler handler) {
  if (connections == nullptr) return InvalidArgument("PullWorker needs a ConnectionFactory");
  if (!handler) return InvalidArgument("PullWorker needs a handler");
  if (options.source.empty()) return InvalidArgument("PullOptions.source is required");
  if (options.batch_size <= 0) return InvalidArgument("PullOptions.batch_size must be > 0");
  if (options.lease_ms < 3) {
    return InvalidArgument("PullOptions.lease_ms must be >= 3 (it is renewed every third)");
  }
  if (options.max_concurrency <= 0) {
    return InvalidArgument("PullOptions.max_concurrency must be > 0");
  }
  if (options.poll_interval_ms <= 0) {
    return InvalidArgument("PullOptions.poll_interval_ms must be > 0");
  }
  if (options.shutdown_grace_ms < 0) {
    return InvalidArgument("PullOptions.shutdown_grace_ms must be >= 0");
  }
  QB_ASSIGN_OR_RETURN(Statements statements, Render(connections->dialect(), options.schema));
  return std::unique_ptr<PullWorker>(new PullWorker(std::make_unique<Impl>(
      std::move(connections), std::move(options), std::move(handler), std::move(statements))));
}

PullWorker::PullWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PullWorker::~PullWorker() = default;
Status PullWorker::Run() { return impl_->Run(); }
void PullWorker::Stop() { impl_->Stop(); }
PullWorker::Stats PullWorker::stats() const { return impl_->stats(); }

}  // namespace queuebox::inbox
