// The kafka source (issue 15 items 2, 4, 5) against librdkafka's in-process mock cluster (3
// brokers on 127.0.0.1) and a real inbox (SQLite and PostgreSQL): records become rows (keys,
// headers, broker time), a poison record becomes a dead raw row, a duplicate is stored once, two
// replicas of one group share a multi-partition topic with every record stored once through
// rebalances, the database is cut mid-consumption (nothing committed that was not stored,
// nothing lost, no duplicate rows), and every broker goes down and comes back (health, one WARN).
#ifdef QB_WITH_KAFKA
#include "sources/kafka/kafka_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "admin/metrics.h"
#include "admin_test_support.h"
#include "core/log.h"
#include "sources/kafka/kafka_commit.h"
#include "testing/broker_servers.h"
#include "testing/http_receiver.h"
#include "testing/kafka_reader.h"
#include "testing/log_capture.h"
#include "testing/tcp_forwarder.h"

namespace queuebox {
namespace {

using nlohmann::json;
using ::queuebox::testing::LogCapture;
using ::queuebox::testing::NewKafkaClient;
using testing::DialectName;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Clock = std::chrono::steady_clock;

// queuebox_inbox_messages_total{status="<status>"} of `metrics` (0 when not exported yet).
int64_t InboxCount(Metrics& metrics, const std::string& status) {
  const std::string series = "queuebox_inbox_messages_total{status=\"" + status + "\"} ";
  const std::string text = metrics.Render();
  size_t at = text.find(series);
  if (at == std::string::npos) return 0;
  return std::stoll(text.substr(at + series.size()));
}
int64_t NewCount(Metrics& metrics) { return InboxCount(metrics, "new"); }

// Polls `done` until it holds or `limit` passed; the result of the last look.
// A fresh SQLite outbox database in `db`, migrated; null after a failed expectation.
std::unique_ptr<OutboxStore> MigratedSqlite(testing::StoreDb& db) {
  db.Create("");
  std::unique_ptr<OutboxStore> store = db.Open();
  if (store == nullptr || !store->Migrate(std::nullopt).ok()) {
    ADD_FAILURE() << "no migrated SQLite outbox";
    return nullptr;
  }
  return store;
}

bool Eventually(const std::function<bool()>& done,
                std::chrono::seconds limit = std::chrono::seconds(90)) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return done();
}

struct Record {
  int32_t partition = 0;
  std::optional<std::string> key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
  int64_t timestamp_ms = 0;  // 0: now
};

// Hands one record to `producer` (rd_kafka_produceva: no old-style casts of the V_ macros).
void ProduceOne(rd_kafka_t* producer, const std::string& topic, const Record& r) {
  rd_kafka_headers_t* h = rd_kafka_headers_new(r.headers.size());
  for (const auto& [name, value] : r.headers) {
    rd_kafka_header_add(h, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                        static_cast<ssize_t>(value.size()));
  }
  std::vector<rd_kafka_vu_t> vus(7);
  vus[0].vtype = RD_KAFKA_VTYPE_TOPIC;
  vus[0].u.cstr = topic.c_str();
  vus[1].vtype = RD_KAFKA_VTYPE_PARTITION;
  vus[1].u.i32 = r.partition;
  vus[2].vtype = RD_KAFKA_VTYPE_VALUE;
  vus[2].u.mem.ptr = const_cast<char*>(r.value.data());
  vus[2].u.mem.size = r.value.size();
  vus[3].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
  vus[3].u.i = RD_KAFKA_MSG_F_COPY;
  vus[4].vtype = RD_KAFKA_VTYPE_HEADERS;
  vus[4].u.headers = h;
  vus[5].vtype = RD_KAFKA_VTYPE_TIMESTAMP;
  vus[5].u.i64 = r.timestamp_ms;
  if (r.key) {
    vus[6].vtype = RD_KAFKA_VTYPE_KEY;
    vus[6].u.mem.ptr = const_cast<char*>(r.key->data());
    vus[6].u.mem.size = r.key->size();
  } else {
    vus.pop_back();
  }
  rd_kafka_error_t* error = rd_kafka_produceva(producer, vus.data(), vus.size());
  if (error != nullptr) {
    ADD_FAILURE() << "produce: " << rd_kafka_error_string(error);
    rd_kafka_error_destroy(error);
    rd_kafka_headers_destroy(h);
  }
}

class KafkaSourceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string pg_url;
    if (GetParam() == "postgresql") {
      QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
    }
    db_ = std::make_unique<testing::StoreDb>(GetParam());
    db_->Create(pg_url);
    OpenStore();
    mock_ = std::make_unique<testing::MockKafkaCluster>(3);
    producer_ = NewKafkaClient(RD_KAFKA_PRODUCER, {{"bootstrap.servers", mock_->bootstraps()}});
  }
  void TearDown() override {
    for (auto& s : sources_) s->Stop();
    sources_.clear();
    if (producer_ != nullptr) rd_kafka_destroy(producer_);
    mock_.reset();
    store_.reset();
  }

  void OpenStore() {
    store_ = db_->Open();
    ASSERT_NE(store_, nullptr);
    auto migrated = store_->Migrate(std::nullopt);
    ASSERT_TRUE(migrated.ok()) << migrated.status().ToString();
  }

  std::string NewTopic(int partitions) {
    static std::atomic<int> n{0};
    std::string t = "qb.src." + std::to_string(++n);
    EXPECT_EQ(rd_kafka_mock_topic_create(mock_->get(), t.c_str(), partitions, 3),
              RD_KAFKA_RESP_ERR_NO_ERROR);
    return t;
  }

  KafkaSourceSettings Settings(const std::string& topic) {
    KafkaSourceSettings s;
    s.name = "orders";
    s.bootstrap_servers = mock_->bootstraps();
    s.topics = {topic};
    s.group_id = "queuebox-" + topic;
    // Short group timings: the mock coordinator rebalances in seconds, not tens of seconds.
    s.librdkafka = {{"heartbeat.interval.ms", "250"}, {"session.timeout.ms", "6000"}};
    return s;
  }

  sources::BrokerSource* Start(KafkaSourceSettings s, Metrics* metrics = nullptr) {
    sources::BrokerSourceContext ctx;
    ctx.intake = store_->inbox();
    ctx.observer = metrics;
    auto made = sources::CreateKafkaSource(std::move(s), ctx);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    if (!made.ok()) return nullptr;
    Status started = (*made)->Start();
    EXPECT_TRUE(started.ok()) << started.ToString();
    sources_.push_back(std::move(made).value());
    return sources_.back().get();
  }

  void Produce(const std::string& topic, const std::vector<Record>& records) {
    for (const Record& r : records) ProduceOne(producer_, topic, r);
    ASSERT_EQ(rd_kafka_flush(producer_, 20000), RD_KAFKA_RESP_ERR_NO_ERROR);
  }

  // {"id": "p<partition>-<n>", "p": partition, "n": n} for n in [from, to) on each partition.
  void ProduceNumbered(const std::string& topic, int partitions, int from, int to) {
    std::vector<Record> records;
    for (int p = 0; p < partitions; ++p) {
      for (int n = from; n < to; ++n) {
        Record r;
        r.partition = p;
        r.value = json{
            {"id", "p" + std::to_string(p) + "-" + std::to_string(n)},
            {"p", p},
            {"n", n}}.dump();
        records.push_back(std::move(r));
      }
    }
    Produce(topic, records);
  }

  // The group's committed offsets of `topic` (0 when none).
  std::vector<int64_t> Committed(const std::string& group, const std::string& topic,
                                 int partitions) {
    return testing::CommittedKafkaOffsets(mock_->bootstraps(), group, topic, partitions);
  }

  int64_t Rows(const std::string& where = "1 = 1") {
    return std::stoll(db_->Scalar("SELECT COUNT(*) FROM inbox WHERE " + where));
  }
  json Column(const std::string& key, const std::string& column) {
    return json::parse(
        db_->Scalar("SELECT " + column + " FROM inbox WHERE idempotency_key = '" + key + "'"),
        nullptr, false);
  }

  std::set<std::string> ShareThePartitionsThroughTheGroup(KafkaSourceSettings s);
  // One commit refused with ILLEGAL_GENERATION after 10 stored records: the assignment is lost
  // and given back (s's protocol); asserts the replica resumed past what it stored.
  void LoseTheAssignmentAndResume(KafkaSourceSettings s, const std::string& topic);

  std::unique_ptr<testing::StoreDb> db_;
  std::unique_ptr<OutboxStore> store_;
  std::unique_ptr<testing::MockKafkaCluster> mock_;
  rd_kafka_t* producer_ = nullptr;
  // The metrics a test hands Start: the sources count into them until TearDown stops them,
  // after the test body has returned.
  Metrics metrics_;
  Metrics second_metrics_;  // a second replica's
  std::vector<std::unique_ptr<sources::BrokerSource>> sources_;
};

