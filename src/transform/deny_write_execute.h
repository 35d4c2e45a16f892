// DenyWriteExecute(): this process (and what it execs) may no longer make memory executable, as
// under systemd's MemoryDenyWriteExecute=yes. Used by unit_transform_no_exec_memory and by
// bench/transform/deny_write_execute.cc (bench/README.md, "Transforms without the JIT").
#pragma once

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cstddef>

namespace queuebox::transform {

// systemd's filter for MemoryDenyWriteExecute=yes: mmap with PROT_WRITE|PROT_EXEC and
// mprotect/pkey_mprotect with PROT_EXEC fail with EPERM.
// Returns false when the filter could not be installed. Irreversible for the process.
inline bool DenyWriteExecute() {
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

}  // namespace queuebox::transform
