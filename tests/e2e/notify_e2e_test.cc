// End to end: the queuebox binary with outbox.notify.enabled on PostgreSQL delivers a new row
// long before its poll interval could fire, because the LISTEN/NOTIFY listener wakes the relay.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"

namespace queuebox {
namespace {

using testing::ChildProcess;
using testing::HttpReceiver;
using testing::TempDir;
using testing::TempPgDatabase;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);
// Far above the 2 s this test allows a delivery: only a wake-up can deliver in time.
constexpr int kPollIntervalMs = 30000;

TEST(NotifyE2ETest, ANewRowIsDeliveredBeforeThePollIntervalCouldFire) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
  TempPgDatabase pg(url);
  HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  TempDir dir;
  dir.Write("qb.yml", "database:\n  type: postgresql\n  url: " + pg.url() +
                          "\n  startupTimeoutMs: 20000\n"
                          "server:\n  address: 127.0.0.1\n  httpPort: " +
                          std::to_string(testing::UnusedLoopbackPort()) +
                          "\noutbox:\n  pollIntervalMs: " + std::to_string(kPollIntervalMs) +
                          "\n  notify:\n    enabled: true\n"
                          "routes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
                          "destinations:\n  receiver:\n    type: http\n    baseUrl: " +
                          receiver.BaseUrl() +
                          "\n    path: /events\n"
                          "logging:\n  format: json\n  level: info\n");
  ChildProcess relay(kBinary, {"--config", dir.File("qb.yml"), "run"}, {}, dir.File("qb.log"));

  // The listener's backend shows up once the relay migrated and started.
  auto listening = [&] {
    return pg.Scalar(
               "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
               "'queuebox-listener' AND datname = current_database()") == "1";
  };
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!listening() && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(relay.running()) << relay.Log();
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(listening()) << relay.Log();

  // A first row settles start-up: whichever cycle delivers it (the first poll, the LISTEN's
  // catch-up wake or the notification), afterwards the poll timer is 30 s away.
  pg.Exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{\"n\":1}')");
  ASSERT_TRUE(receiver.WaitForRequests(1, std::chrono::milliseconds(kPollIntervalMs + 10000)))
      << relay.Log();

  for (int n = 2; n <= 4; ++n) {
    pg.Exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{\"n\":" + std::to_string(n) +
            "}')");
    ASSERT_TRUE(receiver.WaitForRequests(static_cast<size_t>(n), 10s))
        << "row " << n << " was not delivered within 10 s; the poll interval is " << kPollIntervalMs
        << " ms\n"
        << relay.Log();
  }
  EXPECT_EQ(receiver.Requests()[3].body, "{\"n\": 4}");

  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(20s), std::optional<int>(0)) << relay.Log();
  EXPECT_NE(relay.Log().find("The LISTEN/NOTIFY wake-up is listening"), std::string::npos);
}

}  // namespace
}  // namespace queuebox
