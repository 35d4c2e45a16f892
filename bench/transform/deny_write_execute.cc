// deny_write_execute: runs a command where memory may not become executable, as under systemd's
// MemoryDenyWriteExecute=yes, to measure the JSONata engine on its interpreters (no JIT).
//
//   deny_write_execute <command> [args...]   # e.g. build/bench/transform/transform_bench ...
#include "deny_write_execute.h"

#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: deny_write_execute <command> [args...]\n");
    return 2;
  }
  if (!queuebox::transform::DenyWriteExecute()) {
    std::perror("deny_write_execute: the seccomp filter");
    return 2;
  }
  execvp(argv[1], argv + 1);
  std::perror("deny_write_execute: exec");
  return 127;
}
