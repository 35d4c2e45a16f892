// jsonata.h: JSONata transforms, evaluated by the reference engine (the npm `jsonata` package,
// made synchronous at build time) embedded in SpiderMonkey 102. QueueBox reference §8 (transform
// blocks and stage variables), §11.4 (key expressions); docs/transforms.md.
//
// Engines: one SpiderMonkey context per thread (thread_local), created on the thread's first
// Compile or Evaluate, so a process that configures no transform never loads it. SpiderMonkey is
// in a module, libqueuebox_jsonata.so, loaded with dlopen on the process's first Compile or
// Evaluate (a kEngine error naming the paths tried when it cannot load; docs/transforms.md).
// Loading costs ~12 MB of RSS and 50-200 ms (bench/README.md); a compiled expression is cached in
// that thread's engine (LRU, EngineOptions::cache_capacity) and evaluated there. The engine lives
// until its thread exits; threads that hold one must be joined before the process exits.
//
// Limits, enforced per evaluation: a wall-clock timeout (a watchdog thread interrupts the engine;
// this also stops a catastrophic regular expression and a tail-recursive loop), a depth
// (jsonata's own guardrail, D1011), a heap cap per engine, a cap on the memory one evaluation adds
// and a cap on the result's size. After any of them the engine is reusable.
//
// Sandbox: an expression reads only its input and its bindings. The engine's global holds only
// the standard JavaScript classes (no file, network, process, environment, `load` or `print`),
// and eval/Function are refused.
//
// Thread-safety: Expression and Bindings are values: safe to share read-only between threads;
// Compile and Evaluate may be called from any number of threads at once, each using its own
// engine. A thread's stack must be at least EngineOptions::stack_quota_bytes + 256 KiB.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "queuebox/status.h"

namespace queuebox::transform {

enum class ErrorKind {
  kSyntax,           // the expression does not compile (S0xxx, or no code for a regular
                     // expression JavaScript refuses): a start-up error
  kEvaluation,       // JSONata raised an error while evaluating (T, D codes), e.g. T2001
  kTimeout,          // the wall-clock limit ran out (code D1012)
  kDepth,            // the depth limit (code D1011) or the engine's native stack ran out
  kMemory,           // the engine's heap cap or the result-size cap was reached
  kInvalidArgument,  // a limit is not positive, or a text is not UTF-8 or not JSON
  kEngine,           // the engine could not load or failed in a way JSONata does not describe
};

std::string_view ErrorKindName(ErrorKind kind);

struct TransformError {
  ErrorKind kind = ErrorKind::kEngine;
  std::string
      code;  // JSONata's code ("S0203", "T2001", "D1011", "D1012"); empty for kMemory/kEngine
  int position = -1;  // JSONata's position in the expression (characters), -1 when none
  std::string token;  // the offending token, when JSONata names one
  std::string message;

