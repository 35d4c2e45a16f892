#include "testing/rabbitmq_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "testing/http_receiver.h"
#include "testing/process.h"

namespace queuebox::testing {
namespace {

bool AcceptsConnections(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return up;
}

// True while `pid` runs (a zombie no longer does: the node is detached, and no parent of ours
// reaps it).
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

std::string Tail(const std::string& path, size_t bytes = 3000) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

}  // namespace

PrivateRabbitMq::PrivateRabbitMq() {
  static std::atomic<int> counter{0};
  node_ = "qbtest" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "@localhost";
  std::string tmpl = (std::filesystem::temp_directory_path() / "qbrmq.XXXXXX").string();
  char* p = mkdtemp(tmpl.data());
  dir_ = p != nullptr ? p : "";
  amqp_port_ = UnusedLoopbackPort();
  dist_port_ = UnusedLoopbackPort();
}

PrivateRabbitMq::~PrivateRabbitMq() {
  if (running_ && !Stop().ok()) {
    // A node that does not stop cleanly is killed by its pid file.
    std::ifstream pid_file(dir_ + "/rabbit.pid");
    pid_t pid = 0;
    if (pid_file >> pid && pid > 0) ::kill(pid, SIGKILL);
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::map<std::string, std::string> PrivateRabbitMq::Env() const {
  return {{"RABBITMQ_NODENAME", node_},
          {"RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1"},
          {"RABBITMQ_NODE_PORT", std::to_string(amqp_port_)},
          {"RABBITMQ_DIST_PORT", std::to_string(dist_port_)},
          {"ERL_EPMD_PORT", "4369"},
          {"ERL_EPMD_ADDRESS", "127.0.0.1"},
          {"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS", "-kernel inet_dist_use_interface {127,0,0,1}"},
          {"RABBITMQ_MNESIA_BASE", dir_ + "/mnesia"},
          {"RABBITMQ_LOG_BASE", dir_ + "/log"},
          {"RABBITMQ_PID_FILE", dir_ + "/rabbit.pid"},
          {"RABBITMQ_ENABLED_PLUGINS_FILE", dir_ + "/enabled_plugins"},
          {"HOME", dir_}};
}

Status PrivateRabbitMq::Ctl(const std::string& args) const {
  std::string out;
  int code = RunCommand("/bin/sh", {"-c", "/usr/sbin/rabbitmqctl -q -n " + node_ + " " + args},
                        Env(), &out, std::chrono::seconds(150));
  if (code != 0) {
    return Unavailable("rabbitmqctl " + args + " failed (" + std::to_string(code) + "): " + out);
  }
  return Status::Ok();
}

Status PrivateRabbitMq::Start() {
  if (dir_.empty()) return Unavailable("no folder for the RabbitMQ node");
  std::string out;
  if (!std::filesystem::exists(dir_ + "/enabled_plugins")) {
    std::ofstream(dir_ + "/enabled_plugins") << "[].\n";
    int code = RunCommand(
        "/bin/sh",
        {"-c", "install -d -o rabbitmq -g rabbitmq " + dir_ + " " + dir_ + "/mnesia " + dir_ +
                   "/log && chown rabbitmq:rabbitmq " + dir_ + "/enabled_plugins"},
        {}, &out);
    if (code != 0) return Unavailable("cannot prepare " + dir_ + ": " + out);
  }
  int code = RunCommand("/bin/sh",
                        {"-c", "/usr/sbin/rabbitmq-server -detached </dev/null >/dev/null 2>&1"},
                        Env(), &out, std::chrono::seconds(60));
  if (code != 0) return Unavailable("rabbitmq-server -detached failed: " + out);
  running_ = true;
  // The AMQP listener opens at the end of the boot. Polled rather than `rabbitmqctl wait`: each
  // rabbitmqctl boots an Erlang VM of its own, seconds of CPU on a loaded machine.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!AcceptsConnections(amqp_port_)) {
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("RabbitMQ did not listen on 127.0.0.1:" + std::to_string(amqp_port_) +
                         " within 120 s:\n" + Tail(dir_ + "/log/" + node_ + ".log"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Ok();
}

Status PrivateRabbitMq::Stop() {
  // SIGTERM stops the node as `rabbitmqctl stop` does (the VM's init:stop), without booting a
  // second VM for the command.
  std::ifstream pid_file(dir_ + "/rabbit.pid");
  pid_t pid = 0;
  if (!(pid_file >> pid) || pid <= 0) return Ctl("stop");
  ::kill(pid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (Alive(pid)) {
    if (std::chrono::steady_clock::now() > deadline) {
      return Unavailable("RabbitMQ (pid " + std::to_string(pid) +
                         ") still runs 60 s after SIGTERM");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::error_code ec;
  std::filesystem::remove(dir_ + "/rabbit.pid", ec);
  running_ = false;
  return Status::Ok();
}

std::string PrivateRabbitMq::url() const {
  return "amqp://guest:guest@127.0.0.1:" + std::to_string(amqp_port_) + "/";
}

}  // namespace queuebox::testing
