// engine.h (private to qb_transform): one thread's JSONata engine: a cache of compiled
// expressions over a Backend, the SpiderMonkey context of the engine module (engine_module.h),
// which is loaded with the first engine.
//
// Ownership and threads: an Engine belongs to the thread that created it (thread_local in
// ForThisThread) and is destroyed when that thread exits; SpiderMonkey allows one context per
// thread and every JSAPI call on it from that thread only. The module's watchdog
// (module/watchdog.h) is the one other thread that touches the context, through
// JS_RequestInterruptCallback.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "queuebox/transform/jsonata.h"

namespace queuebox::transform {

struct Expression::State {
  std::string text;
  Limits limits;
  std::size_t hash = 0;  // of (text, limits.max_depth): the engines' cache key
};

namespace internal {

// The process-wide options (ConfigureEngines) as the engines read them.
const EngineOptions& CurrentEngineOptions();

class Backend;

class Engine {
 public:
  // The calling thread's engine, loaded on first use (the module too, on the process's first);
  // the same failure is returned on every later call on this thread once loading failed.
  static TransformResult<Engine*> ForThisThread();

  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Compiles into the cache (or finds it there). Gives nothing on success.
  TransformResult<bool> Compile(const Expression::State& expression);
  TransformResult<std::optional<std::string>> Evaluate(const Expression::State& expression,
                                                       std::string_view input_json,
                                                       const std::string& bindings_json);

  std::size_t cache_size() const { return lru_.size(); }

  // For tests: runs JavaScript in the engine's global, bypassing JSONata, and gives
  // String(completion value) or the error's text (with "error: " before it).
  std::string RunScriptForTest(std::string_view source);

 private:
  explicit Engine(std::unique_ptr<Backend> backend);

  struct CacheEntry {
    std::shared_ptr<const Expression::State> key;
    int slot = -1;
  };
  struct KeyHash {
    std::size_t operator()(const Expression::State* s) const { return s->hash; }
  };
  struct KeyEq {
    bool operator()(const Expression::State* a, const Expression::State* b) const {
      return a->limits.max_depth == b->limits.max_depth && a->text == b->text;
    }
  };
  using Lru = std::list<CacheEntry>;

  // The cached slot of `expression`, compiling it when missing (and evicting the least recently
  // used entry when the cache is full).
  TransformResult<int> Slot(const Expression::State& expression);

  std::unique_ptr<Backend> backend_;
  Lru lru_;  // most recently used first
  std::unordered_map<const Expression::State*, Lru::iterator, KeyHash, KeyEq> index_;
};

}  // namespace internal
}  // namespace queuebox::transform
