// The nats broker source (issue 15 items 3-5) against the shared `nats-server -js`
// (QB_TEST_NATS_URL) and a real inbox (SQLite and PostgreSQL): rows and their keys, headers and
// publish time, acknowledgements read back from the consumer, the dead raw row, a duplicate in
// one batch, the header filter, a missing stream, binding an existing durable, two sources on one
// durable, redelivery after ackWait, the database cut mid-consumption and the broker connection
// cut and restored (a TCP forwarder in front of the shared servers: they are never restarted).
#ifdef QB_WITH_NATS
#include "sources/nats/nats_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nats/nats.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "admin/metrics.h"
#include "contract/store_test_support.h"
#include "core/log.h"
#include "sources/broker_intake.h"
#include "testing/broker_servers.h"
#include "testing/broker_testing.h"
#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/log_capture.h"
#include "testing/process.h"
#include "testing/tcp_forwarder.h"

namespace queuebox {
namespace {

using ::queuebox::testing::LogCapture;
using ::queuebox::testing::WaitUntil;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// The port of a nats:// or postgresql:// URL on loopback.
int PortOf(const std::string& url) {
  size_t colon = url.rfind(':');
  return std::stoi(url.substr(colon + 1));
}

std::string Dialect(const ::testing::TestParamInfo<std::string>& p) { return p.param; }

class NatsSourceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    QB_REQUIRE_SERVER_ENV("QB_TEST_NATS_URL", nats_url_);
    std::string pg_url;
    if (GetParam() == "postgresql") QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
    db_ = std::make_unique<testing::StoreDb>(GetParam());
    db_->Create(pg_url);
    store_ = db_->Open();
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->Migrate(std::nullopt).ok());
    static std::atomic<int> n{0};
    id_ = std::to_string(::getpid()) + "_" + std::to_string(++n);
    stream_name_ = "QBSRC_" + id_;
    prefix_ = "qbsrc." + id_;
  }
  void TearDown() override {
    for (auto& s : sources_) s->Stop();
    sources_.clear();
    if (js_ != nullptr) jsCtx_Destroy(js_);
    stream_.reset();
    store_.reset();
  }

  // Creates the test's stream over "<prefix>.>".
  void MakeStream() {
    stream_ = std::make_unique<testing::JetStreamTestStream>(nats_url_, stream_name_, prefix_);
    ASSERT_EQ(natsConnection_JetStream(&js_, stream_->nc(), nullptr), NATS_OK);
  }

  NatsSourceSettings Settings(const std::string& name = "orders") {
    NatsSourceSettings s;
    s.name = name;
    s.servers = nats_url_;
    s.stream = stream_name_;
    s.durable = "qb_" + id_;
    s.filter_subject = prefix_ + ".>";
    s.batch_size = 50;
    return s;
  }

  sources::BrokerSource* Started(NatsSourceSettings s) {
    sources::BrokerSourceContext ctx;
    ctx.intake = store_->inbox();
    ctx.observer = &metrics_;
    auto made = sources::CreateNatsSource(std::move(s), ctx);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    if (!made.ok()) return nullptr;
    EXPECT_TRUE((*made)->Start().ok());
    sources_.push_back(std::move(made).value());
    return sources_.back().get();
  }

  // Publishes one message to JetStream and waits for its PubAck.
  void Publish(const std::string& subject, const std::string& body,
               const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    natsMsg* m = nullptr;
    ASSERT_EQ(
        natsMsg_Create(&m, subject.c_str(), nullptr, body.data(), static_cast<int>(body.size())),
        NATS_OK);
    for (const auto& [k, v] : headers) natsMsgHeader_Add(m, k.c_str(), v.c_str());
    jsPubAck* pa = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    ASSERT_EQ(js_PublishMsg(&pa, js_, m, nullptr, &jerr), NATS_OK) << jerr;
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(m);
  }

  // The durable's state: delivered and not acknowledged, not yet delivered, the ack floor.
  struct ConsumerState {
    int64_t ack_pending = -1;
    int64_t pending = -1;
    uint64_t ack_floor = 0;
  };
  ConsumerState Consumer(const std::string& durable) {
    jsConsumerInfo* ci = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    ConsumerState out;
    if (js_GetConsumerInfo(&ci, js_, stream_name_.c_str(), durable.c_str(), nullptr, &jerr) !=
        NATS_OK) {
      return out;
    }
    out = {ci->NumAckPending, static_cast<int64_t>(ci->NumPending), ci->AckFloor.Stream};
    jsConsumerInfo_Destroy(ci);
    return out;
  }
  // Every message delivered and acknowledged.
  bool AllAcked(const std::string& durable) {
    ConsumerState c = Consumer(durable);
    return c.ack_pending == 0 && c.pending == 0;
  }

  int64_t Rows(const std::string& where = "1=1") {
    return std::stoll(db_->Scalar("SELECT COUNT(*) FROM inbox WHERE " + where));
  }

  std::string nats_url_, id_, stream_name_, prefix_;
  std::unique_ptr<testing::StoreDb> db_;
  std::unique_ptr<OutboxStore> store_;
  std::unique_ptr<testing::JetStreamTestStream> stream_;
  jsCtx* js_ = nullptr;
  queuebox::Metrics metrics_;
  std::vector<std::unique_ptr<sources::BrokerSource>> sources_;
};

