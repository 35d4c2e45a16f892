// elastic_pool.h: the HTTP servers' task queue. cpp-httplib runs each accepted connection as one
// task for as long as the connection stays open (keep-alive included), so a fixed pool lets idle
// connections starve new ones: with 64 threads, 2,000 idle connections delayed a new request by
// 31 s (bench/README.md, "Webhook intake and the data-port server"). This pool gives every task a
// thread at once, an idle one or a new one, up to `max_threads`; only beyond that does a task
// wait. Threads above `min_threads` exit after `idle_timeout` without work.
//
// Thread-safety: enqueue and shutdown may be called from any thread; shutdown runs the tasks
// already queued, then joins every thread. Not copyable.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>

namespace queuebox {

class ElasticPool final : public httplib::TaskQueue {
 public:
  ElasticPool(size_t min_threads, size_t max_threads, std::chrono::milliseconds idle_timeout);
  ~ElasticPool() override;
  ElasticPool(const ElasticPool&) = delete;
  ElasticPool& operator=(const ElasticPool&) = delete;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

  // Threads alive now and the most there were (for tests and the benchmark).
  size_t threads() const;
  size_t peak_threads() const;

 private:
  void Spawn();  // mu_ held
  void Work(std::list<std::thread>::iterator self);
  void ReapLocked(std::unique_lock<std::mutex>& lock);

  const size_t min_threads_, max_threads_;
  const std::chrono::milliseconds idle_timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::list<std::thread> threads_;   // running workers
  std::list<std::thread> finished_;  // workers that returned, to join
  size_t idle_ = 0, peak_ = 0;
  bool stopping_ = false;
};

}  // namespace queuebox
