// process.h: runs a child process (the queuebox binary in e2e tests) with arguments and extra
// environment, its stdout+stderr sent to a log file. Kill() sends a signal; Wait() reaps.
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
