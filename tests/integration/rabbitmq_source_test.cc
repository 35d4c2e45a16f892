// The rabbitmq source (issue 15 items 1, 4, 5) against the shared rabbitmq-server
// (QB_TEST_AMQP_URL) and a real inbox store (SQLite, PostgreSQL): every test publishes to a queue
// of its own, runs CreateRabbitmqSource, and asserts what the inbox holds and what is left in the
// queue. Acknowledgement is checked by stopping the source and counting the queue: a delivery
// that was not acked goes back to the queue when the consumer's connection closes.
//
// The broker "restart" and the database outage go through a TcpForwarder the test cuts (the
// shared servers are never stopped).
#ifdef QB_WITH_RABBITMQ
#include "sources/rabbitmq/rabbitmq_source.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "admin/metrics.h"
#include "contract/store_test_support.h"
#include "core/log.h"
#include "sources/rabbitmq/amqp_headers.h"
#include "testing/amqp_queue.h"
#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/log_capture.h"
#include "testing/tcp_forwarder.h"

namespace queuebox {
namespace {

using nlohmann::json;
using ::queuebox::testing::LogCapture;
using sources::BrokerSource;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

std::string DialectName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

bool WaitFor(const std::function<bool()>& cond, std::chrono::seconds timeout = 30s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return cond();
}

amqp_bytes_t Bytes(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

// One AMQP header value of a test message.
struct Field {
  std::string name;
  amqp_field_value_t value;
};
Field Str(const std::string& name, const std::string& value) {
  Field f{name, {}};
  f.value.kind = AMQP_FIELD_KIND_UTF8;
  f.value.value.bytes = Bytes(value);  // the caller keeps `value` alive
  return f;
}

// What a test message carries besides its body.
struct Props {
  std::optional<std::string> message_id, correlation_id;
  std::optional<uint64_t> timestamp;  // seconds
  std::vector<Field> headers;
};

// The test's own connection to the shared RabbitMQ: a durable queue of its own (deleted after),
// publishing to it through the default exchange, counting it.
class TestQueue {
 public:
  TestQueue(const std::string& url, std::string queue) : queue_(std::move(queue)) {
    c_ = testing::OpenAmqp(url, &port_);
    EXPECT_EQ(amqp_get_rpc_reply(c_).reply_type, AMQP_RESPONSE_NORMAL);
  }
  ~TestQueue() {
    amqp_queue_delete(c_, 1, amqp_cstring_bytes(queue_.c_str()), 0, 0);
    amqp_channel_close(c_, 1, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c_, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c_);
  }
  void Declare() {
    amqp_queue_declare(c_, 1, amqp_cstring_bytes(queue_.c_str()), 0, 1, 0, 0, amqp_empty_table);
    ASSERT_EQ(amqp_get_rpc_reply(c_).reply_type, AMQP_RESPONSE_NORMAL);
  }
  void Publish(const std::string& body, const Props& p = {}) {
    amqp_basic_properties_t props;
    std::memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    props.delivery_mode = 2;
    if (p.message_id) {
      props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
      props.message_id = Bytes(*p.message_id);
    }
    if (p.correlation_id) {
      props._flags |= AMQP_BASIC_CORRELATION_ID_FLAG;
      props.correlation_id = Bytes(*p.correlation_id);
    }
    if (p.timestamp) {
      props._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
      props.timestamp = *p.timestamp;
    }
    std::vector<amqp_table_entry_t> entries;
    for (const Field& f : p.headers) {
      amqp_table_entry_t e;
      e.key = Bytes(f.name);
      e.value = f.value;
      entries.push_back(e);
    }
    if (!entries.empty()) {
      props._flags |= AMQP_BASIC_HEADERS_FLAG;
      props.headers.num_entries = static_cast<int>(entries.size());
      props.headers.entries = entries.data();
    }
    ASSERT_EQ(amqp_basic_publish(c_, 1, amqp_empty_bytes, amqp_cstring_bytes(queue_.c_str()), 0, 0,
                                 &props, Bytes(body)),
              AMQP_STATUS_OK);
  }
  void Delete() {
    amqp_queue_delete(c_, 1, amqp_cstring_bytes(queue_.c_str()), 0, 0);
    ASSERT_EQ(amqp_get_rpc_reply(c_).reply_type, AMQP_RESPONSE_NORMAL);
  }
  // Ready (not delivered, or delivered and given back) messages; -1 when the queue is missing.
  int64_t Ready() { return Count().first; }
  int64_t Consumers() { return Count().second; }
  const std::string& name() const { return queue_; }
  int port() const { return port_; }

 private:
  std::pair<int64_t, int64_t> Count() {
    // A passive declare of a missing queue closes the channel: reopen it for the next call.
    amqp_queue_declare_ok_t* ok =
        amqp_queue_declare(c_, 1, amqp_cstring_bytes(queue_.c_str()), 1, 1, 0, 0, amqp_empty_table);
    if (ok == nullptr) {
      amqp_channel_close_ok_t close_ok{};
      amqp_send_method(c_, 1, AMQP_CHANNEL_CLOSE_OK_METHOD, &close_ok);
      amqp_channel_open(c_, 1);
      EXPECT_EQ(amqp_get_rpc_reply(c_).reply_type, AMQP_RESPONSE_NORMAL);
      return {-1, -1};
    }
    return {ok->message_count, ok->consumer_count};
  }
  std::string queue_;
  amqp_connection_state_t c_ = nullptr;
  int port_ = 0;
};

std::string UniqueQueue() {
  static std::atomic<int> n{0};
  return "qb.src.test." + std::to_string(::getpid()) + "." + std::to_string(++n);
}

class RabbitmqSourceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", url_);
    std::string pg_url;
    if (GetParam() == "postgresql") QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
    db_ = std::make_unique<testing::StoreDb>(GetParam());
    db_->Create(pg_url);
    store_ = db_->Open();
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->Migrate(std::nullopt).ok());
    queue_ = std::make_unique<TestQueue>(url_, UniqueQueue());
    queue_->Declare();
  }
  void TearDown() override {
    for (auto& s : sources_) s->Stop();
    sources_.clear();
    queue_.reset();
    store_.reset();
  }