  // "S0203 at position 22: Expected \"]\" before end of expression"; "D1012: ..." without a
  // position; just the message without a code.
  std::string ToString() const;
  // kSyntax, kEvaluation, kInvalidArgument -> kInvalidArgument; kTimeout -> kDeadlineExceeded;
  // kDepth, kMemory -> kResourceExhausted; kEngine -> kInternal. The message is ToString().
  Status ToStatus() const;
};

// A T or a TransformError.
template <typename T>
class [[nodiscard]] TransformResult {
 public:
  TransformResult(T value) : v_(std::move(value)) {}               // NOLINT: implicit by design
  TransformResult(TransformError error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const TransformError& error() const { return std::get<TransformError>(v_); }
  Status status() const { return ok() ? Status() : error().ToStatus(); }

 private:
  std::variant<T, TransformError> v_;
};

// The limits of one transform block (reference §8: `timeoutMs` 100, `maxDepth` 100, both > 0).
struct Limits {
  std::chrono::milliseconds timeout{100};
  // JSONata evaluation frames (jsonata's `stack` guardrail); 100 allows ~31 levels of a
  // user-defined recursive function.
  int max_depth = 100;
};

// Process-wide engine settings. Set them before the first engine loads.
struct EngineOptions {
  // Heap cap of each engine (JS_NewContext maxBytes: the garbage-collected heap), bytes. The
  // bundle takes ~10 MB of it.
  std::size_t max_heap_bytes = std::size_t{128} << 20;
  // Memory one evaluation may add to the process (array elements and long strings are malloc'd,
  // outside the heap cap), bytes: the growth of the process's resident set, read every 5 ms from
  // the evaluation's first 5 ms on and again after a garbage collection. It is the whole
  // process's, so what other threads allocate meanwhile counts too.
  std::size_t max_evaluation_bytes = std::size_t{64} << 20;
  // Largest result, bytes of JSON text (checked before the text leaves the engine).
  std::size_t max_result_bytes = std::size_t{16} << 20;
  // Native stack the engine may use on its thread, bytes.
  std::size_t stack_quota_bytes = std::size_t{1} << 20;
  // Compiled expressions kept per engine (least recently used ones are dropped).
  std::size_t cache_capacity = 1000;
};

// Fails with kFailedPrecondition once an engine has loaded, kInvalidArgument on a zero value.
Status ConfigureEngines(const EngineOptions& options);

// True once this process has started loading the engine (its module and SpiderMonkey): for
// footprint checks.
bool EnginesLoaded();

// The `$` variables of an evaluation, as one JSON object. Setting a name twice: the last wins.
class Bindings {
 public:
  Bindings& SetString(std::string_view name, std::string_view value);
  Bindings& SetInt(std::string_view name, std::int64_t value);
  Bindings& SetNull(std::string_view name);
  // `json` must be one JSON value (e.g. a headers object); Evaluate fails with kInvalidArgument
  // otherwise.
  Bindings& SetJson(std::string_view name, std::string_view json);

  bool empty() const { return json_.empty(); }
  // "{\"topic\":\"order.created\",...}", or "" when nothing is bound.
  std::string json() const { return json_.empty() ? std::string() : json_ + "}"; }

 private:
  void AppendName(std::string_view name);
  std::string json_;  // the object without its closing brace
};

// A JSONata expression that compiled, with its limits. Cheap to copy.
class Expression {
 public:
  // Compiles on the calling thread's engine (loading it on first use). A syntax error gives
  // kSyntax with JSONata's code, position and message; kInvalidArgument when a limit is not
  // positive or the text is not UTF-8 ("The expression is not UTF-8 (byte n)"); kEngine when the
  // engine cannot load. An unknown function compiles and fails when
  // evaluated (T1006).
  static TransformResult<Expression> Compile(std::string text, Limits limits = {});

  const std::string& text() const;
  const Limits& limits() const;

  // Evaluates on the calling thread's engine. `input_json` is the input document `$` as JSON
  // text (UTF-8, a byte order mark before it skipped); empty means no input (undefined). Gives the
  // result as JSON text, or nullopt when the expression gives no value (JSONata's undefined, or a
  // function). An input or binding that is not JSON, or not UTF-8, is kInvalidArgument ("The input
  // or a binding is not JSON:
  // ...").
  TransformResult<std::optional<std::string>> Evaluate(std::string_view input_json,
                                                       const Bindings& bindings = {}) const;

  struct State;  // shared, immutable

 private:
  explicit Expression(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// Reference §11.4: the value a key expression gives (`idempotencyKeyExpression`,
// `aggregateIdExpression`, `eventTypeExpression`) from the JSON text of its result: a string as
// is, a boolean as true/false, a number without a decimal point when whole (515725.0 ->
// "515725"); an object, an array, null, a blank string or an unparsable text give no value.
std::optional<std::string> KeyValueFromJson(std::string_view json);

// The key value of an evaluation: no value for a failure or an undefined result (the caller logs
// the failure once, naming the source and the key).
std::optional<std::string> KeyValue(const TransformResult<std::optional<std::string>>& result);

}  // namespace queuebox::transform
