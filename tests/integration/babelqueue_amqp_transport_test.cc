// babelqueue_amqp_transport_test.cc: OutboxRelay -> DestinationTransport -> the relay's rabbitmq
// destination -> a real RabbitMQ (QB_TEST_AMQP_URL, scripts/services.sh). A queue bound to the
// exchange receives the envelope bytes verbatim with the BabelQueue AMQP binding (manifest.json
// `rabbitmq.property_projection`): properties type, correlation_id, message_id, app_id,
// content_type, and natively typed headers x-schema-version, x-source-lang, x-attempts.
#ifdef QB_WITH_RABBITMQ
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "babelqueue/outbox.h"
#include "destinations/babelqueue_transport/destination_transport.h"
#include "destinations/rabbitmq/amqp_extension.h"
#include "destinations/rabbitmq/rabbitmq_destination.h"
#include "testing/amqp_queue.h"
#include "testing/broker_testing.h"
#include "testing/env.h"
#include "testing/source_dir.h"

namespace babelqueue {
namespace {

using ::queuebox::testing::AmqpText;
using ::testing::HasSubstr;

const std::string kSuiteDir = std::string(QUEUEBOX_SOURCE_DIR) + "/tests/conformance/babelqueue";

std::string ReadSuiteFile(const std::string& relative) {
  std::ifstream in(kSuiteDir + "/" + relative, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << kSuiteDir << "/" << relative;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One consumed AMQP message: body, the string properties that were set, and the headers as JSON
// (integers as numbers, strings as strings) with whether each integer arrived as an integer kind.
struct Delivery {
  std::string body;
  std::map<std::string, std::string> properties;
  Json headers = Json::object();
  std::map<std::string, bool> integer_kind;
};

Delivery ToDelivery(const amqp_message_t& message) {
  Delivery d;
  d.body = AmqpText(message.body);
  const amqp_basic_properties_t& p = message.properties;
  const std::pair<const char*, std::pair<amqp_flags_t, amqp_bytes_t>> props[] = {
      {"type", {AMQP_BASIC_TYPE_FLAG, p.type}},
      {"correlation_id", {AMQP_BASIC_CORRELATION_ID_FLAG, p.correlation_id}},
      {"message_id", {AMQP_BASIC_MESSAGE_ID_FLAG, p.message_id}},
      {"app_id", {AMQP_BASIC_APP_ID_FLAG, p.app_id}},
      {"content_type", {AMQP_BASIC_CONTENT_TYPE_FLAG, p.content_type}},
  };
  for (const auto& [name, flag_value] : props) {
    if (p._flags & flag_value.first) d.properties[name] = AmqpText(flag_value.second);
  }
  if (!(p._flags & AMQP_BASIC_HEADERS_FLAG)) return d;
  for (int i = 0; i < p.headers.num_entries; ++i) {
    const amqp_table_entry_t& e = p.headers.entries[i];
    const std::string key = AmqpText(e.key);
    switch (e.value.kind) {
      case AMQP_FIELD_KIND_UTF8:
      case AMQP_FIELD_KIND_BYTES:
        d.headers[key] = AmqpText(e.value.value.bytes);
        d.integer_kind[key] = false;
        break;
      case AMQP_FIELD_KIND_I32:
        d.headers[key] = e.value.value.i32;
        d.integer_kind[key] = true;
        break;
      case AMQP_FIELD_KIND_I64:
        d.headers[key] = e.value.value.i64;
        d.integer_kind[key] = true;
        break;
      default:
        d.headers[key] = "(field kind " + std::to_string(e.value.kind) + ")";
        d.integer_kind[key] = false;
    }
  }
  return d;
}

// A consumer on its own connection: an exclusive server-named queue bound to `exchange` with "#".
class BoundQueue {
 public:
  BoundQueue(const std::string& url, const std::string& exchange) {
    conn_ = queuebox::testing::OpenAmqp(url);
    const std::string queue = queuebox::testing::DeclareExchangeAndQueue(conn_, exchange);
    amqp_queue_bind(conn_, 1, amqp_cstring_bytes(queue.c_str()),
                    amqp_cstring_bytes(exchange.c_str()), amqp_cstring_bytes("#"),
                    amqp_empty_table);
    Expect("queue.bind");
    amqp_basic_consume(conn_, 1, amqp_cstring_bytes(queue.c_str()), amqp_empty_bytes, 0, 1, 0,
                       amqp_empty_table);
    Expect("basic.consume");
  }
  ~BoundQueue() {
    amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(conn_);
  }

  // The next delivery, waiting at most 10 s; nullopt when none came.
  std::optional<Delivery> Next() {
    amqp_maybe_release_buffers(conn_);
    amqp_envelope_t envelope;
    timeval wait{10, 0};
    if (amqp_consume_message(conn_, &envelope, &wait, 0).reply_type != AMQP_RESPONSE_NORMAL) {
      return std::nullopt;
    }
    Delivery d = ToDelivery(envelope.message);
    amqp_destroy_envelope(&envelope);
    return d;
  }

 private:
  void Expect(const char* what) { queuebox::testing::ExpectAmqpOk(conn_, what); }
  amqp_connection_state_t conn_;
};

class AmqpTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", url_);
    static std::atomic<int> n{0};
    exchange_ = "bq.test." + std::to_string(::getpid()) + "." + std::to_string(++n);
    queuebox::RabbitMqDestinationSettings settings;
    settings.name = "bq-rabbit";
    settings.url = url_;
    settings.exchange = exchange_;
    auto destination = queuebox::RabbitMqDestination::Create(std::move(settings));
    ASSERT_TRUE(destination.ok()) << destination.status().message();
    auto transport = DestinationTransport::Create(std::move(*destination));
    ASSERT_TRUE(transport.ok()) << transport.status().message();
    transport_ = std::move(*transport);
    options_.sleeper = [this](int64_t ms) { sleeps_.push_back(ms); };
  }

  std::string url_, exchange_;
  std::unique_ptr<DestinationTransport> transport_;
  InMemoryOutboxStore store_;
  RelayOptions options_;
  std::vector<int64_t> sleeps_;
};

// The manifest's own fixture and expectations: every listed property and header, typed.
TEST_F(AmqpTransportTest, TheManifestFixtureCarriesTheManifestProjection) {
  const Json manifest = Json::parse(ReadSuiteFile("manifest.json"));
  const Json& projection = manifest["rabbitmq"]["property_projection"];
  const std::string fixture = ReadSuiteFile(projection["envelope_file"].get<std::string>());
  BoundQueue consumer(url_, exchange_);
  ASSERT_TRUE(store_.Save(fixture, "orders").ok());  // stored verbatim (pretty-printed bytes)

  RelayResult r = OutboxRelay(*transport_, store_, options_).Drain();
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.published, 1);
  EXPECT_EQ(r.failed, 0);

