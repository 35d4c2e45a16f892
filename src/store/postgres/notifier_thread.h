// notifier_thread.h: the background thread of a PostgreSQL notifier (the LISTEN/NOTIFY listener,
// pg_notify.h; change capture, capture/pg_capture.h) and the stop event that interrupts its waits.
//
// Start creates the stop event (an eventfd) and runs the body on a new thread; Stop sets the stop
// flag, signals the event and joins. A stopped notifier cannot be started again. The body waits
// with WaitFor, which returns as soon as Stop is called, so Stop returns within one blocking call
// of the body (a connect, bounded by its timeout).
//
// Thread-safety: Start/Stop from one controlling thread; stopping() and WaitFor from the body.
#pragma once

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "queuebox/status.h"

namespace queuebox::store {

// Milliseconds from `now` until `t`, rounded up; 0 once `t` has passed (a WaitFor timeout).
int64_t MillisUntil(std::chrono::steady_clock::time_point t,
                    std::chrono::steady_clock::time_point now);

// Drops the notices libpq would print on stderr for a notifier's connection: a terminated backend
// sends its FATAL message outside any query, and the notifier reports the loss itself.
void IgnoreNotices(PGconn* conn);

class NotifierThread {
 public:
  // `name` names the notifier in Start's errors: "<name> is already started", "cannot create
  // <owner>'s stop event (eventfd)" with `owner`.
  NotifierThread(std::string name, std::string owner);
  ~NotifierThread();  // Stop(), then closes the event
  NotifierThread(const NotifierThread&) = delete;
  NotifierThread& operator=(const NotifierThread&) = delete;

  // kFailedPrecondition when already started (or stopped), kInternal when the stop event cannot be
  // created.
  Status Start(std::function<void()> body);
  // Stops and joins the thread. False when no thread was running (idempotent).
  bool Stop();
  bool stopping() const { return stopping_.load(); }

  // Waits on the stop event up to `ms` (-1: forever) and on fd_a and fd_b when >= 0. Returns -1
  // when stopping, 0 on timeout (or a poll error: the caller re-checks its connections), else a
  // bit mask of the readable fds (1: fd_a, 2: fd_b; readable, hung up or in error).
  int WaitFor(int fd_a, int fd_b, int64_t ms) const;

 private:
  std::string name_, owner_;
  int stop_fd_ = -1;  // eventfd
  std::thread thread_;
  std::atomic<bool> stopping_{false};
};

}  // namespace queuebox::store
