#include "admin/activity_recorder.h"

#include <openssl/rand.h>

#include <array>

namespace queuebox {
namespace {

std::string RandomId() {
  std::array<unsigned char, 16> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    // No entropy: the time still tells processes apart in practice.
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(now >> (i % 8));
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace

ActivityRecorder::ActivityRecorder(ActivityWindow& window, ConsoleQueries& console,
                                   std::chrono::milliseconds every)
    : window_(window), console_(console), every_(every), replica_id_(RandomId()) {}

ActivityRecorder::~ActivityRecorder() { Stop(); }

void ActivityRecorder::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void ActivityRecorder::Stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    t = std::move(thread_);
  }
  cv_.notify_all();
  if (!t.joinable()) return;
  t.join();
  (void)RecordNow();
}

Status ActivityRecorder::RecordNow() {
  const ActivityWindow::Minute taken = window_.TakeUnrecorded();
  if (taken.sent == 0 && taken.dead == 0) return Status::Ok();
  Status s = console_.RecordActivity(replica_id_, taken.sent, taken.dead);
  if (s.ok()) return s;
  window_.PutBack(taken);
  log::WriteLimited(errors_, log::Level::kWarn,
                    "The console's per-minute counts could not be recorded. The next try "
                    "records them with the later ones.",
                    {{"reason", s.ToString()}});
  return s;
}

void ActivityRecorder::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, every_, [this] { return stop_; });
    if (stop_) break;
    lock.unlock();
    (void)RecordNow();
    lock.lock();
  }
}

}  // namespace queuebox
