// Brokers that are not up yet (issue 13 item 4): the queuebox binary starts with a NATS and a
// RabbitMQ destination whose brokers do not listen yet, reports each not ready, keeps delivering
// to the HTTP destination, and delivers the broker rows once each broker appears (rows meanwhile
// wait released behind each destination's open circuit breaker, spending no attempt). The NATS
// broker is a private nats-server started later on the configured port; RabbitMQ appears as a
// loopback port that starts forwarding to the shared RabbitMQ later (the shared servers are never
// stopped).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "testing/amqp_queue.h"
#include "testing/broker_servers.h"
#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"
#include "testing/tcp_forwarder.h"

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
    std::this_thread::sleep_for(100ms);
  }
  return cond();
}

// /health/ready: {status code, body}.
std::pair<int, nlohmann::json> Ready(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(10);
  auto r = c.Get("/health/ready");
  if (!r) return {-1, nullptr};
  return {r->status, nlohmann::json::parse(r->body, nullptr, false)};
}

std::string ComponentStatus(int port, const std::string& component) {
  auto [code, body] = Ready(port);
  if (code < 0 || !body.is_object() || !body.contains("components")) return "";
  return body["components"].value(component, nlohmann::json::object()).value("status", "");
}

int64_t Count(testing::TempPgDatabase& pg, const std::string& where) {
  return std::stoll(pg.Scalar("SELECT count(*) FROM outbox WHERE " + where));
}