// Keys in QueueBox's precedence for Kafka (§9.4): $.id, then the record key, then the body
// digest; the aggregate id from the record key; headers as strings (binary as base64:); the
// event type from its header; the record timestamp as the publish time (§11.5).
TEST_P(KafkaSourceTest, RecordsBecomeRowsWithKeysHeadersAndRecordTime) {
  const std::string topic = NewTopic(1);
  Produce(topic, {
                     {0,
                      "cust-1",
                      R"({"id":"o1","total":5})",
                      {{"x-event-type", "order.created"}, {"bin", std::string("\xff\x00\x01", 3)}},
                      1000000000000},  // 2001-09-09: long before the receipt
                     {0, "cust-2", R"({"total":6})", {}, 0},
                     {0, std::nullopt, R"({"total":7})", {}, 0},
                 });
  KafkaSourceSettings s = Settings(topic);
  s.broker.event_type_from_header = true;
  s.broker.keys.scheduled_at_path = {"$.publishedAt"};
  s.broker.keys.initial_delay_ms = 10000;
  sources::BrokerSource* source = Start(s);
  ASSERT_NE(source, nullptr);
  EXPECT_EQ(source->component(), "kafka.orders");
  ASSERT_TRUE(Eventually([&] { return Rows() == 3; })) << Rows();
  EXPECT_TRUE(source->healthy());

  EXPECT_EQ(db_->Scalar("SELECT aggregate_id FROM inbox WHERE idempotency_key = 'o1'"), "cust-1");
  EXPECT_EQ(db_->Scalar("SELECT event_type FROM inbox WHERE idempotency_key = 'o1'"),
            "order.created");
  json headers = Column("o1", "headers");
  EXPECT_EQ(headers["x-event-type"], "order.created") << headers.dump();
  EXPECT_EQ(headers["bin"], "base64:/wAB") << headers.dump();
  EXPECT_EQ(Column("o1", "payload"), json({{"id", "o1"}, {"total", 5}}));
  // No $.id: the record key is the idempotency key and the aggregate id.
  EXPECT_EQ(db_->Scalar("SELECT aggregate_id FROM inbox WHERE idempotency_key = 'cust-2'"),
            "cust-2");
  // No $.id and no key: the body digest; no aggregate.
  EXPECT_EQ(Rows("idempotency_key LIKE 'sha256:%' AND aggregate_id IS NULL"), 1);
  EXPECT_EQ(Rows("source = 'orders' AND state = 'pending'"), 3);
  // The 2001 record time schedules before the receipt; the others (now) are held 10 s past it.
  EXPECT_EQ(Rows("idempotency_key = 'o1' AND scheduled_at < created_at"), 1);
  EXPECT_EQ(Rows("idempotency_key <> 'o1' AND scheduled_at > created_at"), 2);
  EXPECT_TRUE(Eventually([&] { return Committed(s.group_id, topic, 1)[0] == 3; }));
}