TEST_P(NatsSourceTest, StoresEachMessageWithItsKeysAndHeadersThenAcks) {
  MakeStream();
  NatsSourceSettings s = Settings();
  s.broker.event_type_from_header = true;
  s.broker.keys.aggregate_id_path = {"$.customer"};
  sources::BrokerSource* source = Started(s);
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->component(), "nats.orders");
  Publish(prefix_ + ".created", R"({"id":"o-1","customer":"c-1"})",
          {{"x-event-type", "order.created"},
           {"X-Tenant", "first"},
           {"X-Tenant", "last"},
           {"X-Correlation-Id", "corr-1"}});
  Publish(prefix_ + ".created", R"({"id":"o-2","customer":"c-2"})",
          {{"x-event-type", "order.created"}});
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 2; }));
  auto rows = db_->Query(
      "SELECT source, idempotency_key, aggregate_id, event_type, correlation_id, state, "
      "consumption FROM inbox WHERE idempotency_key = 'o-1'");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"orders", "o-1", "c-1", "order.created", "corr-1",
                                               "pending", "push"}));
  nlohmann::json headers =
      nlohmann::json::parse(db_->Scalar("SELECT headers FROM inbox WHERE idempotency_key='o-1'"));
  EXPECT_EQ(headers.value("X-Tenant", ""), "last");  // last value per name
  EXPECT_EQ(db_->Scalar("SELECT payload FROM inbox WHERE idempotency_key = 'o-2'").find("c-2") !=
                std::string::npos,
            true);
  ASSERT_TRUE(WaitUntil([&] { return AllAcked(Settings().durable); }));
  EXPECT_TRUE(source->healthy());
  EXPECT_THAT(metrics_.Render(), HasSubstr(R"(queuebox_inbox_messages_total{status="new"} 2)"));
}

TEST_P(NatsSourceTest, KeyFallsBackToNatsMsgIdThenToTheBodyDigest) {
  MakeStream();
  ASSERT_NE(Started(Settings()), nullptr);
  Publish(prefix_ + ".a", R"({"n":1})", {{"Nats-Msg-Id", "msg-1"}});
  Publish(prefix_ + ".a", R"({"n":2})");
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 2; }));
  EXPECT_EQ(Rows("idempotency_key = 'msg-1'"), 1);
  // sha256 of {"n":2}
  EXPECT_EQ(Rows("idempotency_key = '" + sources::BodyDigestKey(R"({"n":2})") + "'"), 1);
}

