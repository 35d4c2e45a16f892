// activity.h: sent and dead messages per minute over the last minutes, in this process, and the
// counts not yet recorded in the database for the cluster-wide figures (ActivityRecorder, the
// console's overview). Fed by Metrics::OnMessages; minutes here are wall-clock minutes (UTC).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

namespace queuebox {

class ActivityWindow {
 public:
  static constexpr int kMinutes = 15;
  struct Minute {
    int64_t unix_minute = 0;  // minutes since the epoch
    int64_t sent = 0, dead = 0;
  };

  // Counts n messages of `status` ("sent", "dead"; others are ignored) in `unix_minute`.
  void Add(std::string_view status, int64_t n, int64_t unix_minute = NowMinute()) {
    if (status != "sent" && status != "dead") return;
    std::lock_guard<std::mutex> lock(mu_);
    Minute& m = slots_[static_cast<size_t>(unix_minute % kMinutes)];
    if (m.unix_minute != unix_minute) m = Minute{unix_minute, 0, 0};
    (status == "sent" ? m.sent : m.dead) += n;
    (status == "sent" ? unrecorded_.sent : unrecorded_.dead) += n;
  }
  // The messages counted since the last TakeUnrecorded (plus those put back), then zero.
  // `unix_minute` of the answer is 0.
  Minute TakeUnrecorded() {
    std::lock_guard<std::mutex> lock(mu_);
    Minute out = unrecorded_;
    unrecorded_ = Minute{};
    return out;
  }
  // Counts taken that could not be recorded, for the next TakeUnrecorded.
  void PutBack(const Minute& taken) {
    std::lock_guard<std::mutex> lock(mu_);
    unrecorded_.sent += taken.sent;
    unrecorded_.dead += taken.dead;
  }
  // The last kMinutes minutes ending with `now_minute`, oldest first (zeros where none).
  std::vector<Minute> Last(int64_t now_minute = NowMinute()) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Minute> out;
    for (int64_t minute = now_minute - kMinutes + 1; minute <= now_minute; ++minute) {
      const Minute& m = slots_[static_cast<size_t>(minute % kMinutes)];
      out.push_back(m.unix_minute == minute ? m : Minute{minute, 0, 0});
    }
    return out;
  }
  static int64_t NowMinute() {
    return std::chrono::duration_cast<std::chrono::minutes>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

 private:
  mutable std::mutex mu_;
  std::array<Minute, kMinutes> slots_{};
  Minute unrecorded_{};
};

}  // namespace queuebox