// A record that is not JSON becomes a dead {"raw": ...} row and is committed with the others.
TEST_P(KafkaSourceTest, PoisonRecordIsADeadRawRowAndTheOthersAreStored) {
  const std::string topic = NewTopic(1);
  Produce(topic, {{0, std::nullopt, R"({"id":"a"})", {}, 0},
                  {0, std::nullopt, "not json {", {}, 0},
                  {0, std::nullopt, R"({"id":"b"})", {}, 0}});
  KafkaSourceSettings s = Settings(topic);
  Start(s);
  ASSERT_TRUE(Eventually([&] { return Rows() == 3; })) << Rows();
  EXPECT_EQ(Rows("idempotency_key IN ('a', 'b') AND state = 'pending'"), 2);
  EXPECT_EQ(Rows("idempotency_key LIKE 'sha256:%' AND state = 'dead'"), 1);
  std::string dead_key = db_->Scalar("SELECT idempotency_key FROM inbox WHERE state = 'dead'");
  EXPECT_EQ(Column(dead_key, "payload"), json({{"raw", "not json {"}}));
  EXPECT_TRUE(Eventually([&] { return Committed(s.group_id, topic, 1)[0] == 3; }));
}

// Two records with one key in one fetched batch: one row, the second counted as a duplicate,
// both committed.
TEST_P(KafkaSourceTest, DuplicateInsideOneBatchIsStoredOnce) {
  const std::string topic = NewTopic(1);
  Produce(topic, {{0, std::nullopt, R"({"id":"same","n":1})", {}, 0},
                  {0, std::nullopt, R"({"id":"same","n":2})", {}, 0},
                  {0, std::nullopt, R"({"id":"other"})", {}, 0}});
  Metrics& metrics = metrics_;
  KafkaSourceSettings s = Settings(topic);
  Start(s, &metrics);
  ASSERT_TRUE(Eventually([&] { return Committed(s.group_id, topic, 1)[0] == 3; }));
  EXPECT_EQ(Rows(), 2);
  EXPECT_EQ(Column("same", "payload"), json({{"id", "same"}, {"n", 1}}));
  EXPECT_THAT(metrics.Render(),
              HasSubstr(R"(queuebox_inbox_messages_total{status="duplicate"} 1)"));
  EXPECT_THAT(metrics.Render(), HasSubstr(R"(queuebox_inbox_messages_total{status="new"} 2)"));
}