// Headers as they came off the wire, read by exact name (nats.c 3.4.1's lookup answers
// "x-attempt" with the value of "x-attempth1" once they share a bucket) and an empty value as
// empty (nats.c's parser reads "x-empty: " as the next line and loses that header).
TEST_P(NatsSourceTest, HeadersAreReadByExactNameAndAnEmptyValueIsEmpty) {
  MakeStream();
  ASSERT_NE(Started(Settings()), nullptr);
  // "x-attempt" first: the publisher's natsMsgHeader_Add looks names up the same way and would
  // append its value to "x-attempth1".
  std::vector<std::pair<std::string, std::string>> headers = {
      {"x-attempt", "4"}, {"x-attempth1", "Q"}, {"x-empty", ""}};
  for (const char* h : {"h2", "h3", "h4", "h5", "h6", "h7", "h35", "h36", "h37", "h38", "h39"}) {
    headers.emplace_back(h, h);
  }
  headers.insert(headers.end(), {{"Nats-Msg-Id", "msg-exact"}, {"x-last", ""}});
  Publish(prefix_ + ".a", R"({"n":1})", headers);
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 1; }));
  EXPECT_EQ(Rows("idempotency_key = 'msg-exact'"), 1);
  nlohmann::json stored = nlohmann::json::parse(db_->Scalar("SELECT headers FROM inbox"));
  nlohmann::json expected = nlohmann::json::object();
  for (const auto& [name, value] : headers) expected[name] = value;
  EXPECT_EQ(stored, expected);
}

TEST_P(NatsSourceTest, PublishTimeIsTheJetStreamStoredTime) {
  MakeStream();
  NatsSourceSettings s = Settings();
  s.broker.keys.scheduled_at_header = "X-Published-At";  // absent: the stored time is used
  s.broker.keys.initial_delay_ms = 3600000;
  ASSERT_NE(Started(s), nullptr);
  Publish(prefix_ + ".a", R"({"id":"t-1"})");
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 1; }));
  natsMsg* m = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  ASSERT_EQ(js_GetMsg(&m, js_, stream_name_.c_str(), 1, nullptr, &jerr), NATS_OK);
  const int64_t stored_ms = natsMsg_GetTime(m) / 1000000;
  natsMsg_Destroy(m);
  const std::string expr =
      db_->pg() ? "CAST(floor(extract(epoch FROM scheduled_at) * 1000) AS bigint)"
                : "CAST(round((julianday(scheduled_at) - 2440587.5) * 86400000) AS INTEGER)";
  const int64_t scheduled_ms = std::stoll(db_->Scalar("SELECT " + expr + " FROM inbox"));
  EXPECT_NEAR(static_cast<double>(scheduled_ms), static_cast<double>(stored_ms + 3600000), 1.0);
}

TEST_P(NatsSourceTest, PoisonMessageIsADeadRawRowAndTheOthersAreStored) {
  MakeStream();
  ASSERT_NE(Started(Settings()), nullptr);
  Publish(prefix_ + ".a", R"({"id":"g-1"})");
  Publish(prefix_ + ".a", "not json");
  Publish(prefix_ + ".a", R"({"id":"g-2"})");
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 3; }));
  EXPECT_EQ(Rows("state = 'pending'"), 2);
  auto dead = db_->Query("SELECT payload, state FROM inbox WHERE state = 'dead'");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(dead[0][0]), nlohmann::json({{"raw", "not json"}}));
  ASSERT_TRUE(WaitUntil([&] { return AllAcked(Settings().durable); }));
}

TEST_P(NatsSourceTest, DuplicateInsideOneBatchIsStoredOnceAndBothAreAcked) {
  MakeStream();
  // Both messages are in the stream before the first fetch: one batch.
  Publish(prefix_ + ".a", R"({"id":"same","v":1})");
  Publish(prefix_ + ".a", R"({"id":"same","v":2})");
  ASSERT_NE(Started(Settings()), nullptr);
  ASSERT_TRUE(WaitUntil([&] { return AllAcked(Settings().durable); }));
  EXPECT_EQ(Rows(), 1);
  EXPECT_EQ(nlohmann::json::parse(db_->Scalar("SELECT payload FROM inbox")).value("v", 0), 1);
  std::string m = metrics_.Render();
  EXPECT_THAT(m, HasSubstr(R"(queuebox_inbox_messages_total{status="new"} 1)"));
  EXPECT_THAT(m, HasSubstr(R"(queuebox_inbox_messages_total{status="duplicate"} 1)"));
}

