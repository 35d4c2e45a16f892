// pg_notify.h: the optional LISTEN/NOTIFY wake-up of the relay on PostgreSQL
// (outbox.notify.enabled). Migration V13 adds a statement-level AFTER INSERT
// trigger on outbox that calls pg_notify('queuebox_outbox', ''); this listener holds its own
// libpq connection (application_name "queuebox-listener"), runs LISTEN queuebox_outbox, and calls
// `on_wake` (Relay::Wake) when a notification arrives.
//
// The trigger costs producers throughput (a NOTIFY at commit serialises committing transactions
// on a cluster-wide lock; docs/operations.md has the measured cost), so V13 creates it DISABLED
// and the listener enables it (ALTER TABLE ... ENABLE TRIGGER, once, when it finds it disabled):
// installations that never turn outbox.notify.enabled on never pay for it. When the trigger is
// missing (a schema applied by hand) or cannot be enabled (the role does not own the table), the
// listener logs a warning with the statement to run and keeps listening.
//
// Polling stays the source of truth: a lost notification, a lost connection or a listener that
// never connects cost latency (up to outbox.pollIntervalMs), never a message. Hence nothing here
// fails the relay: connection errors are logged (rate-limited) and retried with capped, jittered
// backoff (core/backoff.h ReconnectDelayMs), and after every successful LISTEN the listener calls
// `on_wake` once, because rows may have been inserted while it was deaf.
//
// Debounce: the first notification after a quiet period wakes at once; further notifications
// within `debounce` of the last wake are folded into one trailing wake at last wake + debounce.
// A burst of N commits therefore costs at most about burst_duration / debounce + 1 wake-ups.
// An idle connection is checked with a round trip every `keepalive` so a silently dead TCP
// connection is noticed and replaced.
//
// Thread-safety: Start/Stop from one controlling thread; the counters may be read from any thread.
// `on_wake` runs on the listener's thread and must be cheap and not throw.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "queuebox/config.h"
#include "queuebox/status.h"
#include "store/open_store.h"
#include "store/postgres/notifier_thread.h"
#include "store/postgres/pg_connection.h"

namespace queuebox::store {

inline constexpr const char* kNotifyChannel = "queuebox_outbox";
inline constexpr const char* kListenerApplicationName = "queuebox-listener";
inline constexpr const char* kNotifyTrigger = "queuebox_outbox_notify";  // migration V13

struct PgNotifyOptions {
  std::chrono::milliseconds debounce{5};  // at most one wake per this interval
  int64_t reconnect_initial_ms = 100;     // ReconnectDelayMs(failures, initial, cap)
  int64_t reconnect_cap_ms = 30000;
  std::chrono::milliseconds keepalive{30000};  // round trip on a connection quiet this long
};

class PgNotifyListener final : public InsertListener {
 public:
  // The connection settings come from `db` exactly as the store builds them (ToLibpqUrl,
  // username/password overrides, connectionTimeoutMs); the trigger is looked up on
  // db.outbox_table. kInvalidArgument for a bad URL; no connection is made here.
  static Result<std::unique_ptr<PgNotifyListener>> Create(const DatabaseConfig& db,
                                                          std::function<void()> on_wake,
                                                          PgNotifyOptions options = {});
  ~PgNotifyListener() override;  // Stop()
  PgNotifyListener(const PgNotifyListener&) = delete;
  PgNotifyListener& operator=(const PgNotifyListener&) = delete;

  // Starts the listener thread, which connects in the background. kFailedPrecondition when
  // already started, kInternal when the stop event cannot be created.
  Status Start() override;
  // Stops the thread and closes the connection. Returns within one connect attempt at most
  // (connect is the only blocking call, bounded by database.connectionTimeoutMs); idempotent.
  void Stop() override;

  // True while LISTEN is in effect on a live connection.
  bool listening() const { return listening_.load(); }
  // Successful LISTENs so far (1 after the first connect; +1 per reconnect).
  int64_t connections() const { return connections_.load(); }
  // Calls of on_wake so far (notifications after debounce, plus one per LISTEN).
  int64_t wakes() const { return wakes_.load(); }

 private:
  PgNotifyListener(PgSettings settings, std::string table, std::function<void()> on_wake,
                   PgNotifyOptions options);
  // Enables the V13 trigger when it is disabled; logs (once) when it is missing or cannot be.
  void EnsureTriggerEnabled(PgConnection& conn);
  void Loop();
  // Listens on one connection until it is lost (returns) or Stop (returns).
  void Serve(PgConnection& conn);
  // Waits on the stop event up to `ms` (-1: forever) and on `fd` when >= 0.
  // Returns: 0 timeout, 1 fd readable, -1 stop requested.
  int WaitFor(int fd, int64_t ms);
  void FireWake();

  PgSettings settings_;
  std::string table_;
  bool trigger_warned_ = false;
  std::function<void()> on_wake_;
  PgNotifyOptions options_;
  NotifierThread thread_{"the LISTEN/NOTIFY listener", "the listener"};
  std::atomic<bool> listening_{false};
  std::atomic<int64_t> connections_{0};
  std::atomic<int64_t> wakes_{0};
};

}  // namespace queuebox::store
