// engine_module.cc: finds and loads libqueuebox_jsonata.so (see engine_module.h).
#include "engine_module.h"

#include <dlfcn.h>

#include <cstring>
#include <filesystem>
#include <mutex>
#include <system_error>

namespace queuebox::transform::internal {
namespace {

std::mutex test_path_mu;
std::optional<std::string> test_path;  // guarded by test_path_mu

TransformError EngineError(std::string message) {
  TransformError e;
  e.kind = ErrorKind::kEngine;
  e.message = "The JSONata engine did not load: " + std::move(message);
  return e;
}

// True when `exe` is inside this build's tree: only such a binary may load the build's module.
bool InBuildTree(const std::filesystem::path& exe) {
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::canonical(QB_BUILD_DIR, ec);
  if (ec) return false;
  const std::string prefix = root.string() + "/";
  return exe.string().compare(0, prefix.size(), prefix) == 0;
}

TransformResult<const ModuleEntry*> Load() {
  std::vector<std::string> reasons;
  for (const std::string& path : ModuleCandidates()) {
    // RTLD_LOCAL: libmozjs's symbols stay the module's. Never closed: engines live until their
    // threads exit, some after main returns.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      std::string why = error != nullptr ? error : "dlopen failed";
      // A library the module needs (libmozjs) is named without the module's path.
      if (why.find(path) == std::string::npos) why = path + ": " + why;
      reasons.push_back(std::move(why));
      continue;
    }
    void* symbol = dlsym(handle, kModuleEntrySymbol);
    if (symbol == nullptr) {
      const char* why = dlerror();
      return EngineError(path + " is not the JSONata engine module (" +
                         (why != nullptr ? why : "no entry symbol") + ")");
    }
    const ModuleEntry* entry = reinterpret_cast<ModuleEntryFunction>(symbol)();
    if (entry == nullptr || entry->abi != kModuleAbi || entry->version == nullptr ||
        std::strcmp(entry->version, QUEUEBOX_VERSION) != 0 || entry->new_backend == nullptr) {
      return EngineError(path + " is from another build of QueueBox (module interface " +
                         (entry != nullptr ? std::to_string(entry->abi) : "?") + ", version " +
                         (entry != nullptr && entry->version != nullptr ? entry->version : "?") +
                         "; this binary: interface " + std::to_string(kModuleAbi) + ", version " +
                         QUEUEBOX_VERSION + "). Install the module that came with this binary.");
    }
    return entry;
  }
  if (reasons.empty()) reasons.emplace_back("no path to try (/proc/self/exe is unreadable)");
  std::string message = std::string("its module ") + kModuleFileName + " could not be loaded";
  for (std::size_t i = 0; i < reasons.size(); ++i) message += (i == 0 ? ": " : "; ") + reasons[i];
  return EngineError(message +
                     ". It is installed beside the queuebox binary or in ../lib/queuebox/ from "
                     "the binary's folder.");
}

}  // namespace

std::vector<std::string> ModuleCandidates() {
  {
    std::lock_guard<std::mutex> lock(test_path_mu);
    if (test_path) return {*test_path};
  }
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path dir = exe.parent_path();
    out.push_back((dir / kModuleFileName).string());
    out.push_back((dir.parent_path() / "lib" / "queuebox" / kModuleFileName).string());
    if (InBuildTree(exe)) out.emplace_back(QB_BUILD_MODULE);
  }
  return out;
}

TransformResult<const ModuleEntry*> LoadModule() {
  // Never destroyed: engines on threads that outlive main may still ask.
  static const auto* const outcome = new TransformResult<const ModuleEntry*>(Load());
  return *outcome;
}

void SetModulePathForTest(std::string path) {
  std::lock_guard<std::mutex> lock(test_path_mu);
  test_path = std::move(path);
}

}  // namespace queuebox::transform::internal