TEST_P(NatsSourceTest, FilteredMessageIsAckedWithoutARow) {
  MakeStream();
  NatsSourceSettings s = Settings();
  s.broker.keys.filter =
      nlohmann::json::parse(R"({"require":[{"header":"X-Env","equals":"prod"}]})");
  ASSERT_NE(Started(s), nullptr);
  Publish(prefix_ + ".a", R"({"id":"f-1"})", {{"X-Env", "dev"}});
  Publish(prefix_ + ".a", R"({"id":"f-2"})", {{"X-Env", "prod"}});
  ASSERT_TRUE(WaitUntil([&] { return AllAcked(Settings().durable); }));
  EXPECT_EQ(Rows(), 1);
  EXPECT_EQ(Rows("idempotency_key = 'f-2'"), 1);
  EXPECT_THAT(metrics_.Render(), HasSubstr(R"(queuebox_inbox_filtered_total{source="orders"} 1)"));
}

TEST_P(NatsSourceTest, MissingStreamIsOneClearWarningThenConsumesOnceItExists) {
  LogCapture logs;
  sources::BrokerSource* source = Started(Settings());
  ASSERT_NE(source, nullptr);
  ASSERT_TRUE(WaitUntil([&] {
    return logs.Count({stream_name_, "does not exist"}) > 0;
  })) << logs.All();
  EXPECT_FALSE(source->healthy());
  EXPECT_EQ(logs.Count({"sources.orders.stream"}), 1) << logs.All();
  MakeStream();  // the operator creates it; the source binds on its next try
  Publish(prefix_ + ".a", R"({"id":"late"})");
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 1; }, 60s)) << logs.All();
  EXPECT_TRUE(source->healthy());
  EXPECT_EQ(logs.Count({stream_name_, "does not exist"}), 1) << logs.All();
  EXPECT_EQ(logs.Count({"consumes again"}), 1) << logs.All();
}

TEST_P(NatsSourceTest, ExistingAckAllDurableIsBoundNotReplaced) {
  MakeStream();
  const std::string durable = Settings().durable;
  jsConsumerConfig cc;
  jsConsumerConfig_Init(&cc);
  cc.Durable = durable.c_str();
  cc.AckPolicy = js_AckAll;
  const std::string only_b = prefix_ + ".b";
  cc.FilterSubject = only_b.c_str();
  jsConsumerInfo* ci = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  ASSERT_EQ(js_AddConsumer(&ci, js_, stream_name_.c_str(), &cc, nullptr, &jerr), NATS_OK) << jerr;
  jsConsumerInfo_Destroy(ci);
  NatsSourceSettings s = Settings();
  s.filter_subject.reset();
  ASSERT_NE(Started(s), nullptr);
  Publish(prefix_ + ".a", R"({"id":"not-mine"})");
  for (int i = 0; i < 5; ++i) Publish(only_b, R"({"id":"b-)" + std::to_string(i) + R"("})");
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 5; }));
  ASSERT_TRUE(WaitUntil([&] { return AllAcked(durable); }));  // the last ack acks them all
  EXPECT_EQ(Rows("idempotency_key = 'not-mine'"), 0);
  ci = nullptr;
  ASSERT_EQ(js_GetConsumerInfo(&ci, js_, stream_name_.c_str(), durable.c_str(), nullptr, &jerr),
            NATS_OK);
  EXPECT_EQ(ci->Config->AckPolicy, js_AckAll);
  jsConsumerInfo_Destroy(ci);
}

