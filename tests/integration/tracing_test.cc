// Tracing (issue 37; docs/operations.md, "Tracing") with the real relay over FakeStore and real
// destinations, and the span export read back by the collector stand-in (tests/judges/otel),
// which decodes it with the OpenTelemetry project's own protobuf definitions, not ours:
//   - an application row's trace id reaches every destination kind (HTTP, Kafka's mock cluster,
//     RabbitMQ, NATS) in a traceparent whose parent is the relay's publish span, and that span
//     reaches the collector as a child of the row's span, with its messaging attributes;
//   - hostile traceparents are dropped, never forwarded; a row without one starts a trace, or
//     gets none when startTraces is off;
//   - a collector that is down or answers 500: every row is delivered, the spans are dropped and
//     counted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "destinations/http/http_destination.h"
#include "queuebox/relay.h"
#include "telemetry/trace_context.h"
#include "telemetry/tracer.h"
#include "testing/broker_testing.h"
#include "testing/env.h"
#include "testing/fake_store.h"
#include "testing/http_receiver.h"
#include "testing/otel_collector.h"
#include "testing/process.h"

#if defined(QB_WITH_KAFKA)
#include "destinations/kafka/kafka_destination.h"
#include "testing/broker_servers.h"
#include "testing/kafka_reader.h"
#endif
#if defined(QB_WITH_RABBITMQ)
#include "destinations/rabbitmq/rabbitmq_destination.h"
#include "testing/amqp_queue.h"
#endif
#if defined(QB_WITH_NATS)
#include <nats/nats.h>

#include "destinations/nats/nats_destination.h"
#endif

