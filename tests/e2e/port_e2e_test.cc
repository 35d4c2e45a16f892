// One relay per port (issue 17 item 3): a second queuebox process configured with a port that a
// running one listens on stops at start with a message naming the key and the port, and the
// first keeps serving. Two real processes on the embedded SQLite default.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <thread>

#include "testing/http_receiver.h"
#include "testing/process.h"

namespace queuebox {
namespace {

using testing::ChildProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);

// A relay on its own SQLite file; `extra_server` adds lines under `server:`.
std::string Config(const TempDir& dir, const std::string& name, int http_port,
                   const std::string& extra_server = "") {
  return "database:\n  type: sqlite\n  url: " + dir.File(name + ".db") +
         "\nserver:\n  address: 127.0.0.1\n  httpPort: " + std::to_string(http_port) + "\n" +
         extra_server +
         "outbox:\n  pollIntervalMs: 100\n"
         "routes:\n  - topicPattern: \"**\"\n    destination: out\n"
         "destinations:\n  out:\n    type: file\n    path: " +
         dir.File(name + ".jsonl") + "\nlogging:\n  format: text\n  level: info\n";
}

int LiveStatus(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(5);
  auto r = c.Get("/health/live");
  return r ? r->status : -1;
}

bool WaitLive(int port, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (LiveStatus(port) == 200) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// Runs `config` to completion and returns (exit code, output).
std::pair<int, std::string> RunToExit(const std::string& config) {
  std::string out;
  int code = testing::RunCommand(kBinary, {"--config", config, "run"}, {}, &out, 60s);
  return {code, out};
}

TEST(PortE2ETest, ASecondRelayOnATakenHttpPortExitsNamingTheKeyAndPort) {
  TempDir dir;
  const int port = testing::UnusedLoopbackPort();
  dir.Write("a.yml", Config(dir, "a", port));
  dir.Write("b.yml", Config(dir, "b", port));
  ChildProcess first(kBinary, {"--config", dir.File("a.yml"), "run"}, {}, dir.File("a.log"));
  ASSERT_TRUE(WaitLive(port, 30s)) << first.Log();

  auto [code, out] = RunToExit(dir.File("b.yml"));
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out,
              HasSubstr("QueueBox did not start. Reason: Cannot listen on 127.0.0.1:" +
                        std::to_string(port) + " (server.httpPort): the port is already in use"));
  EXPECT_THAT(out, HasSubstr("Set 'server.httpPort' to a free port"));
  // It stopped before delivering: the relay starts only after the ports are bound.
  EXPECT_THAT(out, Not(HasSubstr("QueueBox C++ is delivering")));

  // The first keeps serving, and it is the only listener: every probe reaches it.
  ASSERT_TRUE(first.running()) << first.Log();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(LiveStatus(port), 200) << "probe " << i;
  first.Kill(SIGTERM);
  EXPECT_EQ(first.Wait(20s), std::optional<int>(0)) << first.Log();
}

TEST(PortE2ETest, ASecondRelayOnATakenManagementPortExitsNamingThatKey) {
  TempDir dir;
  const int port_a = testing::UnusedLoopbackPort();
  int port_b = testing::UnusedLoopbackPort();
  while (port_b == port_a) port_b = testing::UnusedLoopbackPort();
  const int management = testing::UnusedLoopbackPort();
  ASSERT_NE(management, port_a);
  ASSERT_NE(management, port_b);
  const std::string m = "  managementPort: " + std::to_string(management) + "\n";
  dir.Write("a.yml", Config(dir, "a", port_a, m));
  dir.Write("b.yml", Config(dir, "b", port_b, m));
  ChildProcess first(kBinary, {"--config", dir.File("a.yml"), "run"}, {}, dir.File("a.log"));
  ASSERT_TRUE(WaitLive(management, 30s)) << first.Log();

  auto [code, out] = RunToExit(dir.File("b.yml"));
  EXPECT_EQ(code, 1) << out;
  EXPECT_THAT(out, HasSubstr("Cannot listen on 127.0.0.1:" + std::to_string(management) +
                             " (server.managementPort): the port is already in use"));
  EXPECT_THAT(out, HasSubstr("Set 'server.managementPort' to a free port"));
  // The second process released its own data port when it gave up.
  EXPECT_EQ(LiveStatus(port_b), -1);

  ASSERT_TRUE(first.running()) << first.Log();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(LiveStatus(management), 200) << "probe " << i;
  first.Kill(SIGTERM);
  EXPECT_EQ(first.Wait(20s), std::optional<int>(0)) << first.Log();
}

}  // namespace
}  // namespace queuebox