TEST_P(NatsSourceTest, TwoSourcesOnOneDurableStoreEveryMessageOnce) {
  MakeStream();
  ASSERT_NE(Started(Settings()), nullptr);
  ASSERT_NE(Started(Settings()), nullptr);  // a second replica, same source and durable
  constexpr int kMessages = 400;
  for (int i = 0; i < kMessages; ++i) {
    Publish(prefix_ + ".a", R"({"id":"r-)" + std::to_string(i) + R"("})");
  }
  ASSERT_TRUE(WaitUntil([&] { return Rows() == kMessages; }, 60s));
  ASSERT_TRUE(WaitUntil([&] { return AllAcked(Settings().durable); }));
  EXPECT_EQ(Rows(), kMessages);
  std::string m = metrics_.Render();
  EXPECT_THAT(m, HasSubstr(R"(queuebox_inbox_messages_total{status="new"} 400)"));
  // Each message went to one replica only: none was even offered twice.
  EXPECT_THAT(m, ::testing::Not(HasSubstr(R"(queuebox_inbox_messages_total{status="duplicate"})")));
}

TEST_P(NatsSourceTest, UnackedMessagesOfACrashedConsumerAreRedeliveredAfterAckWait) {
  MakeStream();
  NatsSourceSettings s = Settings();
  s.ack_wait_ms = 1000;
  // The "crashed replica": creates the durable, fetches three messages and never acks them.
  jsConsumerConfig cc;
  jsConsumerConfig_Init(&cc);
  cc.Durable = s.durable.c_str();
  cc.AckPolicy = js_AckExplicit;
  cc.AckWait = 1000 * 1000000LL;
  cc.FilterSubject = s.filter_subject->c_str();
  jsConsumerInfo* ci = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  ASSERT_EQ(js_AddConsumer(&ci, js_, stream_name_.c_str(), &cc, nullptr, &jerr), NATS_OK);
  jsConsumerInfo_Destroy(ci);
  for (int i = 0; i < 3; ++i) Publish(prefix_ + ".a", R"({"id":"c-)" + std::to_string(i) + R"("})");
  {
    natsSubscription* sub = nullptr;
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = stream_name_.c_str();
    so.Consumer = s.durable.c_str();
    ASSERT_EQ(js_PullSubscribe(&sub, js_, nullptr, s.durable.c_str(), nullptr, &so, &jerr),
              NATS_OK);
    natsMsgList list{};
    ASSERT_EQ(natsSubscription_Fetch(&list, sub, 3, 5000, &jerr), NATS_OK);
    EXPECT_EQ(list.Count, 3);
    natsMsgList_Destroy(&list);
    natsSubscription_Destroy(sub);
  }
  // The crashed replica holds all three: only a redelivery can give them to the source.
  ASSERT_EQ(Consumer(s.durable).ack_pending, 3);
  ASSERT_EQ(Consumer(s.durable).pending, 0);
  ASSERT_NE(Started(s), nullptr);
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 3; }, 30s));
  ASSERT_TRUE(WaitUntil([&] { return AllAcked(s.durable); }));
}

