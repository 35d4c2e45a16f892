// engine_module.h (private to qb_transform): the interface between the relay and the JSONata
// engine module, libqueuebox_jsonata.so (src/transform/module/), the one part of QueueBox that
// links SpiderMonkey (libmozjs). The module is loaded with dlopen on the first Compile or
// Evaluate, so a process that configures no transform never maps libmozjs (~2.4 MB of RSS from
// its relocations and static initialisers alone, bench/README.md "Memory").
//
// The module exports one C symbol, kModuleEntrySymbol, giving a ModuleEntry. The types that cross
// the boundary are this project's C++ types, so the module must come from the same build as the
// binary: ModuleEntry::abi must equal kModuleAbi (bump it whenever anything in this header or in
// the types it names changes) and ModuleEntry::version the binary's QUEUEBOX_VERSION.
//
// Where it is looked for (ModuleCandidates): beside the running executable, then in
// <executable's folder>/../lib/queuebox/ (the installed layout: /usr/bin/queuebox and
// /usr/lib/queuebox/libqueuebox_jsonata.so), then, only for an executable inside the build tree
// (tests, benchmarks), where the build put it. The module is never unloaded.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine.h"
#include "queuebox/transform/jsonata.h"

namespace queuebox::transform::internal {

inline constexpr int kModuleAbi = 2;
inline constexpr const char* kModuleFileName = "libqueuebox_jsonata.so";
inline constexpr const char* kModuleEntrySymbol = "queuebox_jsonata_module";

// One SpiderMonkey context with the JSONata bundle loaded. It belongs to the thread that created
// it: every call, including the destructor, comes from that thread (Engine keeps it thread_local).
class Backend {
 public:
  virtual ~Backend() = default;
  // Compiles `expression`; gives its slot in the context (a kSyntax error, with JSONata's code and
  // position, when it does not compile).
  virtual TransformResult<int> Compile(const Expression::State& expression) = 0;
  // Frees a slot that Compile gave.
  virtual void Release(int slot) = 0;
  virtual TransformResult<std::optional<std::string>> Evaluate(
      int slot, const Limits& limits, std::string_view input_json,
      const std::string& bindings_json) = 0;
  // See Engine::RunScriptForTest.
  virtual std::string RunScriptForTest(std::string_view source) = 0;
};

struct ModuleEntry {
  int abi = 0;                    // kModuleAbi of the module's build
  const char* version = nullptr;  // QUEUEBOX_VERSION of the module's build
  // A context on the calling thread with `options` (fixed for the process: ConfigureEngines is
  // refused once an engine loaded). kEngine when SpiderMonkey or the bundle does not load.
  TransformResult<std::unique_ptr<Backend>> (*new_backend)(const EngineOptions& options) = nullptr;
  // Tests: how many evaluations now running have had their memory baseline read by the watchdog
  // (module/watchdog.h), so a test can grow the process after it, not before.
  int (*baselined_evaluations)() = nullptr;
};

using ModuleEntryFunction = const ModuleEntry* (*)();

// The paths tried, in order (see the top of this file).
std::vector<std::string> ModuleCandidates();

// The module's entry, loading it on the first call (thread-safe; the outcome of that call is kept
// for the process). kEngine naming every path tried and dlerror()'s reason when none loads.
TransformResult<const ModuleEntry*> LoadModule();

// For tests, before the first LoadModule: try only `path`.
void SetModulePathForTest(std::string path);

}  // namespace queuebox::transform::internal
