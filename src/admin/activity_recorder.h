// activity_recorder.h: this process's sent and dead counts into the database, for the console's
// cluster-wide per-minute figures (docs/console.md "Overview"). Every `every` (5 s by default)
// a background thread takes the counts the ActivityWindow gathered since the last time and adds
// them to this process's row of the current minute (database clock) through
// ConsoleQueries::RecordActivity (queuebox_console_activity, V24). Nothing runs on the delivery
// path beyond the window's counting, which was there before; nothing is written while nothing
// was sent or made dead. Counts whose write fails are put back and tried with the next ones
// (the failure is logged at most every 30 s); Stop records what is left once.
//
// Each process is its own replica here, with a random id (32 hex digits) made at construction;
// its minutes keep counting for the overview after it stopped, until they are an hour old.
//
// Thread-safety: Start and Stop from one thread; RecordNow from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "admin/activity.h"
#include "core/log.h"
#include "queuebox/console.h"

namespace queuebox {

class ActivityRecorder {
 public:
  static constexpr std::chrono::milliseconds kEvery{5000};

  // `window` and `console` must outlive this object.
  ActivityRecorder(ActivityWindow& window, ConsoleQueries& console,
                   std::chrono::milliseconds every = kEvery);
  ~ActivityRecorder();
  ActivityRecorder(const ActivityRecorder&) = delete;
  ActivityRecorder& operator=(const ActivityRecorder&) = delete;

  void Start();
  // Stops and joins the thread, then records what is left. Idempotent.
  void Stop();
  // Records the counts taken now (nothing when both are 0); on failure they are put back.
  Status RecordNow();
  const std::string& replica_id() const { return replica_id_; }

 private:
  void Loop();

  ActivityWindow& window_;
  ConsoleQueries& console_;
  const std::chrono::milliseconds every_;
  const std::string replica_id_;
  log::RateLimiter errors_{std::chrono::seconds(30)};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace queuebox
