// Its own process: it forbids itself executable memory, as systemd's MemoryDenyWriteExecute=yes
// (the packaged unit, packaging/queuebox.service) does, before the engine loads.
#include <errno.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cstddef>
#include <string>

#include "queuebox/transform/jsonata.h"

namespace queuebox::transform {
namespace {

// systemd's filter for MemoryDenyWriteExecute=yes: mmap with PROT_WRITE|PROT_EXEC and
// mprotect/pkey_mprotect with PROT_EXEC fail with EPERM.
bool DenyWriteExecute() {
  constexpr unsigned kProt = offsetof(struct seccomp_data, args[2]);
  constexpr unsigned kNr = offsetof(struct seccomp_data, nr);
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNr),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 4),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kProt),
      BPF_STMT(BPF_ALU | BPF_AND | BPF_K, PROT_EXEC | PROT_WRITE),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROT_EXEC | PROT_WRITE, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kNr),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pkey_mprotect, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kProt),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof f / sizeof f[0]), f};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// The engine runs on its interpreters where memory may not become executable; with the JIT on,
// its start-up (JSRuntime::createJitRuntime) crashed the process with SIGSEGV.
TEST(JsonataNoExecutableMemory, TransformsRunUnderMemoryDenyWriteExecute) {
  ASSERT_FALSE(EnginesLoaded());
  ASSERT_TRUE(DenyWriteExecute());
  auto expr = Expression::Compile("{\"n\": n * 2, \"t\": $topic}");
  ASSERT_TRUE(expr.ok()) << expr.error().ToString();
  // Enough evaluations for SpiderMonkey to want to compile the hot functions.
  for (int n = 0; n < 2000; ++n) {
    Bindings vars;
    vars.SetString("topic", "t");
    auto out = expr.value().Evaluate("{\"n\": " + std::to_string(n) + "}", vars);
    ASSERT_TRUE(out.ok()) << out.error().ToString();
    ASSERT_EQ(out.value(), "{\"n\":" + std::to_string(2 * n) + ",\"t\":\"t\"}");
  }
}

}  // namespace
}  // namespace queuebox::transform