TEST_P(NatsSourceTest, BrokerConnectionCutAndRestoredLosesNothing) {
  MakeStream();
  LogCapture logs;
  const int port = testing::UnusedLoopbackPort();
  auto forwarder = std::make_unique<testing::TcpForwarder>(port, PortOf(nats_url_));
  ASSERT_TRUE(forwarder->Start().ok());
  NatsSourceSettings s = Settings();
  s.servers = "nats://127.0.0.1:" + std::to_string(port);
  // What the cut loses in flight (a pull request the server answers into the dead connection,
  // an ack not yet written) is redelivered after ackWait and dropped by the inbox key: a short
  // ackWait keeps that within the test's waits.
  s.ack_wait_ms = 2000;
  sources::BrokerSource* source = Started(s);
  ASSERT_NE(source, nullptr);
  for (int i = 0; i < 10; ++i)
    Publish(prefix_ + ".a", R"({"id":"x-)" + std::to_string(i) + R"("})");
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 10 && source->healthy() && AllAcked(s.durable); }));

  forwarder.reset();  // the broker "restarts": the connection is cut, new ones refused
  ASSERT_TRUE(WaitUntil([&] { return !source->healthy(); }, 30s)) << logs.All();
  for (int i = 10; i < 30; ++i)
    Publish(prefix_ + ".a", R"({"id":"x-)" + std::to_string(i) + R"("})");
  ASSERT_TRUE(WaitUntil([&] { return logs.Count({"lost its broker"}) > 0; })) << logs.All();
  EXPECT_EQ(Rows(), 10);

  forwarder = std::make_unique<testing::TcpForwarder>(port, PortOf(nats_url_));
  ASSERT_TRUE(forwarder->Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 30; }, 90s)) << logs.All();
  ASSERT_TRUE(WaitUntil([&] { return source->healthy(); }, 60s));
  ASSERT_TRUE(WaitUntil([&] { return AllAcked(s.durable); }, 60s)) << logs.All();
  EXPECT_EQ(Rows(), 30);
  EXPECT_EQ(logs.Count({"lost its broker"}), 1) << logs.All();  // one WARN per outage
  EXPECT_EQ(logs.Count({"consumes again"}), 1) << logs.All();
}

TEST_P(NatsSourceTest, StreamDeletedWhileConsumingIsReportedAndConsumedAgainOnceRecreated) {
  MakeStream();
  LogCapture logs;
  sources::BrokerSource* source = Started(Settings());
  ASSERT_NE(source, nullptr);
  Publish(prefix_ + ".a", R"({"id":"before"})");
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 1 && source->healthy(); }));
  jsErrCode jerr;
  ASSERT_EQ(js_DeleteStream(js_, stream_name_.c_str(), nullptr, &jerr), NATS_OK);
  ASSERT_TRUE(WaitUntil([&] { return !source->healthy(); }, 30s)) << logs.All();
  // One WARN for the outage, naming the stream (later reasons of the same outage, such as the
  // missing stream on the next bind, are not logged again).
  ASSERT_TRUE(WaitUntil([&] {
    return logs.Count({"lost its broker", stream_name_}) > 0;
  })) << logs.All();
  jsCtx_Destroy(js_);
  js_ = nullptr;
  stream_.reset();  // its destructor deletes nothing more
  MakeStream();     // recreated: the durable is created again on it
  Publish(prefix_ + ".a", R"({"id":"after"})");
  ASSERT_TRUE(WaitUntil([&] { return Rows() == 2; }, 60s)) << logs.All();
  EXPECT_TRUE(WaitUntil([&] { return source->healthy(); }));
  EXPECT_EQ(logs.Count({"lost its broker"}), 1) << logs.All();
}

INSTANTIATE_TEST_SUITE_P(Dialects, NatsSourceTest,
                         ::testing::Values(std::string("sqlite"), std::string("postgresql")),
                         Dialect);

