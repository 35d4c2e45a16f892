// The README's webhook quick start with the real binary: examples/webhook-quickstart.yml on the
// embedded SQLite default, POST /inbox/stripe twice (202 with the message id, then 200
// duplicate), and the one stored row delivered by the inbox relay and the outbox relay to a real
// HTTP receiver on loopback. Only the ports and the database file are mapped (QUEUEBOX_*).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "testing/http_receiver.h"
#include "testing/process.h"
#include "testing/source_dir.h"

namespace queuebox {
namespace {

using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::HttpReceiver;
using testing::ReceivedRequest;
using testing::RunCommand;
using testing::TempDir;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);

bool WaitFor(const std::function<bool()>& cond, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return cond();
}

TEST(WebhookQuickStartTest, PostTwiceThenDelivered) {
  TempDir dir;
  HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  const int port = testing::UnusedLoopbackPort();
  std::map<std::string, std::string> env = {
      {"QUEUEBOX_DATABASE_URL", dir.File("webhooks.db")},
      {"QUEUEBOX_SERVER_HTTPPORT", std::to_string(port)},
      {"QUEUEBOX_DESTINATIONS_RECEIVER_BASEURL", receiver.BaseUrl()},
      {"QUEUEBOX_CPP_DEFAULT_CONFIG_FILE", dir.File("none.yml")}};
  const std::string config = std::string(QUEUEBOX_SOURCE_DIR) + "/examples/webhook-quickstart.yml";
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"--config", config, "check-config"}, env, &out), 0) << out;
  ChildProcess relay(kBinary, {"--config", config, "run"}, env, dir.File("relay.log"));
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(10);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = c.Get("/health/ready");
        return r && r->status == 200;
      },
      30s))
      << relay.Log();

  const std::string event = R"({"id":"evt_1","type":"invoice.paid","amount":4200})";
  auto first = c.Post("/inbox/stripe", event, "application/json");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 202);
  const std::string id = nlohmann::json::parse(first->body).value("messageId", "");
  EXPECT_EQ(id.size(), 36u) << first->body;
  EXPECT_FALSE(first->get_header_value("X-Correlation-Id").empty());
  auto second = c.Post("/inbox/stripe", event, "application/json");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(second->body, R"({"status":"duplicate"})");

  ASSERT_TRUE(WaitFor([&] { return receiver.RequestCount() >= 1; }, 30s)) << relay.Log();
  ReceivedRequest r = receiver.Requests()[0];
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/webhook");
  EXPECT_EQ(r.Header("X-Topic"), "invoice.paid");
  EXPECT_EQ(r.Header("x-inbox-id"), id);
  EXPECT_EQ(r.Header("x-source"), "stripe");
  EXPECT_EQ(r.Header("x-idempotency-key"), "evt_1");
  EXPECT_EQ(r.Header("X-Correlation-Id"), first->get_header_value("X-Correlation-Id"));
  EXPECT_EQ(nlohmann::json::parse(r.body), nlohmann::json::parse(event));

  std::string metrics;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto m = c.Get("/metrics");
        metrics = m ? m->body : "";
        return metrics.find(R"(queuebox_inbox_messages_total{status="forwarded"} 1)") !=
               std::string::npos;
      },
      30s))
      << metrics;
  EXPECT_THAT(metrics, HasSubstr(R"(queuebox_inbox_messages_total{status="new"} 1)"));
  EXPECT_THAT(metrics, HasSubstr(R"(queuebox_inbox_messages_total{status="duplicate"} 1)"));
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  EXPECT_EQ(receiver.RequestCount(), 1u);
}

}  // namespace
}  // namespace queuebox
