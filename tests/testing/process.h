// process.h: runs a child process (the queuebox binary in e2e tests) with arguments and extra
// environment, its stdout+stderr sent to a log file. Kill() sends a signal; Wait() reaps.
//
// QueueboxBinary(): the binary an e2e test runs: QB_QUEUEBOX_BIN from the environment when set
// (scripts/sanitizers.sh points the Release e2e tests at the AddressSanitizer build's binary),
// else the one this test was built beside.
//
// In a sanitizer build, or with QB_SANITIZED_CHILDREN=1 in the environment (a Release test
// running a sanitized binary), the child's sanitizer reports go to a file of
// their own (`log_path=<log file>.sanitizer`), and reaping a child that wrote one, or printed a
// UBSan `runtime error:` report (ASan's runtime prints those to stderr), fails the running test
// with the report: a finding in the binary under test fails the test even where the test reads
// no output.
//
// Thread-safety: one owner thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace queuebox::testing {

// `built` (the build's QB_QUEUEBOX_BIN), unless the environment's QB_QUEUEBOX_BIN names another.
// The pointer lives as long as the process (the environment's or `built`).
const char* QueueboxBinary(const char* built);

class ChildProcess {
 public:
  ChildProcess(std::string program, std::vector<std::string> args,
               std::map<std::string, std::string> env, std::string log_file);
  ~ChildProcess();  // SIGKILL + reap when still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void Kill(int signal);
  // Exit code (or 128 + signal), or nullopt when still running after `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  bool running();
  // The log file's contents.
  std::string Log() const;

 private:
  void FailOnSanitizerReport() const;

  std::string program_;
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_file_;
};

// Runs to completion; returns the exit code and fills `output` with stdout+stderr.
int RunCommand(const std::string& program, const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env, std::string* output,
               std::chrono::milliseconds timeout = std::chrono::seconds(60));

// A temporary directory removed (recursively) by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  void Write(const std::string& name, const std::string& content) const;

 private:
  std::string path_;
};

}  // namespace queuebox::testing