#if defined(QB_WITH_NATS) && defined(QB_WITH_RABBITMQ)
TEST(BrokerOutageE2ETest, BrokersNotUpAtStartAreWaitedFor) {
  std::string admin_url, amqp_url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", admin_url);
  QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", amqp_url);
  testing::TempPgDatabase pg(admin_url);
  HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  const std::string tag = std::to_string(::getpid());
  const std::string exchange = "qb.outage." + tag, queue = exchange + ".q";
  testing::AmqpQueues amqp(amqp_url);
  amqp.Bind(exchange, queue);

  const int nats_port = testing::UnusedLoopbackPort();
  const int amqp_port = testing::UnusedLoopbackPort();  // forwards to RabbitMQ later
  const int http_port = testing::UnusedLoopbackPort();
  TempDir dir;
  dir.Write("q.yml", "database:\n  url: " + pg.url() +
                         "\n  startupTimeoutMs: 20000\n"
                         "server:\n  address: 127.0.0.1\n  httpPort: " +
                         std::to_string(http_port) +
                         "\noutbox:\n  pollIntervalMs: 50\n  retryBaseDelayMs: 100\n"
                         "routes:\n"
                         "  - {topicPattern: 'web.**', destination: web}\n"
                         "  - {topicPattern: 'nats.**', destination: events}\n"
                         "  - {topicPattern: 'amqp.**', destination: exchange}\n"
                         "destinations:\n"
                         "  web:\n    type: http\n    baseUrl: " +
                         receiver.BaseUrl() +
                         "\n  events:\n    type: nats\n    servers: nats://127.0.0.1:" +
                         std::to_string(nats_port) + "\n    subject: 'qbout" + tag +
                         ".{{ topic }}'\n    timeoutMs: 5000\n"
                         "  exchange:\n    type: rabbitmq\n    url: amqp://guest:guest@127.0.0.1:" +
                         std::to_string(amqp_port) + "/\n    exchange: " + exchange + "\n");
  std::string out;
  ASSERT_EQ(testing::RunCommand(kBinary, {"migrate", "--config", dir.File("q.yml")}, {}, &out), 0)
      << out;
  auto insert = [&](const std::string& topic, int n) {
    for (int i = 0; i < n; ++i) {
      // One key per topic: a key's rows go in order, so a key shared with the broker rows would
      // hold the HTTP rows behind them. max_attempts is the row's (outbox.maxAttempts stamps
      // only rows QueueBox creates): room for the retries of the outage.
      pg.Exec("INSERT INTO outbox (topic, key, payload, max_attempts) VALUES ('" + topic + "', '" +
              topic + "', '{\"i\":" + std::to_string(i) + "}', 40)");
    }
  };
  insert("nats.order", 3);
  insert("amqp.order", 3);

  ChildProcess relay(kBinary, {"run", "--config", dir.File("q.yml")}, {}, dir.File("relay.log"));
  // It starts, and says which destinations are not ready.
  ASSERT_TRUE(WaitFor([&] { return Ready(http_port).first == 503; }, 30s)) << relay.Log();
  EXPECT_EQ(ComponentStatus(http_port, "nats.events"), "down");
  EXPECT_EQ(ComponentStatus(http_port, "rabbitmq.exchange"), "down");
  EXPECT_EQ(ComponentStatus(http_port, "database"), "up");
  EXPECT_EQ(ComponentStatus(http_port, "outbox-poller"), "up");
  // The HTTP destination keeps flowing. The brokers' outages spend no attempt: their rows are
  // released and their circuit breakers open.
  insert("web.order", 3);
  ASSERT_TRUE(receiver.WaitForRequests(3, 30s)) << relay.Log();
  ASSERT_TRUE(WaitFor([&] { return ComponentStatus(http_port, "circuit.events") == "down"; }, 30s))
      << relay.Log();
  ASSERT_TRUE(
      WaitFor([&] { return ComponentStatus(http_port, "circuit.exchange") == "down"; }, 30s))
      << relay.Log();
  EXPECT_EQ(Count(pg, "topic LIKE 'amqp.%' AND attempt > 0"), 0);
  EXPECT_EQ(Count(pg, "topic LIKE 'nats.%' AND attempt > 0"), 0);
  EXPECT_EQ(ComponentStatus(http_port, "circuit.web"), "up");
  EXPECT_THAT(
      pg.Scalar("SELECT max(last_error) FROM outbox WHERE topic LIKE 'nats.%'"),
      ::testing::AnyOf(HasSubstr("is not connected yet"), HasSubstr("circuit breaker is open")));
  EXPECT_EQ(Count(pg, "state = 'dead'"), 0);
  EXPECT_TRUE(relay.running());

  // NATS comes up: its rows go, RabbitMQ's still wait.
  testing::PrivateNatsServer nats(nats_port);
  ASSERT_TRUE(nats.Start()) << nats.Log();
  testing::JetStreamTestStream stream(nats.url(), "QBOUT" + tag, "qbout" + tag);
  ASSERT_TRUE(
      WaitFor([&] { return Count(pg, "topic LIKE 'nats.%' AND state = 'sent'") == 3; }, 90s))
      << relay.Log();
  EXPECT_EQ(ComponentStatus(http_port, "nats.events"), "up");
  EXPECT_EQ(ComponentStatus(http_port, "rabbitmq.exchange"), "down");
  EXPECT_EQ(Count(pg, "topic LIKE 'amqp.%' AND state = 'sent'"), 0);
  ASSERT_EQ(stream.Count(), 3u);
  for (uint64_t seq = 1; seq <= 3; ++seq) {  // in key order
    EXPECT_EQ(stream.Get(seq).body, "{\"i\": " + std::to_string(seq - 1) + "}");
  }

  // RabbitMQ comes up.
  testing::TcpForwarder forwarder(amqp_port, amqp.port());
  ASSERT_TRUE(forwarder.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return Count(pg, "state = 'sent'") == 9; }, 90s)) << relay.Log();
  EXPECT_TRUE(WaitFor([&] { return Ready(http_port).first == 200; }, 30s)) << relay.Log();
  // Counted on a fresh connection: the first one sat idle through the outage.
  EXPECT_TRUE(WaitFor([&] { return testing::AmqpQueues(amqp_url).Messages(queue) == 3; }, 30s));
  EXPECT_EQ(Count(pg, "state = 'dead'"), 0);
  EXPECT_EQ(Count(pg, "topic LIKE 'amqp.%' AND attempt > 0"), 0);
  EXPECT_EQ(Count(pg, "topic LIKE 'nats.%' AND attempt > 0"), 0);

  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  testing::AmqpQueues(amqp_url).Delete(exchange, queue);
}
#endif

}  // namespace
}  // namespace queuebox
