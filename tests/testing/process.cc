#include "testing/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace queuebox::testing {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizedBuild = true;
#else
constexpr bool kSanitizedBuild = false;
#endif

// Whether children may write sanitizer reports: this build's, or a sanitized binary's that a
// Release test runs (scripts/sanitizers.sh sets QB_SANITIZED_CHILDREN=1).
bool SanitizedChildren() {
  const char* flag = std::getenv("QB_SANITIZED_CHILDREN");
  return kSanitizedBuild || (flag != nullptr && std::string(flag) == "1");
}

// The sanitizer runtimes append `.<pid>` to log_path.
std::string ReportPrefix(const std::string& log_file) { return log_file + ".sanitizer"; }

// Adds log_path to the child's sanitizer options (its own, else the test's), keeping the rest.
void SendReportsToFile(std::map<std::string, std::string>& env, const std::string& log_file) {
  for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"}) {
    std::string value;
    if (auto it = env.find(name); it != env.end()) {
      value = it->second;
    } else if (const char* inherited = std::getenv(name); inherited != nullptr) {
      value = inherited;
    }
    if (!value.empty()) value += ':';
    env[name] = value + "log_path=" + ReportPrefix(log_file);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

const char* QueueboxBinary(const char* built) {
  const char* chosen = std::getenv("QB_QUEUEBOX_BIN");
  return chosen != nullptr && *chosen != '\0' ? chosen : built;
}

ChildProcess::ChildProcess(std::string program, std::vector<std::string> args,
                           std::map<std::string, std::string> env, std::string log_file)
    : program_(program), log_file_(std::move(log_file)) {
  if (SanitizedChildren()) SendReportsToFile(env, log_file_);
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log_file_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    // Nothing else of the test binary's: an inherited listening socket (a test's HTTP receiver)
    // would outlive the receiver's Stop in the child and take its connections.
    close_range(3, ~0U, 0);
    // The test binary may block signals; the child starts with a clean mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    argv.push_back(program.data());
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (running()) {
    kill(pid_, SIGKILL);
    Wait(std::chrono::seconds(10));
  }
}

void ChildProcess::Kill(int signal) {
  if (pid_ > 0 && !status_) kill(pid_, signal);
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int st = 0;
    pid_t r = waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      FailOnSanitizerReport();
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool ChildProcess::running() {
  if (pid_ <= 0 || status_) return false;
  return !Wait(std::chrono::milliseconds(0)).has_value();
}

std::string ChildProcess::Log() const { return ReadFile(log_file_); }

// Once, when the child is reaped: its report file, and any UBSan report it printed (ASan's
// runtime writes UBSan's reports to stderr whatever log_path says).
void ChildProcess::FailOnSanitizerReport() const {
  if (!SanitizedChildren()) return;
  std::string report = ReadFile(ReportPrefix(log_file_) + "." + std::to_string(pid_));
  std::istringstream log(Log());
  bool in_ubsan = false;  // a UBSan line and its stack (print_stacktrace=1)
  for (std::string line; std::getline(log, line);) {
    in_ubsan = line.find("runtime error:") != std::string::npos ||
               (in_ubsan && line.rfind("    #", 0) == 0);
    if (in_ubsan) report += line + "\n";
  }
  if (report.empty()) return;
  ADD_FAILURE() << "sanitizer report of " << program_ << " (pid " << pid_ << ", exit " << *status_
                << "):\n"
                << report;
}

int RunCommand(const std::string& program, const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env, std::string* output,
               std::chrono::milliseconds timeout) {
  TempDir dir;
  std::optional<int> code;
  std::string log = dir.File("out.log");
  {
    ChildProcess p(program, args, env, log);
    code = p.Wait(timeout);
    if (output != nullptr) *output = p.Log();
  }
  return code.value_or(-1);
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "qbtest.XXXXXX").string();
  char* p = mkdtemp(tmpl.data());
  path_ = p != nullptr ? p : "";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

void TempDir::Write(const std::string& name, const std::string& content) const {
  std::ofstream out(File(name));
  out << content;
}

}  // namespace queuebox::testing
