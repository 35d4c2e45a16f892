// engine.cc: the engines' cache and options; the SpiderMonkey side is the module's
// (module/backend.cc, loaded by engine_module.cc).
#include "engine.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "engine_module.h"

namespace queuebox::transform::internal {
namespace {

std::mutex options_mu;
EngineOptions options;  // guarded by options_mu until engines_loaded
std::atomic<bool> engines_loaded{false};

}  // namespace

const EngineOptions& CurrentEngineOptions() { return options; }

TransformResult<Engine*> Engine::ForThisThread() {
  thread_local std::unique_ptr<Engine> engine;
  thread_local std::optional<TransformError> load_error;
  if (engine) return engine.get();
  if (load_error) return *load_error;
  {
    std::lock_guard<std::mutex> lock(options_mu);
    engines_loaded.store(true);
  }
  TransformResult<const ModuleEntry*> module = LoadModule();
  if (!module.ok()) {
    load_error = module.error();
    return *load_error;
  }
  TransformResult<std::unique_ptr<Backend>> backend = module.value()->new_backend(options);
  if (!backend.ok()) {
    load_error = backend.error();
    return *load_error;
  }
  engine.reset(new Engine(std::move(backend).value()));
  return engine.get();
}

Engine::Engine(std::unique_ptr<Backend> backend) : backend_(std::move(backend)) {}

Engine::~Engine() {
  lru_.clear();
  index_.clear();
  backend_.reset();
}

TransformResult<int> Engine::Slot(const Expression::State& expression) {
  if (auto it = index_.find(&expression); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->slot;
  }
  TransformResult<int> slot = backend_->Compile(expression);
  if (!slot.ok()) return slot;
  const std::size_t capacity = std::max<std::size_t>(1, options.cache_capacity);
  while (lru_.size() >= capacity) {
    CacheEntry& last = lru_.back();
    index_.erase(last.key.get());
    backend_->Release(last.slot);
    lru_.pop_back();
  }
  lru_.push_front(CacheEntry{std::make_shared<const Expression::State>(expression), slot.value()});
  index_.emplace(lru_.front().key.get(), lru_.begin());
  return slot;
}

TransformResult<bool> Engine::Compile(const Expression::State& expression) {
  TransformResult<int> slot = Slot(expression);
  if (!slot.ok()) return slot.error();
  return true;
}

TransformResult<std::optional<std::string>> Engine::Evaluate(const Expression::State& expression,
                                                             std::string_view input_json,
                                                             const std::string& bindings_json) {
  TransformResult<int> slot = Slot(expression);
  if (!slot.ok()) return slot.error();
  return backend_->Evaluate(slot.value(), expression.limits, input_json, bindings_json);
}

std::string Engine::RunScriptForTest(std::string_view source) {
  return backend_->RunScriptForTest(source);
}

}  // namespace queuebox::transform::internal

namespace queuebox::transform {

Status ConfigureEngines(const EngineOptions& new_options) {
  if (new_options.max_heap_bytes == 0 || new_options.max_evaluation_bytes == 0 ||
      new_options.max_result_bytes == 0 || new_options.stack_quota_bytes == 0 ||
      new_options.cache_capacity == 0) {
    return InvalidArgument("every engine option must be positive");
  }
  std::lock_guard<std::mutex> lock(internal::options_mu);
  if (internal::engines_loaded.load()) {
    return FailedPrecondition("the JSONata engines are already loaded; configure them before");
  }
  internal::options = new_options;
  return Status::Ok();
}

bool EnginesLoaded() { return internal::engines_loaded.load(); }

}  // namespace queuebox::transform