  RabbitmqSourceSettings Settings(const std::string& name = "orders") {
    RabbitmqSourceSettings s;
    s.name = name;
    s.queue_name = queue_->name();
    s.connection_url = url_;
    return s;
  }
  BrokerSource* Start(RabbitmqSourceSettings s) {
    sources::BrokerSourceContext ctx;
    ctx.intake = store_->inbox();
    ctx.observer = &metrics_;
    auto made = sources::CreateRabbitmqSource(std::move(s), ctx);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    if (!made.ok()) return nullptr;
    Status started = (*made)->Start();
    EXPECT_TRUE(started.ok()) << started.ToString();
    sources_.push_back(std::move(made).value());
    return sources_.back().get();
  }
  // Stops every source: what they did not ack is back in the queue afterwards.
  void StopAll() {
    for (auto& s : sources_) s->Stop();
  }
  int64_t Rows(const std::string& where = "1=1") {
    return std::stoll(db_->Scalar("SELECT COUNT(*) FROM inbox WHERE " + where));
  }
  std::string Col(const std::string& col, const std::string& key) {
    return db_->Scalar("SELECT " + col + " FROM inbox WHERE idempotency_key = '" + key + "'");
  }
  bool WaitRows(int64_t n) {
    return WaitFor([&] { return Rows() >= n; });
  }

  std::string url_;
  std::unique_ptr<testing::StoreDb> db_;
  std::unique_ptr<OutboxStore> store_;
  std::unique_ptr<TestQueue> queue_;
  Metrics metrics_;
  std::vector<std::unique_ptr<BrokerSource>> sources_;
};

