// ElasticPool: every task gets a thread at once up to the cap (an open keep-alive connection is
// a task that blocks), beyond the cap tasks wait, idle threads above the floor leave, shutdown
// runs what was queued.
#include "admin/elastic_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

namespace queuebox {
namespace {

using namespace std::chrono_literals;

// Tasks that block until released, counting how many run at once.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int running = 0;
  void Task() {
    std::unique_lock<std::mutex> lock(mu);
    ++running;
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
  }
  bool WaitRunning(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, 10s, [&] { return running >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(ElasticPool, EveryBlockingTaskRunsAtOnceUpToTheCap) {
  ElasticPool pool(2, 300, 60s);
  Gate gate;
  for (int i = 0; i < 200; ++i) pool.enqueue([&gate] { gate.Task(); });
  // A fixed pool of 64 would leave 136 of them waiting for a thread.
  EXPECT_TRUE(gate.WaitRunning(200));
  // 200 busy threads, plus at most the floor's two if they were not waiting yet when the first
  // tasks came.
  EXPECT_GE(pool.threads(), 200u);
  EXPECT_LE(pool.threads(), 202u);
  gate.Open();
  pool.shutdown();
  EXPECT_EQ(pool.threads(), 0u);
  EXPECT_LE(pool.peak_threads(), 202u);
}

TEST(ElasticPool, BeyondTheCapTasksWaitAndStillRun) {
  ElasticPool pool(1, 4, 60s);
  Gate gate;
  std::atomic<int> done{0};
  for (int i = 0; i < 10; ++i) {
    pool.enqueue([&] {
      gate.Task();
      ++done;
    });
  }
  EXPECT_TRUE(gate.WaitRunning(4));
  EXPECT_EQ(pool.threads(), 4u);
  gate.Open();
  pool.shutdown();  // runs the six that waited
  EXPECT_EQ(done.load(), 10);
  EXPECT_EQ(pool.peak_threads(), 4u);
}

TEST(ElasticPool, IdleThreadsAboveTheFloorLeave) {
  Gate gate;  // before pool: the pool's threads wait on it until the pool is gone
  ElasticPool pool(2, 64, 50ms);
  for (int i = 0; i < 20; ++i) pool.enqueue([&gate] { gate.Task(); });
  ASSERT_TRUE(gate.WaitRunning(20));
  gate.Open();
  for (int i = 0; i < 200 && pool.threads() > 2; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(pool.threads(), 2u);
  // Still serves after shrinking.
  std::atomic<bool> ran{false};
  pool.enqueue([&ran] { ran = true; });
  pool.shutdown();
  EXPECT_TRUE(ran.load());
}

}  // namespace
}  // namespace queuebox