// The header filter drops a record: no row, counted as filtered, and committed with the others.
TEST_P(KafkaSourceTest, FilteredRecordsLeaveNoRowAndAreCommitted) {
  const std::string topic = NewTopic(1);
  Produce(topic, {{0, std::nullopt, R"({"id":"prod-1"})", {{"X-Env", "prod"}}, 0},
                  {0, std::nullopt, R"({"id":"test-1"})", {{"X-Env", "test"}}, 0},
                  {0, std::nullopt, R"({"id":"none-1"})", {}, 0}});
  Metrics& metrics = metrics_;
  KafkaSourceSettings s = Settings(topic);
  s.broker.keys.filter = json::parse(R"({"require":[{"header":"x-env","equals":"prod"}]})");
  Start(s, &metrics);
  ASSERT_TRUE(Eventually([&] { return Committed(s.group_id, topic, 1)[0] == 3; }));
  EXPECT_EQ(Rows(), 1);
  EXPECT_EQ(Rows("idempotency_key = 'prod-1'"), 1);
  EXPECT_THAT(metrics.Render(), HasSubstr(R"(queuebox_inbox_filtered_total{source="orders"} 2)"));
}

// Replicas: two members of one group on a 4-partition topic, joined and left while records flow
// (each rebalance commits what is stored before the partitions move): every record stored, no
// duplicate row, the group's offsets at the end of every partition, no failed rebalance. Returns
// the rebalance protocols the INFO lines of the assignments name.
std::set<std::string> KafkaSourceTest::ShareThePartitionsThroughTheGroup(KafkaSourceSettings s) {
  constexpr int kPartitions = 4;
  const std::string topic = NewTopic(kPartitions);
  s.topics = {topic};
  s.group_id = "queuebox-" + topic;
  s.max_poll_records = 20;
  LogCapture logs;
  Metrics& a_metrics = metrics_;
  Metrics& b_metrics = second_metrics_;
  sources::BrokerSource* a = Start(s, &a_metrics);
  ProduceNumbered(topic, kPartitions, 0, 50);
  EXPECT_TRUE(Eventually([&] { return Rows() == 200; })) << Rows();

  // The group rebalances over both; records keep coming until the second replica stored some.
  sources::BrokerSource* b = Start(s, &b_metrics);
  int produced = 50;
  for (int round = 0; round < 300 && NewCount(b_metrics) == 0; ++round) {
    ProduceNumbered(topic, kPartitions, produced, produced + 5);
    produced += 5;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_GT(NewCount(b_metrics), 0) << "the second replica never got a partition";
  EXPECT_TRUE(Eventually([&] { return Rows() == kPartitions * produced; })) << Rows();

  a->Stop();  // leaves the group: its partitions go to b
  ProduceNumbered(topic, kPartitions, produced, produced + 50);
  produced += 50;
  EXPECT_TRUE(Eventually([&] { return Rows() == kPartitions * produced; })) << Rows();
  b->Stop();

  EXPECT_EQ(Rows(), kPartitions * produced);
  EXPECT_EQ(db_->Scalar("SELECT COUNT(DISTINCT idempotency_key) FROM inbox"),
            std::to_string(kPartitions * produced));
  EXPECT_EQ(NewCount(a_metrics) + NewCount(b_metrics), kPartitions * produced);
  EXPECT_EQ(Committed(s.group_id, topic, kPartitions), std::vector<int64_t>(kPartitions, produced));
  EXPECT_EQ(logs.Count("rebalance failed"), 0) << logs.All();
  std::set<std::string> protocols;
  for (const json& line : logs.WithMessage("Kafka source assigned partitions")) {
    protocols.insert(line.value("protocol", "?"));
  }
  return protocols;
}

TEST_P(KafkaSourceTest, ReplicasShareThePartitionsThroughTheGroup) {
  EXPECT_THAT(ShareThePartitionsThroughTheGroup(Settings("")), ElementsAre("EAGER"));
}

// `cooperative-sticky` (a user's librdkafka property): librdkafka then refuses the eager
// rd_kafka_assign, so the source must assign and unassign incrementally. When a replica leaves,
// the other one's commits of its own partitions are refused for the old generation and
// librdkafka drops its assignment as lost; it gets the partitions back and must commit what it
// stored meanwhile (LostAssignmentResumesPastWhatWasStoredAndCommitsIt).
TEST_P(KafkaSourceTest, ReplicasShareThePartitionsWithCooperativeRebalancing) {
  KafkaSourceSettings s = Settings("");
  s.librdkafka["partition.assignment.strategy"] = "cooperative-sticky";
  EXPECT_THAT(ShareThePartitionsThroughTheGroup(s), ElementsAre("COOPERATIVE"));
}

// A commit refused as ILLEGAL_GENERATION (what a replica's commits get while the group rebalances
// without it) makes librdkafka drop the assignment as lost, and with it the stored offsets of the
// records the replica had already stored. When the partition comes back the replica resumes past
// what it stored and commits that at once: nothing is read again (no duplicate) and the group's
// offset is at the end, before any new record and after the stop.
void KafkaSourceTest::LoseTheAssignmentAndResume(KafkaSourceSettings s, const std::string& topic) {
  Metrics& metrics = metrics_;
  LogCapture logs;
  sources::BrokerSource* source = Start(s, &metrics);
  ASSERT_NE(source, nullptr);
  ProduceNumbered(topic, 1, 0, 10);
  ASSERT_TRUE(Eventually([&] { return Committed(s.group_id, topic, 1)[0] == 10; }));

  // The commit of the next records is refused: the assignment is lost, then given back.
  rd_kafka_mock_push_request_errors(mock_->get(), 8 /* OffsetCommit */, 1,
                                    RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION);
  ProduceNumbered(topic, 1, 10, 20);
  ASSERT_TRUE(Eventually([&] { return Rows() == 20; })) << Rows();
  ASSERT_TRUE(Eventually([&] { return logs.Count({"Kafka source assigned partitions"}) == 2; }))
      << logs.All();
  EXPECT_TRUE(Eventually([&] { return Committed(s.group_id, topic, 1)[0] == 20; }));
  source->Stop();

  EXPECT_EQ(Committed(s.group_id, topic, 1), std::vector<int64_t>{20});
  EXPECT_EQ(Rows(), 20);
  EXPECT_EQ(NewCount(metrics), 20);
  EXPECT_EQ(InboxCount(metrics, "duplicate"), 0);  // nothing read again
  EXPECT_EQ(logs.Count({"Kafka source partitions revoked"}), 2) << logs.All();  // lost, stop
}

TEST_P(KafkaSourceTest, LostAssignmentResumesPastWhatWasStoredAndCommitsIt) {
  const std::string topic = NewTopic(1);
  KafkaSourceSettings s = Settings(topic);
  s.librdkafka["partition.assignment.strategy"] = "cooperative-sticky";
  LoseTheAssignmentAndResume(s, topic);
}

// The same with the default, eager protocol (rd_kafka_assign instead of the incremental calls).
TEST_P(KafkaSourceTest, LostAssignmentResumesPastWhatWasStoredWithEagerRebalancing) {
  const std::string topic = NewTopic(1);
  LoseTheAssignmentAndResume(Settings(topic), topic);
}

// The group's first commit is refused (ILLEGAL_GENERATION): the group has no committed offset
// when the partition comes back, so the stored_ mark is not applied (it could belong to a topic
// deleted since) and the partition starts as configured (earliest): every record is read again
// and deduplicated, none is lost, and the re-read is committed.
TEST_P(KafkaSourceTest, LostFirstCommitRereadsFromTheStartAndLosesNothing) {
  const std::string topic = NewTopic(1);
  Metrics& metrics = metrics_;
  KafkaSourceSettings s = Settings(topic);
  LogCapture logs;
  rd_kafka_mock_push_request_errors(mock_->get(), 8 /* OffsetCommit */, 1,
                                    RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION);
  ProduceNumbered(topic, 1, 0, 10);
  sources::BrokerSource* source = Start(s, &metrics);
  ASSERT_NE(source, nullptr);
  ASSERT_TRUE(Eventually([&] { return logs.Count({"Kafka source assigned partitions"}) == 2; }))
      << logs.All();
  // The refused commit is that of the first stored batch: all ten records, or on a loaded
  // machine only the first few (one, in a run beside three busy loops). Read again from the start,
  // exactly those come back as duplicates: at least one (resuming at the stored mark would give
  // none), and every record is stored once.
  ASSERT_TRUE(Eventually([&] {
    return NewCount(metrics) == 10 && InboxCount(metrics, "duplicate") >= 1;
  })) << "duplicates "
      << InboxCount(metrics, "duplicate") << ", new " << NewCount(metrics) << "\n"
      << logs.All();
  EXPECT_TRUE(Eventually([&] { return Committed(s.group_id, topic, 1)[0] == 10; }));
  source->Stop();
  EXPECT_EQ(Committed(s.group_id, topic, 1), std::vector<int64_t>{10});
  EXPECT_EQ(Rows(), 10);
  EXPECT_EQ(NewCount(metrics), 10);
}

INSTANTIATE_TEST_SUITE_P(Dialects, KafkaSourceTest,
                         ::testing::Values(std::string("sqlite"), std::string("postgresql")),
                         DialectName);

// Settings the source refuses, each naming its key.
TEST(KafkaSourceSettingsTest, BadSettingsNameTheirKey) {
  testing::StoreDb db("sqlite");
  db.Create("");
  auto store = db.Open();
  ASSERT_NE(store, nullptr);
  sources::BrokerSourceContext ctx;
  ctx.intake = store->inbox();
  auto good = [] {
    KafkaSourceSettings s;
    s.name = "orders";
    s.bootstrap_servers = "127.0.0.1:9";
    s.topics = {"orders"};
    s.group_id = "g";
    return s;
  };
  auto refused = [&](const std::function<void(KafkaSourceSettings&)>& change) {
    KafkaSourceSettings s = good();
    change(s);
    auto made = sources::CreateKafkaSource(s, ctx);
    EXPECT_FALSE(made.ok());
    return made.ok() ? std::string() : made.status().message();
  };
  EXPECT_TRUE(sources::CreateKafkaSource(good(), ctx).ok());
  EXPECT_THAT(refused([](auto& s) { s.topics = {}; }), HasSubstr("sources.orders.topics"));
  EXPECT_THAT(refused([](auto& s) {
                s.topics = {"a", " "};
              }),
              HasSubstr("sources.orders.topics: entry 1 is blank"));
  EXPECT_THAT(refused([](auto& s) { s.group_id = ""; }), HasSubstr("sources.orders.groupId"));
  EXPECT_THAT(refused([](auto& s) { s.bootstrap_servers = ""; }),
              HasSubstr("sources.orders.bootstrapServers"));
  EXPECT_THAT(refused([](auto& s) { s.auto_offset_reset = "smallest"; }),
              HasSubstr("sources.orders.autoOffsetReset"));
  EXPECT_THAT(refused([](auto& s) { s.max_poll_records = 0; }),
              HasSubstr("sources.orders.maxPollRecords"));
  std::string sasl = refused([](auto& s) {
    s.security_protocol = "SASL_SSL";
    s.sasl_mechanism = "PLAIN";
    s.sasl_password = "s3cret-pw";
  });
  EXPECT_THAT(sasl, HasSubstr("sources.orders.saslUsername"));
  EXPECT_THAT(sasl, ::testing::Not(HasSubstr("s3cret-pw")));
}

// A SASL password reaches librdkafka (which attempts SASL) and never the logs.
TEST(KafkaSourceSecretsTest, TheSaslPasswordNeverReachesTheLogs) {
  LogCapture logs;
  testing::StoreDb db("sqlite");
  std::unique_ptr<OutboxStore> store = MigratedSqlite(db);
  ASSERT_NE(store, nullptr);
  testing::MockKafkaCluster mock(1);
  ASSERT_EQ(rd_kafka_mock_topic_create(mock.get(), "qb.sasl", 1, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  KafkaSourceSettings s;
  s.name = "orders";
  s.bootstrap_servers = mock.bootstraps();
  s.topics = {"qb.sasl"};
  s.group_id = "qb-sasl";
  s.security_protocol = "SASL_PLAINTEXT";
  s.sasl_mechanism = "PLAIN";
  s.sasl_username = "relay";
  s.sasl_password = "pw-never-logged-7";
  sources::BrokerSourceContext ctx;
  ctx.intake = store->inbox();
  auto made = sources::CreateKafkaSource(s, ctx);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  ASSERT_TRUE((*made)->Start().ok());
  // The mock broker has no SASL: the client's attempt fails and is logged (with the reason).
  ASSERT_TRUE(Eventually([&] { return logs.Count("SASL") >= 1; }, std::chrono::seconds(30)));
  EXPECT_FALSE((*made)->healthy());
  (*made)->Stop();
  EXPECT_EQ(logs.Count("pw-never-logged-7"), 0);
}

// The database goes away while records flow (a TCP forwarder in front of PostgreSQL is cut):
// the source seeks back and retries; while it is away no committed offset passes a record that
// is not stored; once it is back every record is stored once and the offsets reach the end.
TEST(KafkaSourceOutageTest, DatabaseCutMidConsumptionLosesNothingAndCommitsOnlyStored) {
  std::string pg_url;
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

  testing::MockKafkaCluster mock(3);
  const std::string topic = "qb.outage";
  ASSERT_EQ(rd_kafka_mock_topic_create(mock.get(), topic.c_str(), 2, 3),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_t* producer = NewKafkaClient(
      RD_KAFKA_PRODUCER, {{"bootstrap.servers", mock.bootstraps()}, {"linger.ms", "0"}});
  auto produce = [&](int from, int to) {
    for (int p = 0; p < 2; ++p) {
      for (int n = from; n < to; ++n) {
        ProduceOne(producer, topic,
                   {p,
                    std::nullopt,
                    json{{"id", "p" + std::to_string(p) + "-" + std::to_string(n)}}.dump(),
                    {},
                    0});
      }
    }
    ASSERT_EQ(rd_kafka_flush(producer, 20000), RD_KAFKA_RESP_ERR_NO_ERROR);
  };
  auto rows = [&](const std::string& where) {
    return std::stoll(db.Scalar("SELECT COUNT(*) FROM inbox WHERE " + where));
  };
  auto committed = [&] {
    return testing::CommittedKafkaOffsets(mock.bootstraps(), "qb-out", topic, 2);
  };

  KafkaSourceSettings s;
  s.name = "orders";
  s.bootstrap_servers = mock.bootstraps();
  s.topics = {topic};
  s.group_id = "qb-out";
  s.max_poll_records = 10;
  sources::BrokerSourceContext ctx;
  ctx.intake = store->inbox();
  auto made = sources::CreateKafkaSource(s, ctx);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<sources::BrokerSource> source = std::move(made).value();
  ASSERT_TRUE(source->Start().ok());

  produce(0, 50);
  ASSERT_TRUE(Eventually([&] { return rows("1 = 1") == 100; }));

  forwarder.reset();  // every connection to the database is cut; new ones are refused
  produce(50, 100);
  ASSERT_TRUE(Eventually([&] { return logs.Count("cannot store a batch") >= 1; }));
  // While it is away: every committed offset is covered by stored rows of its partition (a
  // partition's records are stored in offset order, so its stored rows are a prefix).
  for (int look = 0; look < 5; ++look) {
    std::vector<int64_t> c = committed();
    for (int p = 0; p < 2; ++p) {
      EXPECT_LE(c[p], rows("idempotency_key LIKE 'p" + std::to_string(p) + "-%'"))
          << "partition " << p;
    }
  }
  EXPECT_EQ(rows("1 = 1"), 100);  // nothing was stored while it was away

  forwarder = std::make_unique<testing::TcpForwarder>(port, pg_port);  // the database is back
  ASSERT_TRUE(forwarder->Start().ok());
  ASSERT_TRUE(Eventually([&] { return rows("1 = 1") == 200; })) << rows("1 = 1");
  EXPECT_TRUE(Eventually([&] { return committed() == std::vector<int64_t>{100, 100}; }));
  source->Stop();
  EXPECT_EQ(db.Scalar("SELECT COUNT(DISTINCT idempotency_key) FROM inbox"), "200");
  EXPECT_EQ(logs.Count("cannot store a batch"), 1);  // one WARN for the outage
  EXPECT_EQ(logs.Count("Kafka source stores again"), 1);
  rd_kafka_destroy(producer);
}

// Every broker goes down and comes back: health goes down with one WARN for the outage and up
// again, and records produced after the return are stored. A source started while every broker
// is down reports unhealthy until one answers.
TEST(KafkaSourceOutageTest, BrokersDownAndBackFlipHealthWithOneWarn) {
  LogCapture logs;
  testing::StoreDb db("sqlite");
  std::unique_ptr<OutboxStore> store = MigratedSqlite(db);
  ASSERT_NE(store, nullptr);
  testing::MockKafkaCluster mock(3);
  const std::string topic = "qb.down";
  ASSERT_EQ(rd_kafka_mock_topic_create(mock.get(), topic.c_str(), 1, 3),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  auto set_brokers = [&](bool up) {
    for (int32_t id = 1; id <= 3; ++id) {
      if (up) {
        rd_kafka_mock_broker_set_up(mock.get(), id);
      } else {
        rd_kafka_mock_broker_set_down(mock.get(), id);
      }
    }
  };
  rd_kafka_t* producer =
      NewKafkaClient(RD_KAFKA_PRODUCER, {{"bootstrap.servers", mock.bootstraps()}});
  auto produce = [&](const std::string& id) {
    ProduceOne(producer, topic, {0, std::nullopt, json{{"id", id}}.dump(), {}, 0});
    ASSERT_EQ(rd_kafka_flush(producer, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
  };
  auto rows = [&] { return std::stoll(db.Scalar("SELECT COUNT(*) FROM inbox")); };

  KafkaSourceSettings s;
  s.name = "orders";
  s.bootstrap_servers = mock.bootstraps();
  s.topics = {topic};
  s.group_id = "qb-down";
  sources::BrokerSourceContext ctx;
  ctx.intake = store->inbox();

  set_brokers(false);  // down before the source starts
  auto made = sources::CreateKafkaSource(s, ctx);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<sources::BrokerSource> source = std::move(made).value();
  ASSERT_TRUE(source->Start().ok());
  ASSERT_TRUE(Eventually([&] { return logs.Count("reaches no broker") == 1; }));
  EXPECT_FALSE(source->healthy());
  set_brokers(true);
  ASSERT_TRUE(Eventually([&] { return source->healthy(); }));
  produce("before");
  ASSERT_TRUE(Eventually([&] { return rows() == 1; }));

  set_brokers(false);
  ASSERT_TRUE(Eventually([&] { return !source->healthy(); })) << logs.All();
  // One line per outage (the flag flips before the line is written: wait for it).
  EXPECT_TRUE(Eventually([&] { return logs.Count("reaches no broker") == 2; })) << logs.All();
  set_brokers(true);
  ASSERT_TRUE(Eventually([&] { return source->healthy(); }));
  EXPECT_TRUE(Eventually([&] { return logs.Count("reaches a broker again") == 2; })) << logs.All();
  produce("after");
  ASSERT_TRUE(Eventually([&] { return rows() == 2; }));
  source->Stop();
  EXPECT_EQ(logs.Count("reaches no broker"), 2);
  rd_kafka_destroy(producer);
}

// A Kafka source on `mock` that has stored one record of `topic` (so it joined its group and
// has the partition); null after a failed assertion.
std::unique_ptr<sources::BrokerSource> StartedWithOneRecord(testing::MockKafkaCluster& mock,
                                                            testing::StoreDb& db,
                                                            OutboxStore& store,
                                                            const std::string& topic) {
  EXPECT_EQ(rd_kafka_mock_topic_create(mock.get(), topic.c_str(), 1, 3),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_t* producer =
      NewKafkaClient(RD_KAFKA_PRODUCER, {{"bootstrap.servers", mock.bootstraps()}});
  ProduceOne(producer, topic, {0, std::nullopt, json{{"id", "one"}}.dump(), {}, 0});
  EXPECT_EQ(rd_kafka_flush(producer, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(producer);
  KafkaSourceSettings s;
  s.name = "orders";
  s.bootstrap_servers = mock.bootstraps();
  s.topics = {topic};
  s.group_id = "qb-" + topic;
  sources::BrokerSourceContext ctx;
  ctx.intake = store.inbox();
  auto made = sources::CreateKafkaSource(s, ctx);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  if (!made.ok()) return nullptr;
  std::unique_ptr<sources::BrokerSource> source = std::move(made).value();
  EXPECT_TRUE(source->Start().ok());
  const bool stored =
      Eventually([&] { return std::stoll(db.Scalar("SELECT COUNT(*) FROM inbox")) == 1; });
  EXPECT_TRUE(stored);
  EXPECT_TRUE(source->healthy());
  return stored ? std::move(source) : nullptr;
}

void SetRoundTrip(testing::MockKafkaCluster& mock, int ms) {
  for (int32_t id = 1; id <= 3; ++id) rd_kafka_mock_broker_set_rtt(mock.get(), id, ms);
}

// Brokers that keep their connections but stop answering (a round trip of 120 s): librdkafka
// reports no broker down, so only the source's own metadata probe sees it: health goes down
// with one WARN.
TEST(KafkaSourceOutageTest, BrokersThatStopAnsweringTurnHealthDownWithOneWarn) {
  using namespace std::chrono_literals;
  LogCapture logs;
  testing::StoreDb db("sqlite");
  std::unique_ptr<OutboxStore> store = MigratedSqlite(db);
  ASSERT_NE(store, nullptr);
  testing::MockKafkaCluster mock(3);
  std::unique_ptr<sources::BrokerSource> source =
      StartedWithOneRecord(mock, db, *store, "qb.silent");
  ASSERT_NE(source, nullptr) << logs.All();

  SetRoundTrip(mock, 120000);
  EXPECT_TRUE(Eventually([&] { return !source->healthy(); }, 60s)) << logs.All();
  EXPECT_EQ(logs.Count("reaches no broker"), 1) << logs.All();
  EXPECT_EQ(logs.Count("metadata requests in a row"), 1) << logs.All();
  source->Stop();
  SetRoundTrip(mock, 0);
}

// rd_kafka_commit(..., 0) waits for an absent coordinator (45 s here, past 145 s with every broker
// down); in the source's rebalance callbacks that held the consumer thread: health stayed up and
// Stop() waited. CommitWithin gives up at its bound, and commits once the coordinator is back.
TEST(KafkaCommitTest, ACommitWithTheCoordinatorDownGivesUpAtItsBound) {
  testing::MockKafkaCluster mock(3);
  const std::string topic = "qb.commit";
  const std::string group = "qb-commit";
  ASSERT_EQ(rd_kafka_mock_topic_create(mock.get(), topic.c_str(), 1, 3),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  ASSERT_EQ(rd_kafka_mock_partition_set_leader(mock.get(), topic.c_str(), 0, 2),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  ASSERT_EQ(rd_kafka_mock_coordinator_set(mock.get(), "group", group.c_str(), 1),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_t* consumer =
      NewKafkaClient(RD_KAFKA_CONSUMER, {{"bootstrap.servers", mock.bootstraps()},
                                         {"group.id", group},
                                         {"enable.auto.commit", "false"}});
  rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(offsets, topic.c_str(), 0)->offset = 7;
  auto committed = [&] {
    return testing::CommittedKafkaOffsets(mock.bootstraps(), group, topic, 1);
  };

  ASSERT_EQ(sources::CommitWithin(consumer, offsets, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(committed(), std::vector<int64_t>{7});

  rd_kafka_mock_broker_set_down(mock.get(), 1);  // the coordinator; two brokers answer
  offsets->elems[0].offset = 9;
  std::future<rd_kafka_resp_err_t> answer = std::async(
      std::launch::async, [&] { return sources::CommitWithin(consumer, offsets, 2000); });
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the commit waits for the coordinator";
  EXPECT_EQ(answer.get(), RD_KAFKA_RESP_ERR__TIMED_OUT);

  rd_kafka_mock_broker_set_up(mock.get(), 1);
  EXPECT_EQ(sources::CommitWithin(consumer, offsets, 30000), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(committed(), std::vector<int64_t>{9});
  rd_kafka_topic_partition_list_destroy(offsets);
  rd_kafka_destroy(consumer);
}

}  // namespace
}  // namespace queuebox
#endif  // QB_WITH_KAFKA