TEST_P(RabbitmqSourceTest, StoresMessagesWithKeysHeadersCorrelationAndAcksThem) {
  std::string order = "order", eu = "eu-1";
  Props p;
  p.message_id = "amqp-1";
  p.correlation_id = "corr-prop";
  p.headers = {Str("x-event-type", order), Str("x-aggregate-id", eu)};
  queue_->Publish(R"({"id":"evt-1","n":1})", p);
  Props q;
  q.headers = {Str("X-Correlation-Id", eu)};
  q.correlation_id = "corr-prop";
  queue_->Publish(R"({"id":"evt-2"})", q);

  RabbitmqSourceSettings s = Settings();
  s.broker.event_type_from_header = true;
  s.broker.topic = "{{ eventType }}";
  BrokerSource* source = Start(s);
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->component(), "rabbitmq.orders");
  ASSERT_TRUE(WaitRows(2));
  EXPECT_TRUE(source->healthy());

  EXPECT_EQ(Col("source", "evt-1"), "orders");
  EXPECT_EQ(Col("state", "evt-1"), "pending");
  EXPECT_EQ(Col("event_type", "evt-1"), "order");
  EXPECT_EQ(Col("aggregate_id", "evt-1"), "eu-1");
  EXPECT_EQ(Col("correlation_id", "evt-1"), "corr-prop");  // the AMQP property
  EXPECT_EQ(Col("correlation_id", "evt-2"), "eu-1");       // the header wins over it
  json headers = json::parse(Col("headers", "evt-1"));
  EXPECT_EQ(headers.value("x-event-type", ""), "order");
  EXPECT_EQ(json::parse(Col("payload", "evt-1")), json::parse(R"({"id":"evt-1","n":1})"));

  StopAll();
  EXPECT_EQ(queue_->Ready(), 0);  // both acked
  EXPECT_THAT(metrics_.Render(), HasSubstr(R"(queuebox_inbox_messages_total{status="new"} 2)"));
}

// Idempotency key precedence (§9.4): header → path ($.id) → message_id → sha256 of the body.
TEST_P(RabbitmqSourceTest, KeyPrecedenceHeaderPathMessageIdDigest) {
  std::string hdr = "from-header";
  Props with_header;
  with_header.headers = {Str("X-Idempotency-Key", hdr)};
  with_header.message_id = "mid-0";
  queue_->Publish(R"({"id":"path-0"})", with_header);
  Props with_id;
  with_id.message_id = "mid-1";
  queue_->Publish(R"({"id":"path-1"})", with_id);
  queue_->Publish(R"({"other":2})", with_id);
  queue_->Publish(R"({"other":3})");

  Start(Settings());
  ASSERT_TRUE(WaitRows(4));
  EXPECT_EQ(Rows("idempotency_key = 'from-header'"), 1);
  EXPECT_EQ(Rows("idempotency_key = 'path-1'"), 1);
  EXPECT_EQ(Rows("idempotency_key = 'mid-1'"), 1);
  EXPECT_EQ(Rows("idempotency_key LIKE 'sha256:%'"), 1);
  EXPECT_EQ(Rows("idempotency_key = 'mid-0'"), 0);
}

// attributeHeaders renames the key headers; without eventTypeFromHeader the event type header is
// not read.
TEST_P(RabbitmqSourceTest, AttributeHeadersRenameTheKeyHeaders) {
  std::string k = "k-1", a = "agg-9", t = "shipped";
  Props p;
  p.headers = {Str("my-key", k), Str("my-agg", a), Str("my-type", t)};
  queue_->Publish(R"({"id":"ignored"})", p);
  RabbitmqSourceSettings s = Settings();
  s.broker.attribute_headers.idempotency_key = "my-key";
  s.broker.attribute_headers.aggregate_id = "my-agg";
  s.broker.attribute_headers.event_type = "my-type";
  Start(s);
  ASSERT_TRUE(WaitRows(1));
  EXPECT_EQ(Col("aggregate_id", "k-1"), "agg-9");
  EXPECT_EQ(Col("event_type", "k-1"), "<null>");  // eventTypeFromHeader is false
}

