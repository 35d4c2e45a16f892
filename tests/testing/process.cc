#include "testing/process.h"

#include <fcntl.h>
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

ChildProcess::ChildProcess(std::string program, std::vector<std::string> args,
                           std::map<std::string, std::string> env, std::string log_file)
    : log_file_(std::move(log_file)) {
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

std::string ChildProcess::Log() const {
  std::ifstream in(log_file_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
