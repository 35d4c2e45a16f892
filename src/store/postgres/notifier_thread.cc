#include "store/postgres/notifier_thread.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <utility>

namespace queuebox::store {
namespace {

void NotifierIgnoreNotice(void* /*arg*/, const char* /*message*/) {}

}  // namespace

int64_t MillisUntil(std::chrono::steady_clock::time_point t,
                    std::chrono::steady_clock::time_point now) {
  return std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(t - now).count());
}

void IgnoreNotices(PGconn* conn) { PQsetNoticeProcessor(conn, NotifierIgnoreNotice, nullptr); }

NotifierThread::NotifierThread(std::string name, std::string owner)
    : name_(std::move(name)), owner_(std::move(owner)) {}

NotifierThread::~NotifierThread() {
  Stop();
  if (stop_fd_ >= 0) close(stop_fd_);
}

Status NotifierThread::Start(std::function<void()> body) {
  if (thread_.joinable() || stopping_.load())
    return FailedPrecondition(name_ + " is already started");
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return Internal("cannot create " + owner_ + "'s stop event (eventfd)");
  thread_ = std::thread(std::move(body));
  return Status::Ok();
}

bool NotifierThread::Stop() {
  if (!thread_.joinable()) return false;
  stopping_ = true;
  uint64_t one = 1;
  while (write(stop_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
  thread_.join();
  return true;
}

int NotifierThread::WaitFor(int fd_a, int fd_b, int64_t ms) const {
  using Clock = std::chrono::steady_clock;
  pollfd fds[3] = {{stop_fd_, POLLIN, 0}, {fd_a, POLLIN, 0}, {fd_b, POLLIN, 0}};
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  while (true) {
    if (stopping_.load()) return -1;
    const int64_t left = MillisUntil(deadline, Clock::now());
    const int timeout = ms < 0 ? -1 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
    const int r = poll(fds, 3, timeout);  // negative fds are ignored by poll
    if (r < 0 && errno == EINTR) continue;
    if (stopping_.load() || (r > 0 && fds[0].revents != 0)) return -1;
    if (r <= 0) return 0;
    return (fds[1].revents != 0 ? 1 : 0) | (fds[2].revents != 0 ? 2 : 0);
  }
}

}  // namespace queuebox::store
