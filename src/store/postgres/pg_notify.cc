#include "store/postgres/pg_notify.h"

#include <algorithm>
#include <utility>

#include "core/backoff.h"
#include "core/log.h"
#include "core/redaction.h"

namespace queuebox::store {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Frees every queued notification; true when there was at least one.
bool DrainNotifications(PGconn* pg) {
  bool any = false;
  while (PGnotify* n = PQnotifies(pg)) {
    any = true;
    PQfreemem(n);
  }
  return any;
}

}  // namespace

Result<std::unique_ptr<PgNotifyListener>> PgNotifyListener::Create(const DatabaseConfig& db,
                                                                   std::function<void()> on_wake,
                                                                   PgNotifyOptions options) {
  QB_ASSIGN_OR_RETURN(PgSettings settings, PgSettingsFor(db));
  settings.pool_size = 1;
  settings.application_name = kListenerApplicationName;
  return std::unique_ptr<PgNotifyListener>(
      new PgNotifyListener(std::move(settings), db.outbox_table, std::move(on_wake), options));
}

PgNotifyListener::PgNotifyListener(PgSettings settings, std::string table,
                                   std::function<void()> on_wake, PgNotifyOptions options)
    : settings_(std::move(settings)),
      table_(std::move(table)),
      on_wake_(std::move(on_wake)),
      options_(options) {}

void PgNotifyListener::EnsureTriggerEnabled(PgConnection& conn) {
  const std::string enable = "ALTER TABLE " + Quote(table_) + " ENABLE TRIGGER " + kNotifyTrigger;
  auto rows = conn.Query(
      "SELECT tgenabled::text FROM pg_trigger WHERE tgname = $1 AND tgrelid = to_regclass($2)",
      {std::string(kNotifyTrigger), Quote(table_)});
  Status status = rows.status();
  if (rows.ok() && rows->empty()) {
    status = FailedPrecondition("the trigger " + std::string(kNotifyTrigger) + " on " + table_ +
                                " is missing (migration V13); inserts wake no one");
  } else if (rows.ok() && (*rows)[0][0].value_or("") == "D") {
    status = conn.Exec(enable);
    if (status.ok()) {
      log::Info("Enabled the NOTIFY trigger of the LISTEN/NOTIFY wake-up",
                {{"trigger", kNotifyTrigger}, {"table", table_}});
    }
  }
  if (status.ok() || trigger_warned_) return;
  trigger_warned_ = true;
  log::Warn(
      "The LISTEN/NOTIFY wake-up cannot use its trigger; delivery relies on polling. Apply "
      "migration V13 and run the statement as the table's owner.",
      {{"reason", SanitizeError(status.message())}, {"statement", enable}});
}

PgNotifyListener::~PgNotifyListener() { Stop(); }

Status PgNotifyListener::Start() {
  return thread_.Start([this] { Loop(); });
}

void PgNotifyListener::Stop() {
  if (thread_.Stop()) listening_ = false;
}

int PgNotifyListener::WaitFor(int fd, int64_t ms) {
  const int r = thread_.WaitFor(fd, -1, ms);
  return r > 0 ? 1 : r;  // readable, hung up or in error: PQconsumeInput tells which
}

void PgNotifyListener::FireWake() {
  wakes_.fetch_add(1);
  on_wake_();
}

void PgNotifyListener::Loop() {
  log::RateLimiter limiter(milliseconds(30000));
  int failures = 0;
  while (!thread_.stopping()) {
    Status status = Status::Ok();
    auto conn = PgConnection::Connect(settings_);
    if (conn.ok()) {
      IgnoreNotices((*conn)->native());
      status = (*conn)->Exec(std::string("LISTEN ") + kNotifyChannel);
      if (status.ok()) EnsureTriggerEnabled(**conn);
    } else {
      status = conn.status();
    }
    if (status.ok()) {
      const bool again = connections_.fetch_add(1) > 0 || failures > 0;
      failures = 0;
      log::Info(again ? "The LISTEN/NOTIFY wake-up is listening again"
                      : "The LISTEN/NOTIFY wake-up is listening",
                {{"channel", kNotifyChannel}});
      // Rows may have been inserted while no one listened: one wake covers them.
      FireWake();
      listening_ = true;
      Serve(**conn);
      listening_ = false;
      if (thread_.stopping()) break;
      status = Unavailable("the listener's connection to PostgreSQL was lost");
    }
    int64_t delay =
        ReconnectDelayMs(failures++, options_.reconnect_initial_ms, options_.reconnect_cap_ms);
    int64_t suppressed = 0;
    if (limiter.Allow(&suppressed)) {
      log::Warn(
          "The LISTEN/NOTIFY wake-up has no connection; polling continues and the listener "
          "reconnects",
          {{"reason", SanitizeError(status.message())},
           {"retry_in_ms", std::to_string(delay)},
           {"suppressed", std::to_string(suppressed)}});
    }
    if (WaitFor(-1, delay) < 0) break;
  }
}

void PgNotifyListener::Serve(PgConnection& conn) {
  PGconn* pg = conn.native();
  const int fd = PQsocket(pg);
  if (fd < 0) return;
  const auto debounce = options_.debounce;
  Clock::time_point last_wake = Clock::now() - debounce;  // the LISTEN's own wake just happened
  Clock::time_point last_traffic = Clock::now();
  bool pending = false;  // a notification arrived inside the debounce window
  auto on_notified = [&](Clock::time_point now) {
    if (!pending && now - last_wake >= debounce) {
      FireWake();
      last_wake = now;
    } else {
      pending = true;
    }
  };
  while (true) {
    Clock::time_point now = Clock::now();
    int64_t timeout = pending ? MillisUntil(last_wake + debounce, now)
                              : MillisUntil(last_traffic + options_.keepalive, now);
    int r = WaitFor(fd, timeout);
    if (r < 0) return;
    now = Clock::now();
    if (r == 1) {
      if (PQconsumeInput(pg) == 0) return;
      last_traffic = now;
      bool notified = DrainNotifications(pg);
      if (PQstatus(pg) != CONNECTION_OK) return;
      if (notified) on_notified(now);
    } else if (!pending && now - last_traffic >= options_.keepalive) {
      // A quiet connection: one round trip proves it is alive (a dead peer fails it).
      if (!conn.Exec("SELECT 1").ok()) return;
      last_traffic = now;
      if (DrainNotifications(pg)) on_notified(now);
    }
    if (pending && Clock::now() - last_wake >= debounce) {
      pending = false;
      last_wake = Clock::now();
      FireWake();
    }
  }
}

}  // namespace queuebox::store
