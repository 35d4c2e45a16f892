// A rabbitmq source end to end with the queuebox binary (issue 15 item 1): a queue of the shared
// RabbitMQ → the inbox (PostgreSQL) → the inbox relay → the outbox → an HTTP receiver. The
// broker is not up when QueueBox starts, then goes away once more (a forwarder the test starts and
// cuts; the shared RabbitMQ is never stopped): the source's health component is down meanwhile and
// the messages published meanwhile arrive once it is back, each once.
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

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
    std::this_thread::sleep_for(50ms);
  }
  return cond();
}

// The status of one /health/ready component ("up", "down", or "" when absent).
std::string Component(int port, const std::string& name) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  c.set_read_timeout(10);
  auto r = c.Get("/health/ready");
  if (!r) return "";
  auto body = nlohmann::json::parse(r->body, nullptr, false);
  if (!body.is_object() || !body.contains("components")) return "";
  return body["components"].value(name, nlohmann::json::object()).value("status", "");
}

// The test's own connection: a durable queue (deleted after) and publishing to it.
class Queue {
 public:
  Queue(const std::string& url, std::string name) : name_(std::move(name)) {
    std::vector<char> buf(url.begin(), url.end());
    buf.push_back('\0');
    amqp_connection_info info;
    amqp_parse_url(buf.data(), &info);
    port_ = info.port;
    std::string vhost = *info.vhost ? info.vhost : "/";
    c_ = amqp_new_connection();
    EXPECT_EQ(amqp_socket_open(amqp_tcp_socket_new(c_), info.host, info.port), AMQP_STATUS_OK);
    EXPECT_EQ(amqp_login(c_, vhost.c_str(), 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, info.user,
                         info.password)
                  .reply_type,
              AMQP_RESPONSE_NORMAL);
    amqp_channel_open(c_, 1);
    amqp_queue_declare(c_, 1, amqp_cstring_bytes(name_.c_str()), 0, 1, 0, 0, amqp_empty_table);
    EXPECT_EQ(amqp_get_rpc_reply(c_).reply_type, AMQP_RESPONSE_NORMAL);
  }
  ~Queue() {
    amqp_queue_delete(c_, 1, amqp_cstring_bytes(name_.c_str()), 0, 0);
    amqp_connection_close(c_, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c_);
  }
  void Publish(const std::string& body, const std::string& message_id) {
    amqp_basic_properties_t props;
    std::memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_MESSAGE_ID_FLAG;
    props.delivery_mode = 2;
    props.message_id = amqp_cstring_bytes(message_id.c_str());
    ASSERT_EQ(amqp_basic_publish(c_, 1, amqp_empty_bytes, amqp_cstring_bytes(name_.c_str()), 0, 0,
                                 &props, amqp_cstring_bytes(body.c_str())),
              AMQP_STATUS_OK);
  }
  const std::string& name() const { return name_; }
  int port() const { return port_; }

 private:
  std::string name_;
  amqp_connection_state_t c_ = nullptr;
  int port_ = 0;
};

#if defined(QB_WITH_RABBITMQ)
TEST(RabbitmqSourceE2eTest, QueueToInboxToHttpAndBackAfterTheBrokerWasAway) {
  std::string pg_url, amqp_url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
  QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", amqp_url);
  testing::TempPgDatabase pg(pg_url);
  Queue queue(amqp_url, "qb.src.e2e." + std::to_string(::getpid()));
  HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  const int amqp_port = testing::UnusedLoopbackPort();
  std::string through = amqp_url;
  through.replace(through.rfind(':'), std::string::npos, ":" + std::to_string(amqp_port) + "/");

  TempDir dir;
  const int http_port = testing::UnusedLoopbackPort();
  dir.Write("queuebox.yml", R"(
server:
  address: 127.0.0.1
  httpPort: )" + std::to_string(http_port) +
                                R"(
database:
  url: ")" + pg.url() + R"("
inbox:
  relay:
    pollIntervalMs: 50
sources:
  orders:
    type: rabbitmq
    queueName: )" + queue.name() +
                                R"(
    connectionUrl: ")" + through +
                                R"("
    prefetchCount: 50
    eventTypePath: $.type
    topic: "orders.{{ eventType }}"
destinations:
  hook:
    type: http
    baseUrl: )" + receiver.BaseUrl() +
                                R"(
routes:
  - topicPattern: "orders.**"
    destination: hook
)");
  std::map<std::string, std::string> env = {{"QUEUEBOX_HTTP_BLOCKPRIVATEADDRESSES", "false"}};
  std::string out;
  ASSERT_EQ(testing::RunCommand(kBinary, {"check-config", "--config", dir.File("queuebox.yml")},
                                env, &out),
            0)
      << out;
  ASSERT_EQ(
      testing::RunCommand(kBinary, {"migrate", "--config", dir.File("queuebox.yml")}, env, &out), 0)
      << out;
  ChildProcess relay(kBinary, {"run", "--config", dir.File("queuebox.yml")}, env,
                     dir.File("relay.log"));
  // The broker is not up yet: QueueBox starts, the source reports down. The forwarder starts
  // after the child, which would otherwise inherit its listening socket.
  ASSERT_TRUE(WaitFor([&] { return Component(http_port, "rabbitmq.orders") == "down"; }, 30s))
      << relay.Log();
  auto forwarder = std::make_unique<testing::TcpForwarder>(amqp_port, queue.port());
  ASSERT_TRUE(forwarder->Start().ok());
  ASSERT_TRUE(WaitFor([&] { return Component(http_port, "rabbitmq.orders") == "up"; }, 60s))
      << relay.Log();

  for (int i = 0; i < 10; ++i) {
    queue.Publish(R"({"id":"o-)" + std::to_string(i) + R"(","type":"created"})",
                  "m-" + std::to_string(i));
  }
  ASSERT_TRUE(receiver.WaitForRequests(10, 30s)) << relay.Log();
  EXPECT_EQ(receiver.Requests()[0].Header("X-Topic"), "orders.created");
  EXPECT_EQ(receiver.Requests()[0].Header("x-source"), "orders");

  forwarder.reset();  // the broker goes away
  ASSERT_TRUE(WaitFor([&] { return Component(http_port, "rabbitmq.orders") == "down"; }, 30s))
      << relay.Log();
  for (int i = 10; i < 20; ++i) {
    queue.Publish(R"({"id":"o-)" + std::to_string(i) + R"(","type":"paid"})",
                  "m-" + std::to_string(i));
  }
  forwarder = std::make_unique<testing::TcpForwarder>(amqp_port, queue.port());
  Status back = forwarder->Start();
  ASSERT_TRUE(back.ok()) << back.ToString();
  ASSERT_TRUE(WaitFor([&] { return Component(http_port, "rabbitmq.orders") == "up"; }, 60s))
      << relay.Log();
  ASSERT_TRUE(receiver.WaitForRequests(20, 30s)) << relay.Log();

  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  std::set<std::string> keys;
  for (const auto& r : receiver.Requests()) keys.insert(r.Header("x-idempotency-key"));
  EXPECT_EQ(keys.size(), 20u);
  EXPECT_EQ(receiver.RequestCount(), 20u);
  EXPECT_EQ(pg.Scalar("SELECT count(*) FROM inbox WHERE state = 'processed'"), "20");
  EXPECT_THAT(relay.Log(), HasSubstr("RabbitMQ source cannot consume"));
  EXPECT_THAT(relay.Log(), ::testing::Not(HasSubstr("guest:guest")));
}
#endif  // QB_WITH_RABBITMQ

}  // namespace
}  // namespace queuebox