namespace queuebox {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kTraceId = "4bf92f3577b34da6a3ce929d0e0e4736";
constexpr const char* kParentSpan = "00f067aa0ba902b7";
const std::string kTraceparent = std::string("00-") + kTraceId + "-" + kParentSpan + "-01";

std::shared_ptr<telemetry::Tracer> NewTracer(const std::string& endpoint,
                                             bool start_traces = true) {
  telemetry::TracerOptions o;
  o.endpoint = endpoint;
  o.start_traces = start_traces;
  o.export_interval_ms = 50;
  o.timeout_ms = 2000;
  o.service_version = "9.9.9";
  o.headers = {{"Authorization", "Bearer collector-token"}};
  return std::make_shared<telemetry::Tracer>(std::move(o));
}

// Relays every row of `store` to `d` with `tracer` (and, when given, until `done`: a retry is
// not claimable before it is due), then stops.
void RelayAll(testing::FakeStore& store, std::unique_ptr<Destination> d,
              std::shared_ptr<telemetry::Tracer> tracer,
              const std::function<bool()>& done = nullptr) {
  ASSERT_TRUE(d->Start().ok());
  RelayOptions o;
  o.outbox.poll_interval_ms = 20;
  o.outbox.retry_base_delay_ms = 50;
  o.tracer = std::move(tracer);
  o.routes.push_back(RouteConfig{"**", d->name(), std::nullopt, ""});
  std::map<std::string, std::unique_ptr<Destination>> dests;
  dests[d->name()] = std::move(d);
  auto relay = Relay::Create(o, &store, std::move(dests));
  ASSERT_TRUE(relay.ok()) << relay.status().ToString();
  ASSERT_TRUE((*relay)->Start().ok());
  if (done) {
    ASSERT_TRUE(testing::WaitUntil(done, 30s));
  }
  ASSERT_TRUE((*relay)->WaitIdle(30s).ok());
  (*relay)->Stop();
}

std::string InsertRow(testing::FakeStore& store, std::string headers,
                      std::string topic = "orders.created") {
  NewOutboxRow row;
  row.topic = std::move(topic);
  row.key = "order-1";
  row.payload = R"({"id":1})";
  row.headers = std::move(headers);
  auto id = store.Insert(row);
  EXPECT_TRUE(id.ok());
  return id.ok() ? *id : "";
}

std::string RowWithParent() {
  return R"({"traceparent":")" + kTraceparent + R"(","tracestate":"congo=t61rcWkgMzE"})";
}

// The traceparent a destination received carries the row's trace id and a new span id (the
// publish span's), never the row's own span id.
void ExpectChildOfRow(const std::string& traceparent) {
  auto c = telemetry::ParseTraceparent(traceparent);
  ASSERT_TRUE(c.has_value()) << traceparent;
  EXPECT_EQ(telemetry::Hex(c->trace_id), kTraceId);
  EXPECT_NE(telemetry::Hex(c->span_id), kParentSpan);
}

std::unique_ptr<Destination> Http(const std::string& base_url) {
  HttpDestinationSettings s;
  s.name = "webhook";
  s.base_url = base_url;
  s.path = "/hooks";
  return std::move(HttpDestination::Create(std::move(s))).value();
}

TEST(TracingTest, HttpDestinationGetsThePublishSpanAndTheCollectorDecodesIt) {
  testing::OtelCollector collector;
  testing::HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  testing::FakeStore store;
  const std::string id = InsertRow(store, RowWithParent());
  auto tracer = NewTracer(collector.Endpoint());
  RelayAll(store, Http(receiver.BaseUrl()), tracer);
  tracer->Stop();

  ASSERT_EQ(store.Get(id).state, "sent");
  ASSERT_EQ(receiver.Requests().size(), 1u);
  const std::string sent = receiver.Requests()[0].Header("traceparent");
  ExpectChildOfRow(sent);
  EXPECT_EQ(receiver.Requests()[0].HeaderValues("traceparent").size(), 1u);
  EXPECT_EQ(receiver.Requests()[0].Header("tracestate"), "congo=t61rcWkgMzE");

  std::vector<nlohmann::json> spans = collector.Spans();
  ASSERT_EQ(spans.size(), 1u);
  const nlohmann::json& s = spans[0];
  ASSERT_FALSE(s.contains("decodeError")) << s.dump();
  EXPECT_EQ(s["traceId"], kTraceId);
  EXPECT_EQ(s["parentSpanId"], kParentSpan);
  EXPECT_EQ(s["spanId"], sent.substr(36, 16));  // the destination's parent is the publish span
  EXPECT_EQ(s["name"], "publish webhook");
  EXPECT_EQ(s["kind"], 4);  // SPAN_KIND_PRODUCER
  EXPECT_EQ(s["traceState"], "congo=t61rcWkgMzE");
  EXPECT_EQ(s["attributes"]["messaging.system"], "http");
  EXPECT_EQ(s["attributes"]["messaging.message.id"], id);
  EXPECT_EQ(s["attributes"]["queuebox.topic"], "orders.created");
  EXPECT_EQ(s["attributes"]["queuebox.destination"], "webhook");
  EXPECT_EQ(s["attributes"]["queuebox.attempt"], 0);
  EXPECT_EQ(s["attributes"]["queuebox.outcome"], "delivered");
  EXPECT_EQ(s["resource"]["service.name"], "queuebox");
  EXPECT_EQ(s["resource"]["service.version"], "9.9.9");
  EXPECT_EQ(s["auth"], "Bearer collector-token");
  EXPECT_EQ(tracer->exported(), 1u);
  EXPECT_EQ(tracer->dropped(), 0u);
}

TEST(TracingTest, EachRetryIsItsOwnPublishSpan) {
  testing::OtelCollector collector;
  testing::HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  receiver.EnqueueResponse({.status = 500, .body = "busy"});
  testing::FakeStore store;
  const std::string id = InsertRow(store, RowWithParent());
  auto tracer = NewTracer(collector.Endpoint());
  RelayAll(store, Http(receiver.BaseUrl()), tracer, [&] { return store.Get(id).state == "sent"; });
  tracer->Stop();
  ASSERT_EQ(receiver.Requests().size(), 2u);
  std::vector<nlohmann::json> spans = collector.Spans();
  ASSERT_EQ(spans.size(), 2u);
  std::map<int, nlohmann::json> by_attempt;
  for (const auto& s : spans) by_attempt[s["attributes"]["queuebox.attempt"].get<int>()] = s;
  EXPECT_EQ(by_attempt[0]["attributes"]["queuebox.outcome"], "retry");
  EXPECT_EQ(by_attempt[0]["status"], 2);  // STATUS_CODE_ERROR
  EXPECT_EQ(by_attempt[1]["attributes"]["queuebox.outcome"], "delivered");
  for (const auto& s : spans) EXPECT_EQ(s["parentSpanId"], kParentSpan);
  EXPECT_NE(receiver.Requests()[0].Header("traceparent"),
            receiver.Requests()[1].Header("traceparent"));
}

TEST(TracingTest, HostileTraceparentsAreDroppedNeverForwarded) {
  const std::vector<std::string> hostile = {
      "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",   // upper case
      "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version ff
      "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // zero trace id
      "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // zero span id
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",    // short
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-010",  // long
      std::string(10 * 1024, 'x'),                                 // 10 KB of text
  };
  for (bool start_traces : {true, false}) {
    testing::HttpReceiver receiver;
    ASSERT_TRUE(receiver.Start().ok());
    testing::FakeStore store;
    for (const std::string& v : hostile) {
      InsertRow(store, nlohmann::json{{"TraceParent", v}, {"tracestate", "a=1"}}.dump());
    }
    auto tracer = NewTracer("", start_traces);
    RelayAll(store, Http(receiver.BaseUrl()), tracer);
    ASSERT_EQ(receiver.Requests().size(), hostile.size());
    for (const auto& r : receiver.Requests()) {
      const std::vector<std::string> values = r.HeaderValues("traceparent");
      EXPECT_FALSE(r.HasHeader("tracestate"));  // no state without a valid parent
      if (!start_traces) {
        EXPECT_TRUE(values.empty());
        continue;
      }
      ASSERT_EQ(values.size(), 1u);
      auto c = telemetry::ParseTraceparent(values[0]);
      ASSERT_TRUE(c.has_value()) << values[0];
      EXPECT_NE(telemetry::Hex(c->trace_id), kTraceId);  // a new trace
    }
    EXPECT_EQ(tracer->recorded(), start_traces ? hostile.size() : 0u);
  }
}

TEST(TracingTest, TracingOffAddsNothingAndPassesRowHeadersAsTheyAre) {
  testing::HttpReceiver receiver;
  ASSERT_TRUE(receiver.Start().ok());
  testing::FakeStore store;
  InsertRow(store, RowWithParent());
  InsertRow(store, "{}");
  RelayAll(store, Http(receiver.BaseUrl()), nullptr);
  ASSERT_EQ(receiver.Requests().size(), 2u);
  int with = 0;
  for (const auto& r : receiver.Requests()) {
    if (r.HasHeader("traceparent")) {
      ++with;
      EXPECT_EQ(r.Header("traceparent"), kTraceparent);
    }
  }
  EXPECT_EQ(with, 1);
}

// A collector that is down (a closed port) or answers 500: every row is delivered, and every
// span is dropped and counted.
TEST(TracingTest, CollectorDownOrFailingNeverHoldsDeliveryBack) {
  testing::OtelCollector failing(500);
  int closed_port = 0;
  {
    testing::OtelCollector gone;
    closed_port = gone.port();
  }
  for (const std::string& endpoint :
       {failing.Endpoint(), "http://127.0.0.1:" + std::to_string(closed_port) + "/v1/traces"}) {
    testing::HttpReceiver receiver;
    ASSERT_TRUE(receiver.Start().ok());
    testing::FakeStore store;
    for (int i = 0; i < 20; ++i) InsertRow(store, RowWithParent());
    auto tracer = NewTracer(endpoint);
    RelayAll(store, Http(receiver.BaseUrl()), tracer);
    EXPECT_EQ(receiver.Requests().size(), 20u) << endpoint;
    tracer->Stop();
    EXPECT_EQ(tracer->recorded(), 20u);
    EXPECT_EQ(tracer->exported(), 0u);
    EXPECT_EQ(tracer->dropped(), 20u) << endpoint;
    EXPECT_GE(tracer->failed_exports(), 1u);
  }
  EXPECT_TRUE(failing.Spans().empty());
}

// A queue smaller than the spans made: the rest are dropped and counted, never waited for.
TEST(TracingTest, AFullQueueDropsSpans) {
  telemetry::TracerOptions o;
  o.endpoint = "http://127.0.0.1:9/v1/traces";
  o.queue_size = 4;
  o.batch_size = 1000;
  o.export_interval_ms = 60000;
  telemetry::Tracer tracer(o);
  for (int i = 0; i < 10; ++i) tracer.Record(telemetry::SpanStart{}, telemetry::SpanEnd{});
  EXPECT_EQ(tracer.dropped(), 6u);
  tracer.Stop();
  EXPECT_EQ(tracer.dropped(), 10u);
}

#if defined(QB_WITH_KAFKA)
TEST(TracingTest, KafkaRecordCarriesThePublishSpan) {
  testing::MockKafkaCluster cluster;
  rd_kafka_mock_topic_create(cluster.get(), "orders.created", 1, 1);
  KafkaDestinationSettings s;
  s.name = "kafka";
  s.bootstrap_servers = cluster.bootstraps();
  s.topic = "{{ topic }}";
  testing::FakeStore store;
  InsertRow(store, RowWithParent());
  auto tracer = NewTracer("");
  RelayAll(store, std::move(KafkaDestination::Create(s)).value(), tracer);
  auto records = testing::ConsumeKafka(cluster.bootstraps(), "orders.created", 1);
  ASSERT_EQ(records.size(), 1u);
  std::vector<std::string> parents;
  for (const auto& [name, value] : records[0].headers) {
    if (name == "traceparent") parents.push_back(value);
  }
  ASSERT_EQ(parents.size(), 1u);
  ExpectChildOfRow(parents[0]);
}
#endif

#if defined(QB_WITH_RABBITMQ)
TEST(TracingTest, RabbitMqMessageCarriesThePublishSpan) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", url);
  const std::string exchange = "qb.tracing." + std::to_string(::getpid());
  testing::AmqpTestQueue queue(url, exchange, "#");
  RabbitMqDestinationSettings s;
  s.name = "rabbit";
  s.url = url;
  s.exchange = exchange;
  testing::FakeStore store;
  InsertRow(store, RowWithParent());
  RelayAll(store, std::move(RabbitMqDestination::Create(s)).value(), NewTracer(""));
  auto got = queue.Take(1);
  ASSERT_EQ(got.size(), 1u);
  ExpectChildOfRow(got[0].string_headers["traceparent"]);
  EXPECT_EQ(got[0].string_headers["tracestate"], "congo=t61rcWkgMzE");
}
#endif