// The database goes away mid-consumption: the batch is NAKed, nothing is acked that was not
// stored, and once the database is back every message is stored exactly once.
TEST(NatsSourceOutageTest, DatabaseCutMidConsumptionAcksOnlyWhatWasStored) {
  std::string nats_url, pg_url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_NATS_URL", nats_url);
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
  LogCapture logs;
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

  const std::string id = "out_" + std::to_string(::getpid());
  testing::JetStreamTestStream stream(nats_url, "QBSRC_" + id, "qbsrc." + id);
  jsCtx* js = nullptr;
  ASSERT_EQ(natsConnection_JetStream(&js, stream.nc(), nullptr), NATS_OK);
  auto publish = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      std::string body = R"({"id":"d-)" + std::to_string(i) + R"("})";
      jsErrCode jerr;
      ASSERT_EQ(js_Publish(nullptr, js, ("qbsrc." + id + ".a").c_str(), body.data(),
                           static_cast<int>(body.size()), nullptr, &jerr),
                NATS_OK);
    }
  };
  auto consumer = [&] {
    jsConsumerInfo* ci = nullptr;
    jsErrCode jerr;
    std::pair<uint64_t, int64_t> out{0, -1};  // ack floor (stream seq), ack pending + pending
    if (js_GetConsumerInfo(&ci, js, ("QBSRC_" + id).c_str(), ("qb_" + id).c_str(), nullptr,
                           &jerr) == NATS_OK) {
      out = {ci->AckFloor.Stream, ci->NumAckPending + static_cast<int64_t>(ci->NumPending)};
      jsConsumerInfo_Destroy(ci);
    }
    return out;
  };
  auto rows = [&] { return std::stoll(db.Scalar("SELECT COUNT(*) FROM inbox")); };

  queuebox::Metrics metrics;
  NatsSourceSettings s;
  s.name = "orders";
  s.servers = nats_url;
  s.stream = "QBSRC_" + id;
  s.durable = "qb_" + id;
  s.batch_size = 20;
  sources::BrokerSourceContext ctx;
  ctx.intake = store->inbox();
  ctx.observer = &metrics;
  auto made = sources::CreateNatsSource(s, ctx);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<sources::BrokerSource> source = std::move(made).value();
  ASSERT_TRUE(source->Start().ok());

  publish(0, 50);
  ASSERT_TRUE(WaitUntil([&] { return rows() == 50 && consumer().second == 0; }));
  forwarder.reset();  // the database goes away
  publish(50, 100);
  ASSERT_TRUE(WaitUntil([&] { return logs.Count({"cannot store into the inbox"}) > 0; }, 60s))
      << logs.All();
  // Nothing acked beyond what the database holds (the ack floor is a stream sequence; the
  // stream holds only this test's messages, 1..100).
  EXPECT_EQ(rows(), 50);
  EXPECT_LE(consumer().first, 50u);
  EXPECT_THAT(metrics.Render(),
              HasSubstr(R"(queuebox_inbox_rejections_total{reason="storage_failed"})"));

  forwarder = std::make_unique<testing::TcpForwarder>(port, pg_port);  // the database is back
  ASSERT_TRUE(forwarder->Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return rows() == 100 && consumer().second == 0; }, 90s))
      << logs.All();
  EXPECT_EQ(db.Scalar("SELECT COUNT(DISTINCT idempotency_key) FROM inbox"), "100");
  EXPECT_TRUE(source->healthy());
  source->Stop();  // "again" is written after the store commits: joined, it is there
  EXPECT_EQ(logs.Count({"cannot store into the inbox"}), 1) << logs.All();
  EXPECT_EQ(logs.Count({"stores into the inbox again"}), 1) << logs.All();
  jsCtx_Destroy(js);
}