// Header values of every AMQP type become strings in the stored headers.
TEST_P(RabbitmqSourceTest, HeaderValuesOfEveryTypeAreStoredAsStrings) {
  Props p;
  Field b{"flag", {}};
  b.value.kind = AMQP_FIELD_KIND_BOOLEAN;
  b.value.value.boolean = 1;
  Field i{"count", {}};
  i.value.kind = AMQP_FIELD_KIND_I64;
  i.value.value.i64 = -42;
  Field d{"ratio", {}};
  d.value.kind = AMQP_FIELD_KIND_F64;
  d.value.value.f64 = 0.25;
  Field ts{"sent", {}};
  ts.value.kind = AMQP_FIELD_KIND_TIMESTAMP;
  ts.value.value.u64 = 1767225600;  // 2026-01-01T00:00:00Z
  std::string bad("\xff\xfe", 2);
  Field raw{"raw", {}};
  raw.value.kind = AMQP_FIELD_KIND_BYTES;
  raw.value.value.bytes = Bytes(bad);
  amqp_table_entry_t inner[2];
  std::string inner_k1 = "a", inner_k2 = "b", inner_v = "x";
  inner[0].key = Bytes(inner_k1);
  inner[0].value.kind = AMQP_FIELD_KIND_I32;
  inner[0].value.value.i32 = 1;
  inner[1].key = Bytes(inner_k2);
  inner[1].value.kind = AMQP_FIELD_KIND_UTF8;
  inner[1].value.value.bytes = Bytes(inner_v);
  Field table{"nested", {}};
  table.value.kind = AMQP_FIELD_KIND_TABLE;
  table.value.value.table.num_entries = 2;
  table.value.value.table.entries = inner;
  amqp_field_value_t items[2];
  items[0].kind = AMQP_FIELD_KIND_BOOLEAN;
  items[0].value.boolean = 0;
  items[1].kind = AMQP_FIELD_KIND_I16;
  items[1].value.i16 = 7;
  Field array{"list", {}};
  array.value.kind = AMQP_FIELD_KIND_ARRAY;
  array.value.value.array.num_entries = 2;
  array.value.value.array.entries = items;
  p.headers = {b, i, d, ts, raw, table, array};
  queue_->Publish(R"({"id":"typed"})", p);

  Start(Settings());
  ASSERT_TRUE(WaitRows(1));
  json h = json::parse(Col("headers", "typed"));
  EXPECT_EQ(h.value("flag", ""), "true");
  EXPECT_EQ(h.value("count", ""), "-42");
  EXPECT_EQ(h.value("ratio", ""), "0.25");
  EXPECT_EQ(h.value("sent", ""), "2026-01-01T00:00:00Z");
  EXPECT_EQ(h.value("raw", ""), "base64://4=");
  EXPECT_EQ(h.value("nested", ""), R"({"a":1,"b":"x"})");
  EXPECT_EQ(h.value("list", ""), "[false,7]");
}