  std::optional<Delivery> got = consumer.Next();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->body, fixture);  // byte for byte, never re-encoded
  ASSERT_FALSE(projection["properties"].empty());
  for (const auto& [name, value] : projection["properties"].items()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(got->properties[name], value.get<std::string>());
  }
  ASSERT_FALSE(projection["headers"].empty());
  for (const auto& [name, value] : projection["headers"].items()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(got->headers[name], value);
    EXPECT_EQ(got->integer_kind[name], value.is_number_integer());  // native types, not strings
  }
  EXPECT_TRUE(sleeps_.empty());
}

// Envelopes the C++ writer makes: the body is the encoding and the projection follows it.
TEST_F(AmqpTransportTest, WrittenEnvelopesArriveVerbatimWithTheirProperties) {
  Json data = Json::object();
  data["title"] = "Café — ☕ </b>";
  data["ratio"] = 1.0;
  Result<Envelope> first =
      Make("urn:babel:orders:created", data, {.queue = "orders", .trace_id = "trace-amqp-1"});
  Result<Envelope> second = Make("urn:babel:billing:charged", Json::object(),
                                 {.queue = "billing", .trace_id = "trace-amqp-2"});
  ASSERT_TRUE(first.ok() && second.ok());
  BoundQueue consumer(url_, exchange_);
  ASSERT_TRUE(Outbox(store_).Write(*first).ok());
  ASSERT_TRUE(Outbox(store_).Write(*second).ok());

  RelayResult r = OutboxRelay(*transport_, store_, options_).Drain();
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.published, 2);
  EXPECT_EQ(store_.PendingCount(), 0);

  const Envelope* sent[] = {&*first, &*second};
  for (const Envelope* env : sent) {
    SCOPED_TRACE(env->job);
    std::optional<Delivery> got = consumer.Next();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->body, *Encode(*env));
    EXPECT_EQ(got->properties["type"], env->job);
    EXPECT_EQ(got->properties["correlation_id"], env->trace_id);
    EXPECT_EQ(got->properties["message_id"], env->meta.id);
    EXPECT_EQ(got->properties["app_id"], "babelqueue");
    EXPECT_EQ(got->properties["content_type"], "application/json");
    EXPECT_EQ(got->headers["x-schema-version"], 1);
    EXPECT_TRUE(got->integer_kind["x-schema-version"]);
    EXPECT_EQ(got->headers["x-source-lang"], "cpp");
    EXPECT_EQ(got->headers["x-attempts"], 0);
    EXPECT_TRUE(got->integer_kind["x-attempts"]);
    EXPECT_EQ(got->headers["x-topic"], env->meta.queue);  // the destination's own header stays
    EXPECT_FALSE(got->headers.contains("bq-job"));  // the Kafka projection is not sent to AMQP
  }
}

// The destination side of the seam: a property is applied, one it cannot set is a permanent
// failure of that message only.
TEST_F(AmqpTransportTest, AnUnknownAmqpPropertyIsRejected) {
  queuebox::RabbitMqDestinationSettings settings;
  settings.name = "bq-rabbit-direct";
  settings.url = url_;
  settings.exchange = exchange_;
  auto destination = queuebox::RabbitMqDestination::Create(std::move(settings));
  ASSERT_TRUE(destination.ok());
  ASSERT_TRUE((*destination)->Start().ok());
  BoundQueue consumer(url_, exchange_);
  queuebox::OutboxRow row;
  row.id = "row-1";
  row.topic = "orders";
  row.payload = "{}";
  queuebox::AmqpExtension good_amqp;
  good_amqp.properties = {{"type", "urn:x"}};
  queuebox::OutboundMessage good{&row, std::nullopt, &good_amqp};
  queuebox::AmqpExtension bad_amqp;
  bad_amqp.properties = {{"priority", "5"}};
  queuebox::OutboundMessage bad{&row, std::nullopt, &bad_amqp};
  queuebox::OutboundMessage batch[] = {good, bad};
  queuebox::testing::CollectingSink sink;
  (*destination)->PublishBatch(batch, sink);
  EXPECT_EQ(sink.at(0).kind, queuebox::Outcome::Kind::kDelivered) << sink.at(0).error;
  EXPECT_EQ(sink.at(1).kind, queuebox::Outcome::Kind::kReject);
  EXPECT_THAT(sink.at(1).error, HasSubstr("unknown AMQP property 'priority'"));
  std::optional<Delivery> got = consumer.Next();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->properties["type"], "urn:x");
  EXPECT_EQ(got->properties["message_id"], "row-1");  // not overridden: the row id
  (*destination)->Stop();
}

}  // namespace
}  // namespace babelqueue
#endif  // QB_WITH_RABBITMQ