// username/password reach the server; a wrong password keeps the source down with one WARN
// that never shows it. A private nats-server of this test (the shared one has no users).
TEST(NatsSourceCredentialsTest, UserAndPasswordConsumeAndAWrongPasswordIsNeverLogged) {
  testing::TempDir dir;
  const int port = testing::UnusedLoopbackPort();
  testing::ChildProcess server(testing::PrivateNatsServer::NatsServerPath(),
                               {"-a", "127.0.0.1", "-p", std::to_string(port), "-js", "-sd",
                                dir.File("js"), "--user", "qbuser", "--pass", "right-pass-4821"},
                               {}, dir.File("nats.log"));
  const std::string url = "nats://qbuser:right-pass-4821@127.0.0.1:" + std::to_string(port);
  ASSERT_TRUE(WaitUntil([&] {
    natsConnection* probe = nullptr;
    bool up = natsConnection_ConnectTo(&probe, url.c_str()) == NATS_OK;
    natsConnection_Destroy(probe);
    return up;
  })) << server.Log();
  testing::JetStreamTestStream stream(url, "CREDS", "creds");
  jsCtx* js = nullptr;
  ASSERT_EQ(natsConnection_JetStream(&js, stream.nc(), nullptr), NATS_OK);
  jsErrCode jerr;
  const std::string body = R"({"id":"k-1"})";
  ASSERT_EQ(js_Publish(nullptr, js, "creds.a", body.data(), static_cast<int>(body.size()), nullptr,
                       &jerr),
            NATS_OK);
  jsCtx_Destroy(js);

  testing::StoreDb db("sqlite");
  db.Create("");
  std::unique_ptr<OutboxStore> store = db.Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Migrate(std::nullopt).ok());
  sources::BrokerSourceContext ctx;
  ctx.intake = store->inbox();
  LogCapture logs;
  auto make = [&](const std::string& name, const std::string& password) {
    NatsSourceSettings s;
    s.name = name;
    s.servers = "nats://127.0.0.1:" + std::to_string(port);
    s.stream = "CREDS";
    s.durable = name;
    s.username = "qbuser";
    s.password = password;
    auto made = sources::CreateNatsSource(s, ctx);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return made.ok() ? std::move(made).value() : nullptr;
  };
  auto wrong = make("wrong", "wrong-pass-7733");
  auto right = make("right", "right-pass-4821");
  ASSERT_TRUE(wrong && right);
  ASSERT_TRUE(wrong->Start().ok());
  ASSERT_TRUE(right->Start().ok());
  ASSERT_TRUE(WaitUntil([&] {
    return db.Scalar("SELECT COUNT(*) FROM inbox WHERE source = 'right'") == "1";
  })) << logs.All();
  ASSERT_TRUE(WaitUntil([&] {
    return logs.Count({"cannot consume yet", "wrong"}) > 0;
  })) << logs.All();
  EXPECT_TRUE(right->healthy());
  EXPECT_FALSE(wrong->healthy());
  EXPECT_EQ(db.Scalar("SELECT COUNT(*) FROM inbox WHERE source = 'wrong'"), "0");
  EXPECT_EQ(logs.Count({"cannot consume yet", "\"wrong\""}), 1) << logs.All();
  EXPECT_EQ(logs.Count({"pass-"}), 0) << logs.All();  // neither password, ever
  wrong->Stop();
  right->Stop();
}

TEST(NatsSourceSettingsTest, BadSettingsAreRefusedNamingTheKey) {
  testing::StoreDb db("sqlite");
  db.Create("");
  std::unique_ptr<OutboxStore> store = db.Open();
  ASSERT_NE(store, nullptr);
  sources::BrokerSourceContext ctx;
  ctx.intake = store->inbox();
  auto refused = [&](const std::function<void(NatsSourceSettings&)>& change) {
    NatsSourceSettings s;
    s.name = "orders";
    s.servers = "nats://127.0.0.1:4222";
    s.stream = "ORDERS";
    s.durable = "queuebox";
    change(s);
    auto made = sources::CreateNatsSource(s, ctx);
    return made.ok() ? std::string("<accepted>") : made.status().message();
  };
  EXPECT_EQ(refused([](NatsSourceSettings&) {}), "<accepted>");
  EXPECT_THAT(refused([](NatsSourceSettings& s) { s.servers = " , "; }),
              HasSubstr("sources.orders.servers"));
  EXPECT_THAT(refused([](NatsSourceSettings& s) { s.stream = ""; }),
              HasSubstr("sources.orders.stream"));
  EXPECT_THAT(refused([](NatsSourceSettings& s) { s.durable = "a.b"; }),
              HasSubstr("sources.orders.durable"));
  EXPECT_THAT(refused([](NatsSourceSettings& s) { s.batch_size = 0; }),
              HasSubstr("sources.orders.batchSize"));
  EXPECT_THAT(refused([](NatsSourceSettings& s) { s.ack_wait_ms = 0; }),
              HasSubstr("sources.orders.ackWaitMs"));
  EXPECT_THAT(refused([](NatsSourceSettings& s) { s.username = "u"; }),
              HasSubstr("sources.orders.password"));
  EXPECT_THAT(refused([](NatsSourceSettings& s) {
                s.token = "t";
                s.username = "u";
                s.password = "p";
              }),
              HasSubstr("sources.orders.token"));
}

}  // namespace
}  // namespace queuebox
#endif  // QB_WITH_NATS
