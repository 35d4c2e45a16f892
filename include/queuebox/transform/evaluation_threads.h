// evaluation_threads.h: the threads that evaluate transforms, each with its own engine.
//
// SpiderMonkey allows one engine per thread and a thread's engine lives until the thread exits
// (jsonata.h); each engine costs ~12 MB and more as it works (docs/transforms.md). So the stages
// do not evaluate on whatever thread calls them (the relay has up to 16 workers, an HTTP server
// has its own pool): they hand the work to a fixed set of threads that this object starts, owns
// and joins, so the number of engines is bounded and every engine's thread is joined before the
// process exits. An engine loads on its thread's first evaluation, so threads that never get work
// cost a thread's stack and nothing more.
//
// Thread-safety: Run may be called from any number of threads at once; the work of concurrent
// calls is shared out between the threads in arrival order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace queuebox::transform {

class EvaluationThreads {
 public:
  // Starts `threads` threads (at least 1), each with an 8 MiB stack (std::thread's default on
  // Linux, more than EngineOptions::stack_quota_bytes + 256 KiB).
  explicit EvaluationThreads(int threads);
  // Waits for the work in hand, then joins every thread (their engines are destroyed with them).
  ~EvaluationThreads();
  EvaluationThreads(const EvaluationThreads&) = delete;
  EvaluationThreads& operator=(const EvaluationThreads&) = delete;

  // Calls work(i) for every i in [0, n) on the threads (several at once) and returns when all
  // calls returned. `work` must not throw; it runs on one of this object's threads, never on the
  // caller's.
  void Run(std::size_t n, const std::function<void(std::size_t)>& work);

  int size() const { return static_cast<int>(threads_.size()); }

 private:
  struct Job;
  void Loop();

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Job*> jobs_;  // jobs with indexes left to hand out, oldest first
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace queuebox::transform