// A body that is not JSON among good ones: a dead {"raw": ...} row, acked (never requeued), and
// the others stored pending.
TEST_P(RabbitmqSourceTest, PoisonMessageIsADeadRawRowAndAcked) {
  queue_->Publish(R"({"id":"good-1"})");
  Props p;
  p.message_id = "poison";
  queue_->Publish("not json {", p);
  queue_->Publish(R"({"id":"good-2"})");
  Start(Settings());
  ASSERT_TRUE(WaitRows(3));
  EXPECT_EQ(Rows("state = 'pending'"), 2);
  EXPECT_EQ(Col("state", "poison"), "dead");
  EXPECT_EQ(json::parse(Col("payload", "poison")), json::parse(R"({"raw":"not json {"})"));
  StopAll();
  EXPECT_EQ(queue_->Ready(), 0);
}

// One batch holding the same key twice (and a key stored earlier): one row each, all acked.
TEST_P(RabbitmqSourceTest, DuplicatesInsideOneBatchAndAcrossBatchesAreStoredOnce) {
  for (int i = 0; i < 3; ++i) queue_->Publish(R"({"id":"same"})");
  queue_->Publish(R"({"id":"other"})");
  Start(Settings());
  ASSERT_TRUE(WaitRows(2));
  ASSERT_TRUE(WaitFor([&] {
    return metrics_.Render().find(R"(queuebox_inbox_messages_total{status="duplicate"} 2)") !=
           std::string::npos;
  })) << metrics_.Render();
  queue_->Publish(R"({"id":"same"})");  // a later batch
  ASSERT_TRUE(WaitFor([&] {
    return metrics_.Render().find(R"(queuebox_inbox_messages_total{status="duplicate"} 3)") !=
           std::string::npos;
  }));
  EXPECT_EQ(Rows(), 2);
  StopAll();
  EXPECT_EQ(queue_->Ready(), 0);
}

// The header filter drops a message: no row, acked.
TEST_P(RabbitmqSourceTest, FilteredMessageIsAckedWithoutARow) {
  std::string prod = "prod", dev = "dev";
  Props keep, drop;
  keep.headers = {Str("x-env", prod)};
  drop.headers = {Str("x-env", dev)};
  queue_->Publish(R"({"id":"dropped"})", drop);
  queue_->Publish(R"({"id":"kept"})", keep);
  RabbitmqSourceSettings s = Settings();
  s.broker.keys.filter = json::parse(R"({"require":[{"header":"X-Env","equals":"prod"}]})");
  Start(s);
  ASSERT_TRUE(WaitRows(1));
  ASSERT_TRUE(WaitFor([&] {
    return metrics_.Render().find(R"(queuebox_inbox_filtered_total{source="orders"} 1)") !=
           std::string::npos;
  })) << metrics_.Render();
  EXPECT_EQ(Rows("idempotency_key = 'dropped'"), 0);
  StopAll();
  EXPECT_EQ(queue_->Ready(), 0);
}

// Publish time (§11.5): with scheduledAtHeader configured, a message without that header takes the
// AMQP timestamp: an hour-old timestamp schedules before the receipt; none gives receipt + delay.
TEST_P(RabbitmqSourceTest, AmqpTimestampIsThePublishTime) {
  Props old;
  old.timestamp = static_cast<uint64_t>(std::time(nullptr) - 3600);
  queue_->Publish(R"({"id":"old"})", old);
  queue_->Publish(R"({"id":"now"})");
  RabbitmqSourceSettings s = Settings();
  s.broker.keys.scheduled_at_header = "x-published-at";
  s.broker.keys.initial_delay_ms = 10000;
  Start(s);
  ASSERT_TRUE(WaitRows(2));
  EXPECT_EQ(Rows("idempotency_key = 'old' AND scheduled_at < created_at"), 1);
  EXPECT_EQ(Rows("idempotency_key = 'now' AND scheduled_at > created_at"), 1);
}

// RabbitMQ 3.12+ stamps `timestamp_in_ms` (a long header) when asked: `scheduledAtHeader:
// timestamp_in_ms` reads it (epoch milliseconds as text) before the AMQP timestamp.
TEST_P(RabbitmqSourceTest, TimestampInMsHeaderIsThePublishTime) {
  Props p;
  Field ms{"timestamp_in_ms", {}};
  ms.value.kind = AMQP_FIELD_KIND_I64;
  ms.value.value.i64 = (static_cast<int64_t>(std::time(nullptr)) - 3600) * 1000;
  p.headers = {ms};
  p.timestamp = static_cast<uint64_t>(std::time(nullptr) + 3600);  // ignored: the header wins
  queue_->Publish(R"({"id":"ms"})", p);
  RabbitmqSourceSettings s = Settings();
  s.broker.keys.scheduled_at_header = "timestamp_in_ms";
  s.broker.keys.initial_delay_ms = 10000;
  Start(s);
  ASSERT_TRUE(WaitRows(1));
  EXPECT_EQ(Rows("idempotency_key = 'ms' AND scheduled_at < created_at"), 1);
}

// declareQueue false (the default): a missing queue stops Start with an error naming the queue
// and the key; declareQueue true declares a durable queue and consumes from it.
TEST_P(RabbitmqSourceTest, MissingQueueNamesItAndDeclareQueueCreatesIt) {
  TestQueue missing(url_, UniqueQueue());
  RabbitmqSourceSettings s = Settings();
  s.queue_name = missing.name();
  sources::BrokerSourceContext ctx;
  ctx.intake = store_->inbox();
  auto made = sources::CreateRabbitmqSource(s, ctx);
  ASSERT_TRUE(made.ok());
  Status started = (*made)->Start();
  EXPECT_EQ(started.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(started.message(), HasSubstr("sources.orders.queueName"));
  EXPECT_THAT(started.message(), HasSubstr("'" + missing.name() + "'"));
  EXPECT_THAT(started.message(), HasSubstr("declareQueue: true"));
  (*made)->Stop();
  EXPECT_EQ(missing.Ready(), -1);  // nothing was created

  s.declare_queue = true;
  BrokerSource* source = Start(s);
  ASSERT_NE(source, nullptr);
  ASSERT_TRUE(WaitFor([&] { return missing.Consumers() == 1; }));
  missing.Publish(R"({"id":"declared"})");
  ASSERT_TRUE(WaitRows(1));
}

// The queue is deleted under a running source: the broker cancels the consumer, the source goes
// unhealthy and says why (the queue and declareQueue); once the queue is back it consumes again.
TEST_P(RabbitmqSourceTest, QueueDeletedWhileConsumingIsAnOutageUntilItIsBack) {
  LogCapture logs(/*debug=*/true);  // the reconnect attempts (DEBUG) say the queue is missing
  BrokerSource* source = Start(Settings());
  ASSERT_NE(source, nullptr);
  ASSERT_TRUE(WaitFor([&] { return queue_->Consumers() == 1 && source->healthy(); }));
  queue_->Delete();
  ASSERT_TRUE(WaitFor([&] { return !source->healthy(); })) << logs.All();
  ASSERT_TRUE(WaitFor([&] { return logs.Count("declareQueue: true") >= 1; })) << logs.All();
  queue_->Declare();
  queue_->Publish(R"({"id":"after"})");
  ASSERT_TRUE(WaitRows(1)) << logs.All();
  EXPECT_TRUE(WaitFor([&] { return source->healthy(); }));
  EXPECT_EQ(logs.Count("cannot consume; reconnecting"), 1) << logs.All();
}

TEST_P(RabbitmqSourceTest, BadSettingsAreRefusedByName) {
  sources::BrokerSourceContext ctx;
  ctx.intake = store_->inbox();
  RabbitmqSourceSettings s = Settings();
  s.connection_url = "http://nope";
  auto made = sources::CreateRabbitmqSource(s, ctx);
  EXPECT_THAT(made.status().message(), HasSubstr("sources.orders.connectionUrl"));
  s = Settings();
  s.prefetch_count = 0;
  made = sources::CreateRabbitmqSource(s, ctx);
  EXPECT_THAT(made.status().message(), HasSubstr("sources.orders.prefetchCount"));
}

// Two replicas (one source name, two consumers) on one queue: every key stored once.
TEST_P(RabbitmqSourceTest, TwoReplicasOnOneQueueStoreEachKeyOnce) {
  RabbitmqSourceSettings s = Settings();
  s.prefetch_count = 50;
  Start(s);
  Start(s);
  ASSERT_TRUE(WaitFor([&] { return queue_->Consumers() == 2; }));
  constexpr int kKeys = 400;
  for (int i = 0; i < kKeys; ++i) {
    // Every key twice (a producer retry), so both replicas see copies of the same key.
    std::string body = R"({"id":"k-)" + std::to_string(i) + R"("})";
    queue_->Publish(body);
    queue_->Publish(body);
  }
  ASSERT_TRUE(WaitFor([&] {
    return metrics_.Render().find(R"(queuebox_inbox_messages_total{status="duplicate"} 400)") !=
           std::string::npos;
  })) << metrics_.Render();
  EXPECT_EQ(Rows(), kKeys);
  EXPECT_EQ(db_->Scalar("SELECT COUNT(DISTINCT idempotency_key) FROM inbox"),
            std::to_string(kKeys));
  StopAll();
  EXPECT_EQ(queue_->Ready(), 0);
}

// The broker goes away (its connections cut, the port refusing) and comes back: the source
// reports unhealthy, logs one WARN, reconnects, and stores what was published meanwhile; no key
// twice, nothing left in the queue.
TEST_P(RabbitmqSourceTest, BrokerRestartIsOneWarnAndNothingLost) {
  LogCapture logs(/*debug=*/true);
  const int port = testing::UnusedLoopbackPort();
  auto forwarder = std::make_unique<testing::TcpForwarder>(port, queue_->port());
  ASSERT_TRUE(forwarder->Start().ok());
  RabbitmqSourceSettings s = Settings();
  // The same credentials through the forwarder.
  std::string through = url_;
  through.replace(through.rfind(':'), std::string::npos, ":" + std::to_string(port) + "/");
  s.connection_url = through;
  BrokerSource* source = Start(s);
  ASSERT_NE(source, nullptr);
  for (int i = 0; i < 20; ++i) queue_->Publish(R"({"id":"before-)" + std::to_string(i) + R"("})");
  ASSERT_TRUE(WaitRows(20));
  EXPECT_TRUE(source->healthy());

  forwarder.reset();  // the broker "stops": connections cut, new ones refused
  ASSERT_TRUE(WaitFor([&] { return !source->healthy(); }));
  for (int i = 0; i < 20; ++i) queue_->Publish(R"({"id":"during-)" + std::to_string(i) + R"("})");
  // A few reconnect attempts fail while it is away.
  ASSERT_TRUE(WaitFor([&] { return logs.Count("still cannot consume") >= 1; }, 60s)) << logs.All();
  forwarder = std::make_unique<testing::TcpForwarder>(port, queue_->port());
  ASSERT_TRUE(forwarder->Start().ok());
  ASSERT_TRUE(WaitRows(40));
  ASSERT_TRUE(WaitFor([&] { return source->healthy(); }));
  EXPECT_EQ(logs.Count("cannot consume; reconnecting"), 1) << logs.All();
  EXPECT_EQ(logs.Count("connected again"), 1) << logs.All();
  EXPECT_THAT(logs.All(), Not(HasSubstr("guest:guest")));
  StopAll();
  EXPECT_EQ(Rows(), 40);
  EXPECT_EQ(queue_->Ready(), 0);
}

// A broker that is not up at start: Start succeeds, unhealthy; the source consumes once the
// port answers.
TEST_P(RabbitmqSourceTest, BrokerDownAtStartIsUnhealthyThenConsumes) {
  const int port = testing::UnusedLoopbackPort();
  RabbitmqSourceSettings s = Settings();
  std::string through = url_;
  through.replace(through.rfind(':'), std::string::npos, ":" + std::to_string(port) + "/");
  s.connection_url = through;
  BrokerSource* source = Start(s);
  ASSERT_NE(source, nullptr);
  EXPECT_FALSE(source->healthy());
  queue_->Publish(R"({"id":"late"})");
  testing::TcpForwarder forwarder(port, queue_->port());
  ASSERT_TRUE(forwarder.Start().ok());
  ASSERT_TRUE(WaitRows(1));
  EXPECT_TRUE(source->healthy());
  StopAll();  // before the forwarder goes
}

INSTANTIATE_TEST_SUITE_P(Dialects, RabbitmqSourceTest,
                         ::testing::Values(std::string("sqlite"), std::string("postgresql")),
                         DialectName);

// The database stops mid-consumption (its connections cut by a forwarder): the batch is nacked
// and redelivered, nothing is acked that was not stored, and once the database is back every
// message is stored exactly once and the queue is empty.
TEST(RabbitmqSourceOutageTest, DatabaseAwayNacksAndNothingIsLostOrDoubled) {
  std::string amqp_url, pg_url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", amqp_url);
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
  testing::StoreDb db("postgresql");
  db.Create(pg_url);
  const std::string direct = db.config().url;
  const size_t colon = direct.rfind(':', direct.rfind('/'));
  const int pg_port = std::stoi(direct.substr(colon + 1));
  const int port = testing::UnusedLoopbackPort();
  auto forwarder = std::make_unique<testing::TcpForwarder>(port, pg_port);
  ASSERT_TRUE(forwarder->Start().ok());
  db.config().url =
      direct.substr(0, colon + 1) + std::to_string(port) + direct.substr(direct.find('/', colon));
  db.config().pool_size = 2;
  std::unique_ptr<OutboxStore> store = db.Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Migrate(std::nullopt).ok());

  TestQueue queue(amqp_url, UniqueQueue());
  queue.Declare();
  LogCapture logs;
  Metrics metrics;
  RabbitmqSourceSettings s;
  s.name = "orders";
  s.queue_name = queue.name();
  s.connection_url = amqp_url;
  s.prefetch_count = 25;
  sources::BrokerSourceContext ctx;
  ctx.intake = store->inbox();
  ctx.observer = &metrics;
  auto made = sources::CreateRabbitmqSource(s, ctx);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<BrokerSource> source = std::move(made).value();
  ASSERT_TRUE(source->Start().ok());
  auto rows = [&] { return std::stoll(db.Scalar("SELECT COUNT(*) FROM inbox")); };
  for (int i = 0; i < 50; ++i) queue.Publish(R"({"id":"a-)" + std::to_string(i) + R"("})");
  ASSERT_TRUE(WaitFor([&] { return rows() == 50; }));

  forwarder.reset();  // the database goes away
  for (int i = 0; i < 50; ++i) queue.Publish(R"({"id":"b-)" + std::to_string(i) + R"("})");
  ASSERT_TRUE(WaitFor([&] { return logs.Count("could not store a batch") >= 1; }, 120s))
      << logs.All();
  EXPECT_TRUE(source->healthy());  // the broker side is fine

  forwarder = std::make_unique<testing::TcpForwarder>(port, pg_port);  // the database is back
  ASSERT_TRUE(forwarder->Start().ok());
  ASSERT_TRUE(WaitFor([&] { return rows() == 100; }, 120s)) << logs.All();
  source->Stop();  // "stores again" is written after the store commits: joined, it is there
  EXPECT_EQ(logs.Count("could not store a batch"), 1) << logs.All();
  EXPECT_EQ(logs.Count("stores again"), 1) << logs.All();
  EXPECT_EQ(db.Scalar("SELECT COUNT(DISTINCT idempotency_key) FROM inbox"), "100");
  EXPECT_EQ(queue.Ready(), 0);
}

// Header conversion without a broker (amqp_headers.h): decimals, floats, void, invalid UTF-8
// names, a timestamp beyond the calendar.
TEST(AmqpHeaderStringsTest, EdgeValues) {
  amqp_field_value_t v;
  v.kind = AMQP_FIELD_KIND_DECIMAL;
  v.value.decimal.decimals = 2;
  v.value.decimal.value = 12345;
  EXPECT_EQ(sources::AmqpFieldText(v), "123.45");
  v.value.decimal.decimals = 3;
  v.value.decimal.value = static_cast<uint32_t>(-5);
  EXPECT_EQ(sources::AmqpFieldText(v), "-0.005");
  v.kind = AMQP_FIELD_KIND_F32;
  v.value.f32 = 0.1f;
  EXPECT_EQ(sources::AmqpFieldText(v), "0.1");
  v.kind = AMQP_FIELD_KIND_U8;
  v.value.u8 = 200;
  EXPECT_EQ(sources::AmqpFieldText(v), "200");
  v.kind = AMQP_FIELD_KIND_VOID;
  EXPECT_EQ(sources::AmqpFieldText(v), std::nullopt);
  v.kind = AMQP_FIELD_KIND_TIMESTAMP;
  v.value.u64 = 400000000000ULL;
  EXPECT_EQ(sources::AmqpFieldText(v), "400000000000");

  std::string bad_name("k\xc3", 2), value = "v";
  amqp_table_entry_t entries[2];
  entries[0].key = Bytes(bad_name);
  entries[0].value.kind = AMQP_FIELD_KIND_UTF8;
  entries[0].value.value.bytes = Bytes(value);
  std::string void_name = "nothing";
  entries[1].key = Bytes(void_name);
  entries[1].value.kind = AMQP_FIELD_KIND_VOID;
  amqp_table_t table{2, entries};
  auto headers = sources::AmqpHeaderStrings(table);
  ASSERT_EQ(headers.size(), 1u);
  EXPECT_EQ(headers[0].first, "base64:a8M=");
  EXPECT_EQ(headers[0].second, "v");
}

}  // namespace
}  // namespace queuebox

#else
#include <gtest/gtest.h>
TEST(RabbitmqSource, NotBuilt) { GTEST_SKIP() << "QB_WITH_RABBITMQ is off"; }
#endif
