// watchdog.h: the thread that enforces the wall-clock limit of every engine's evaluation.
//
// An engine arms its slot with a deadline before it calls into JavaScript and disarms it after.
// When the deadline passes, the watchdog calls JS_RequestInterruptCallback on that engine's
// context (the one JSAPI call that is safe from another thread); the engine's interrupt callback
// checks the deadline on its own thread, so a request that arrives late is harmless.
//
// Memory: every kTick, for each evaluation that has run at least kTick, the watchdog reads the
// process's resident set size (/proc/self/statm, ~1 µs; mallinfo2 was measured at 20 ms on a
// fragmented heap). The first reading is the evaluation's baseline; when a later one is more than
// the slot's max_bytes above it, the watchdog raises memory_alarm and interrupts the engine,
// which collects garbage and stops the evaluation if the memory is its own (backend.cc,
// WithinMemory: its zone's size, or the process's growth when no other engine is evaluating).
// (It interrupts only then: an interrupt that lets SpiderMonkey 102 continue inside a regular
// expression turns into a "too much recursion" error.) The garbage-collected heap has its own cap
// (JS_NewContext), which SpiderMonkey enforces.
//
// Arm and Disarm are atomic stores (no lock, no system call) while the watchdog is awake; it
// sleeps after kIdleBeforeSleep without an armed slot and Arm wakes it. A deadline is detected
// within kTick of passing.
//
// Thread-safety: all functions may be called from any thread. A slot belongs to one engine; it is
// unregistered before its context is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <thread>

struct JSContext;

namespace queuebox::transform::internal {

class Watchdog {
 public:
  static constexpr std::chrono::milliseconds kTick{5};
  static constexpr std::chrono::milliseconds kIdleBeforeSleep{200};

  struct Slot {
    JSContext* cx = nullptr;
    std::atomic<std::int64_t> deadline_ns{0};     // steady_clock nanoseconds; 0 = not evaluating
    std::atomic<std::int64_t> armed_ns{0};        // when the current evaluation started
    std::size_t max_bytes = 0;                    // malloc'd bytes an evaluation may add
    std::atomic<std::size_t> memory_baseline{0};  // 0 = not read yet
    std::atomic<bool> memory_alarm{false};
  };

  // The process's resident set size, bytes (0 when /proc cannot be read: no memory check).
  static std::size_t ResidentBytes();

  // The process's watchdog; its thread starts on first use and is never joined (it outlives
  // every engine, including those destroyed at process exit).
  static Watchdog& Get();

  Slot* Register(JSContext* cx, std::size_t max_bytes);
  void Unregister(Slot* slot);
  void Arm(Slot* slot, std::chrono::steady_clock::time_point deadline);
  static void Disarm(Slot* slot) { slot->deadline_ns.store(0); }
  // How many engines are evaluating now (armed slots).
  int ArmedCount();
  // How many of those have had their memory baseline read (tests wait for it).
  int BaselinedCount();

 private:
  Watchdog();
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::list<Slot> slots_;  // guarded by mu_; list: slot addresses stay valid
  std::atomic<bool> sleeping_{false};
  std::thread thread_;
};

}  // namespace queuebox::transform::internal
