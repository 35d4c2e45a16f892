// The Type=notify handshake of packaging/queuebox.service: started with NOTIFY_SOCKET (as systemd
// starts it), `queuebox run` sends READY=1 once it serves (the HTTP port answers), and STOPPING=1
// when SIGTERM begins the shutdown. The socket here is a real datagram socket standing in for
// systemd's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "testing/http_receiver.h"
#include "testing/process.h"

namespace queuebox {
namespace {

using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::TempDir;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);

// A bound AF_UNIX datagram socket at `path`.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) close(fd_);
  }
  bool bound() const { return bound_; }
  // The next datagram, or "" when none arrives within `timeout`.
  std::string Receive(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) return "";
    char buf[4096];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SystemdNotifyE2ETest, RunSignalsReadyOnceServingAndStoppingOnSigterm) {
  TempDir dir;
  const int port = testing::UnusedLoopbackPort();
  dir.Write("q.yml", "database:\n  type: sqlite\n  url: " + dir.File("outbox.db") +
                         "\nserver:\n  address: 127.0.0.1\n  httpPort: " + std::to_string(port) +
                         "\nlogging:\n  format: text\n  level: info\n");
  NotifySocket notify(dir.File("notify.sock"));
  ASSERT_TRUE(notify.bound());
  ChildProcess relay(kBinary, {"--config", dir.File("q.yml"), "run"},
                     {{"NOTIFY_SOCKET", dir.File("notify.sock")}}, dir.File("relay.log"));

  std::string ready = notify.Receive(60s);
  EXPECT_THAT(ready, HasSubstr("READY=1\n")) << relay.Log();
  EXPECT_THAT(ready, HasSubstr("STATUS=Delivering; HTTP port " + std::to_string(port)));
  // Ready means serving: the port answers at once.
  httplib::Client client("127.0.0.1", port);
  auto live = client.Get("/health/live");
  ASSERT_TRUE(live) << relay.Log();
  EXPECT_EQ(live->status, 200);

  relay.Kill(SIGTERM);
  EXPECT_THAT(notify.Receive(30s), HasSubstr("STOPPING=1")) << relay.Log();
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
}

}  // namespace
}  // namespace queuebox
