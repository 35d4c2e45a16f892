// engine_module.cc: finds and loads libqueuebox_jsonata.so (see engine_module.h).
#include "engine_module.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

// Why `path` must not be given to dlopen, or "" (dlopen then judges it). dlopen maps a shared
// object's segments as its program headers say: a truncated file (an interrupted copy, a full
// disk) is mapped past its end and the loader's first touch there kills the process with SIGBUS.
std::string Unloadable(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  std::string why;
  struct stat st {};
  Elf64_Ehdr eh{};
  if (fstat(fd, &st) != 0) {
    // dlopen judges it
  } else if (!S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (pread(fd, &eh, sizeof eh, 0) == static_cast<ssize_t>(sizeof eh) &&
             std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
             eh.e_phentsize == sizeof(Elf64_Phdr)) {
    const auto size = static_cast<uint64_t>(st.st_size);
    for (int i = 0; i < eh.e_phnum && why.empty(); ++i) {
      Elf64_Phdr ph{};
      if (pread(fd, &ph, sizeof ph, static_cast<off_t>(eh.e_phoff + i * sizeof ph)) !=
          static_cast<ssize_t>(sizeof ph)) {
        break;  // dlopen reports the short file
      }
      if (ph.p_type == PT_LOAD && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)) {
        why = "truncated (" + std::to_string(size) + " bytes; a segment ends at byte " +
              std::to_string(ph.p_offset + ph.p_filesz) + ")";
      }
    }
  }
  close(fd);
  return why;
}

TransformResult<const ModuleEntry*> Load() {
  std::vector<std::string> reasons;
  for (const std::string& path : ModuleCandidates()) {
    if (std::string why = Unloadable(path); !why.empty()) {
      reasons.push_back(path + ": " + why);
      continue;
    }
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
        std::strcmp(entry->version, QUEUEBOX_VERSION) != 0 || entry->new_backend == nullptr ||
        entry->baselined_evaluations == nullptr) {
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