#if defined(QB_WITH_NATS)
TEST(TracingTest, NatsMessageCarriesThePublishSpan) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_NATS_URL", url);
  const std::string subject = "qb.tracing." + std::to_string(::getpid());
  natsConnection* nc = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, url.c_str()), NATS_OK);
  natsSubscription* sub = nullptr;
  ASSERT_EQ(natsConnection_SubscribeSync(&sub, nc, subject.c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_Flush(nc), NATS_OK);
  NatsDestinationSettings s;
  s.name = "nats";
  s.servers = url;
  s.subject = subject;
  s.jet_stream = false;
  testing::FakeStore store;
  InsertRow(store, RowWithParent());
  RelayAll(store, std::move(NatsDestination::Create(s)).value(), NewTracer(""));
  natsMsg* m = nullptr;
  ASSERT_EQ(natsSubscription_NextMsg(&m, sub, 5000), NATS_OK);
  const char* parent = nullptr;
  EXPECT_EQ(natsMsgHeader_Get(m, "traceparent", &parent), NATS_OK);
  if (parent != nullptr) ExpectChildOfRow(parent);
  natsMsg_Destroy(m);
  natsSubscription_Destroy(sub);
  natsConnection_Destroy(nc);
}
#endif

}  // namespace
}  // namespace queuebox
