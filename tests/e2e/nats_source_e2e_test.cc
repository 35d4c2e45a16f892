// A nats source end to end with the queuebox binary (issue 15 item 3 with issue 16's source
// side): a stream of the shared nats-server → the inbox (PostgreSQL) → the inbox relay → the
// outbox → an HTTP receiver, with key expressions and a source transform (onError: Dead). A good
// message is stored transformed under the expression's key and delivered; a message whose
// transform fails is stored dead with its original payload, acknowledged, never forwarded, and
// counted as transform_failed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "testing/broker_servers.h"
#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"

namespace queuebox {
namespace {

using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::HttpReceiver;
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

std::string Get(int port, const std::string& path) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(10);
  auto r = c.Get(path);
  return r ? r->body : "";
}

#if defined(QB_WITH_NATS)
TEST(NatsSourceE2eTest, KeyExpressionsAndATransformThatDeadLettersTheOriginal) {
  std::string pg_url, nats_url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
  QB_REQUIRE_SERVER_ENV("QB_TEST_NATS_URL", nats_url);
  testing::TempPgDatabase pg(pg_url);
  const std::string tag = std::to_string(::getpid());
  const std::string stream_name = "QBE2E_" + tag, prefix = "qbe2e" + tag;
  testing::JetStreamTestStream stream(nats_url, stream_name, prefix);
  HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());

  TempDir dir;
  const int http_port = testing::UnusedLoopbackPort();
  dir.Write("queuebox.yml", "server:\n  address: 127.0.0.1\n  httpPort: " +
                                std::to_string(http_port) + "\ndatabase:\n  url: \"" + pg.url() +
                                "\"\ninbox:\n  relay:\n    pollIntervalMs: 50\n"
                                "sources:\n  orders:\n    type: nats\n    servers: " +
                                nats_url + "\n    stream: " + stream_name +
                                "\n    durable: queuebox-orders\n    filterSubject: \"" + prefix +
                                ".>\"\n"
                                "    idempotencyKeyExpression: 'order.ref & \"-\" & "
                                "$string(order.version)'\n"
                                "    eventTypeExpression: '\"order.\" & status'\n"
                                "    topic: \"orders.{{ eventType }}\"\n"
                                "    transform:\n"
                                "      expression: '{\"ref\": order.ref, \"cents\": "
                                "$number(order.total) * 100}'\n"
                                "      onError: Dead\n"
                                "destinations:\n  hook:\n    type: http\n    baseUrl: " +
                                receiver.BaseUrl() +
                                "\nroutes:\n  - topicPattern: \"orders.**\"\n"
                                "    destination: hook\n");
  std::map<std::string, std::string> env = {{"QUEUEBOX_HTTP_BLOCKPRIVATEADDRESSES", "false"}};
  std::string out;
  int checked = testing::RunCommand(kBinary, {"check-config", "--config", dir.File("queuebox.yml")},
                                    env, &out);
  if (out.find("no JSONata transforms") != std::string::npos) {
    GTEST_SKIP() << "this build has no JSONata transforms";
  }
  ASSERT_EQ(checked, 0) << out;
  ASSERT_EQ(
      testing::RunCommand(kBinary, {"migrate", "--config", dir.File("queuebox.yml")}, env, &out), 0)
      << out;
  ChildProcess relay(kBinary, {"run", "--config", dir.File("queuebox.yml")}, env,
                     dir.File("relay.log"));
  ASSERT_TRUE(WaitFor(
      [&] {
        return Get(http_port, "/health/ready").find(R"("nats.orders":{"status":"up"})") !=
               std::string::npos;
      },
      30s))
      << relay.Log();

  // The bad one first: once the good one (later in the stream) is delivered, both were handled.
  jsCtx* js = nullptr;
  ASSERT_EQ(natsConnection_JetStream(&js, stream.nc(), nullptr), NATS_OK);
  const std::string bad = R"({"order":{"ref":"B1","version":1,"total":"abc"},"status":"paid"})";
  const std::string good = R"({"order":{"ref":"A1","version":2,"total":"12.5"},"status":"paid"})";
  for (const std::string& body : {bad, good}) {
    jsErrCode jerr;
    ASSERT_EQ(js_Publish(nullptr, js, (prefix + ".orders").c_str(), body.data(),
                         static_cast<int>(body.size()), nullptr, &jerr),
              NATS_OK);
  }
  ASSERT_TRUE(receiver.WaitForRequests(1, 60s)) << relay.Log();
  testing::ReceivedRequest r = receiver.Requests()[0];
  EXPECT_EQ(r.Header("X-Topic"), "orders.order.paid");
  EXPECT_EQ(r.Header("x-source"), "orders");
  EXPECT_EQ(r.Header("x-idempotency-key"), "A1-2");
  EXPECT_EQ(nlohmann::json::parse(r.body), nlohmann::json::parse(R"({"ref":"A1","cents":1250})"));

  auto rows = pg.Query(
      "SELECT idempotency_key, state, event_type, payload::text, coalesce(last_error, '') FROM "
      "inbox ORDER BY created_at");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0], "B1-1");
  EXPECT_EQ(rows[0][1], "dead");
  EXPECT_EQ(nlohmann::json::parse(rows[0][3]), nlohmann::json::parse(bad));  // the original
  EXPECT_THAT(rows[0][4], ::testing::StartsWith("Transform failed: "));
  EXPECT_EQ(rows[1][0], "A1-2");
  EXPECT_EQ(rows[1][2], "order.paid");
  EXPECT_EQ(nlohmann::json::parse(rows[1][3]),
            nlohmann::json::parse(R"({"ref":"A1","cents":1250})"));
  EXPECT_THAT(Get(http_port, "/metrics"),
              HasSubstr(R"(queuebox_inbox_rejections_total{reason="transform_failed"} 1)"));
  // Both acknowledged (the ack follows the commit, so it may trail the delivery a little).
  auto acked = [&] {
    jsConsumerInfo* ci = nullptr;
    jsErrCode jerr;
    if (js_GetConsumerInfo(&ci, js, stream_name.c_str(), "queuebox-orders", nullptr, &jerr) !=
        NATS_OK) {
      return false;
    }
    bool done = ci->NumAckPending == 0 && ci->NumPending == 0;
    jsConsumerInfo_Destroy(ci);
    return done;
  };
  EXPECT_TRUE(WaitFor(acked, 30s));
  jsCtx_Destroy(js);

  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  EXPECT_EQ(receiver.RequestCount(), 1u);  // the dead row was never forwarded
  EXPECT_EQ(pg.Scalar("SELECT state FROM inbox WHERE idempotency_key = 'B1-1'"), "dead");
}
#endif  // QB_WITH_NATS

}  // namespace
}  // namespace queuebox
