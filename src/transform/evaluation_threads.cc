// evaluation_threads.cc: see evaluation_threads.h.
#include "queuebox/transform/evaluation_threads.h"

#include <algorithm>

namespace queuebox::transform {

// One Run call: indexes are handed out in order; the caller waits until `done` reaches `n`.
struct EvaluationThreads::Job {
  std::size_t n = 0;
  const std::function<void(std::size_t)>* work = nullptr;
  std::size_t next = 0;  // the next index to hand out (guarded by mu_)
  std::size_t done = 0;  // calls finished (guarded by mu_)
  std::condition_variable done_cv;
};

EvaluationThreads::EvaluationThreads(int threads) {
  const int count = std::max(1, threads);
  threads_.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) threads_.emplace_back([this] { Loop(); });
}

EvaluationThreads::~EvaluationThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void EvaluationThreads::Run(std::size_t n, const std::function<void(std::size_t)>& work) {
  if (n == 0) return;
  Job job;
  job.n = n;
  job.work = &work;
  std::unique_lock<std::mutex> lock(mu_);
  jobs_.push_back(&job);
  lock.unlock();
  if (n == 1) {
    work_cv_.notify_one();
  } else {
    work_cv_.notify_all();
  }
  lock.lock();
  job.done_cv.wait(lock, [&] { return job.done == job.n; });
}

void EvaluationThreads::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return !jobs_.empty() || stop_; });
    // Finish what was handed in before stopping: a caller waits for it.
    if (jobs_.empty()) return;
    Job* job = jobs_.front();
    const std::size_t i = job->next++;
    if (job->next == job->n) jobs_.pop_front();  // nothing left to hand out
    lock.unlock();
    (*job->work)(i);
    lock.lock();
    // `job` lives on its caller's stack until done == n, which only this thread's increment
    // below can make true for index i; notify while holding the lock so it is still alive.
    if (++job->done == job->n) job->done_cv.notify_all();
  }
}

}  // namespace queuebox::transform
