#include "admin/elastic_pool.h"

#include <algorithm>

namespace queuebox {

ElasticPool::ElasticPool(size_t min_threads, size_t max_threads,
                         std::chrono::milliseconds idle_timeout)
    : min_threads_(min_threads),
      max_threads_(std::max<size_t>(1, std::max(min_threads, max_threads))),
      idle_timeout_(idle_timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < min_threads_; ++i) Spawn();
}

ElasticPool::~ElasticPool() { shutdown(); }

void ElasticPool::Spawn() {
  threads_.emplace_back();
  auto self = std::prev(threads_.end());
  *self = std::thread([this, self] { Work(self); });
  peak_ = std::max(peak_, threads_.size());
}

void ElasticPool::enqueue(std::function<void()> fn) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return;
  tasks_.push_back(std::move(fn));
  ReapLocked(lock);
  // A thread for this task now: an idle one takes it, else a new one (up to the cap).
  if (idle_ < tasks_.size() && threads_.size() < max_threads_) Spawn();
  cv_.notify_one();
}

void ElasticPool::ReapLocked(std::unique_lock<std::mutex>& lock) {
  if (finished_.empty()) return;
  std::list<std::thread> done;
  done.splice(done.end(), finished_);
  lock.unlock();
  for (std::thread& t : done) t.join();
  lock.lock();
}

void ElasticPool::Work(std::list<std::thread>::iterator self) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    const bool woke =
        cv_.wait_for(lock, idle_timeout_, [this] { return stopping_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) {
      // Stopping, or idle for idle_timeout above the floor: leave, to be joined.
      if (stopping_ || (!woke && threads_.size() > min_threads_)) break;
      continue;
    }
    std::function<void()> fn = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
  finished_.splice(finished_.end(), threads_, self);
}

void ElasticPool::shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_ && threads_.empty() && finished_.empty()) return;
  stopping_ = true;
  cv_.notify_all();
  // Workers drain the queue, then leave; wait for every one.
  while (!threads_.empty() || !finished_.empty()) {
    if (finished_.empty()) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lock.lock();
      continue;
    }
    ReapLocked(lock);
  }
}

size_t ElasticPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

size_t ElasticPool::peak_threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

}  // namespace queuebox
