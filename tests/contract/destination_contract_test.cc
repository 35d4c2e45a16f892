// The Destination contract (include/queuebox/destination.h), written once and run by every
// destination: HTTP (a real HTTP server on loopback), file, Kafka (librdkafka's mock cluster),
// RabbitMQ and NATS (the real servers of scripts/services.sh). Each destination's target
// (destination_targets.h) says how to make it, how to read what arrived and how to provoke a
// failure; what only one destination does stays in tests/integration/<type>_destination_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "contract/destination_targets.h"
#include "destinations/registry.h"
#include "testing/broker_testing.h"

namespace queuebox {
namespace {

using ::queuebox::testing::Arrival;
using ::queuebox::testing::BatchOf;
using ::queuebox::testing::BrokerRow;
using ::queuebox::testing::CollectingSink;
using ::queuebox::testing::DestinationTarget;
using ::queuebox::testing::KindName;
using ::queuebox::testing::PublishAll;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using json = nlohmann::json;

struct TargetKind {
  std::string name;
  std::function<std::unique_ptr<DestinationTarget>()> make;
};

void PrintTo(const TargetKind& kind, std::ostream* os) { *os << kind.name; }

std::vector<TargetKind> AllTargets() {
  std::vector<TargetKind> kinds = {
      {"Http", [] { return std::make_unique<testing::HttpTarget>(); }},
      {"File", [] { return std::make_unique<testing::FileTarget>(); }},
  };
#if defined(QB_WITH_KAFKA)
  kinds.push_back({"Kafka", [] { return std::make_unique<testing::KafkaTarget>(); }});
#endif
#if defined(QB_WITH_RABBITMQ)
  kinds.push_back({"RabbitMq", [] { return std::make_unique<testing::RabbitMqTarget>(); }});
#endif
#if defined(QB_WITH_NATS)
  kinds.push_back({"Nats", [] { return std::make_unique<testing::NatsTarget>(); }});
#endif
  return kinds;
}

// Every target that talks to a server: all but the file.
std::vector<TargetKind> ServerTargets() {
  std::vector<TargetKind> kinds = AllTargets();
  kinds.erase(std::remove_if(kinds.begin(), kinds.end(),
                             [](const TargetKind& k) { return k.name == "File"; }),
              kinds.end());
  return kinds;
}

class DestinationContractTest : public ::testing::TestWithParam<TargetKind> {
 protected:
  void SetUp() override {
    target_ = GetParam().make();
    target_->SetUp();
  }
  void TearDown() override {
    if (target_) target_->TearDown();
  }

  // The arrival of message `id`; fails the test when it did not arrive.
  static Arrival Find(const std::vector<Arrival>& arrivals, const std::string& id) {
    for (const Arrival& a : arrivals) {
      if (a.id == id) return a;
    }
    ADD_FAILURE() << "message " << id << " did not arrive";
    return {};
  }
  static std::vector<std::string> Ids(const std::vector<Arrival>& arrivals) {
    std::vector<std::string> ids;
    for (const Arrival& a : arrivals) ids.push_back(a.id);
    return ids;
  }

  // The body arrived as sent: the same bytes, or (file) the same JSON document.
  void ExpectBody(const Arrival& a, const std::string& sent) {
    if (target_->KeepsBodyBytes()) {
      EXPECT_EQ(a.body, sent) << a.id;
    } else {
      EXPECT_EQ(json::parse(a.body), json::parse(sent)) << a.id;
    }
  }

  std::unique_ptr<DestinationTarget> target_;
};

// The contract of destinations that talk to a server (every kind but the file).
class ServerDestinationContractTest : public DestinationContractTest {};

// A batch is delivered whole: one outcome per message, each message arrives once with its body
// (bytes untouched: no re-encoding of UTF-8, numbers or white space), its key and its topic.
TEST_P(DestinationContractTest, DeliversABatchWithBodiesAndKeysAsSent) {
  auto d = target_->Make({});
  ASSERT_NE(d, nullptr);
  std::vector<OutboxRow> rows = {
      BrokerRow("11111111-1111-1111-1111-111111111111", "orders.created", "customer-7",
                "{\"name\":\"caf\xC3\xA9\",\"n\":1.50}"),
      BrokerRow("id-2", "orders.created", std::nullopt,
                "{ \"a\" : 1.50,\n  \"b\":\"\xC3\xBC\\u00fc\", \"c\": [ ] }"),
      BrokerRow("id-3", "orders.updated", "customer-8", "[1,\"two\",null]"),
  };
  std::vector<Outcome> out = PublishAll(*d, rows);
  for (const Outcome& o : out) {
    EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << KindName(o.kind) << " " << o.error;
    EXPECT_EQ(o.error, "");
  }
  std::vector<Arrival> got = target_->Arrivals(rows.size());
  ASSERT_EQ(got.size(), rows.size());
  EXPECT_EQ(target_->ArrivedCount(), rows.size());
  for (const OutboxRow& row : rows) {
    Arrival a = Find(got, row.id);
    ExpectBody(a, row.payload);
    EXPECT_EQ(a.topic, row.topic);
    EXPECT_EQ(a.attempt, "0") << row.id;
    if (!target_->CarriesKey()) continue;
    EXPECT_EQ(a.key, row.key) << row.id;  // none: none
  }
  EXPECT_TRUE(d->Health().ok()) << d->Health().ToString();
}

// Static headers go with every message, a row header of the same name wins; the message id,
// topic and attempt arrive with it.
TEST_P(DestinationContractTest, HeadersArriveAndARowHeaderWinsOverAStaticOne) {
  auto d = target_->Make({{"x-static", "s"}, {"x-over", "static"}});
  ASSERT_NE(d, nullptr);
  std::vector<OutboxRow> rows = {BrokerRow("0b9a7e51-6a43-4f1e-9d0a-6d7e0c3a1f00", "orders.created",
                                           "k1", R"({"n":1})",
                                           R"({"x-over":"row","x-row":"r","x-num":"5"})")};
  rows[0].attempt = 3;
  std::vector<Outcome> out = PublishAll(*d, rows);
  ASSERT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  std::vector<Arrival> got = target_->Arrivals(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, "0b9a7e51-6a43-4f1e-9d0a-6d7e0c3a1f00");
  EXPECT_EQ(got[0].topic, "orders.created");
  EXPECT_EQ(got[0].attempt, "3");
  std::map<std::string, std::string> want = {
      {"x-static", "s"}, {"x-over", "row"}, {"x-row", "r"}, {"x-num", "5"}};
  EXPECT_EQ(got[0].headers, want);
}

// Messages of one key arrive in the order given: within one batch where the destination keeps
// it, else across batches of one message per key (as the relay sends them).
TEST_P(DestinationContractTest, KeepsTheOrderOfEachKey) {
  auto d = target_->Make({});
  ASSERT_NE(d, nullptr);
  std::vector<OutboxRow> rows;
  for (int i = 0; i < 30; ++i) {
    std::string key = "key-" + std::to_string(i % 3);
    rows.push_back(BrokerRow("id-" + std::to_string(i), "t", key,
                             R"({"seq":)" + std::to_string(i) + R"(,"key":")" + key + "\"}"));
  }
  const size_t per_batch = target_->KeepsOrderWithinABatch() ? rows.size() : 3;
  for (size_t start = 0; start < rows.size(); start += per_batch) {
    std::vector<OutboxRow> batch(rows.begin() + start, rows.begin() + start + per_batch);
    for (const Outcome& o : PublishAll(*d, batch)) {
      ASSERT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
    }
  }
  std::vector<Arrival> got = target_->Arrivals(rows.size());
  ASSERT_EQ(got.size(), rows.size());
  std::map<std::string, std::vector<int>> seqs;
  for (const Arrival& a : got) {
    json body = json::parse(a.body);
    seqs[body["key"].get<std::string>()].push_back(body["seq"].get<int>());
  }
  ASSERT_EQ(seqs.size(), 3u);
  for (const auto& [key, s] : seqs) {
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end())) << key;
    EXPECT_EQ(s.size(), 10u) << key;
  }
}

// A message that can never be sent (row headers that are not a JSON object) is rejected, so the
// relay makes it dead at once; the rest of the batch is delivered and only it arrives.
TEST_P(DestinationContractTest, APermanentFailureIsARejectAndOnlyThatOne) {
  auto d = target_->Make({});
  ASSERT_NE(d, nullptr);
  std::vector<Outcome> out =
      PublishAll(*d, {BrokerRow("good-1", "t", "k", "{}"), BrokerRow("bad", "t", "k", "{}", "[1]"),
                      BrokerRow("good-2", "t", "k", "{}")});
  EXPECT_EQ(out[0].kind, Outcome::Kind::kDelivered) << out[0].error;
  EXPECT_EQ(out[1].kind, Outcome::Kind::kReject) << KindName(out[1].kind) << " " << out[1].error;
  EXPECT_THAT(out[1].error, HasSubstr("headers"));  // each says it in its words
  EXPECT_EQ(out[2].kind, Outcome::Kind::kDelivered) << out[2].error;
  std::vector<Arrival> got = target_->Arrivals(2);
  EXPECT_EQ(target_->ArrivedCount(), 2u);
  std::set<std::string> ids;
  for (const Arrival& a : got) ids.insert(a.id);
  EXPECT_EQ(ids, (std::set<std::string>{"good-1", "good-2"}));
}

// A failure that ends (a receiver answering 500, a file that cannot grow, a topic or stream
// missing, no queue bound) is a retry, and the same message is delivered once it ended.
TEST_P(DestinationContractTest, ATransientFailureIsARetryThenTheMessageIsDelivered) {
  auto d = target_->Make({});
  ASSERT_NE(d, nullptr);
  target_->Break();
  std::vector<OutboxRow> rows = {BrokerRow("again", "t", "k", R"({"x":1})")};
  Outcome failed = PublishAll(*d, rows)[0];
  EXPECT_EQ(failed.kind, Outcome::Kind::kRetry) << KindName(failed.kind) << " " << failed.error;
  EXPECT_THAT(failed.error, HasSubstr(target_->TransientErrorPart()));
  target_->Heal();
  rows[0].attempt = 1;
  std::string last;
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        Outcome o = PublishAll(*d, rows)[0];
        last = std::string(KindName(o.kind)) + " " + o.error;
        return o.kind == Outcome::Kind::kDelivered;
      },
      std::chrono::seconds(30)))
      << last;
  std::vector<Arrival> got = target_->Arrivals(1);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back().id, "again");
  EXPECT_EQ(got.back().attempt, "1");
}

// A lost claim (docs/guarantees.md §3): a message whose cancel flag is set before it is handed
// over is never sent and is reported cancelled; the rest of the batch is delivered.
TEST_P(DestinationContractTest, AMessageCancelledBeforeItIsHandedOverIsNeverSent) {
  auto d = target_->Make({});
  ASSERT_NE(d, nullptr);
  std::vector<OutboxRow> rows = {BrokerRow("c1", "t", std::nullopt, R"({"n":1})"),
                                 BrokerRow("c2", "t", std::nullopt, R"({"n":2})"),
                                 BrokerRow("c3", "t", std::nullopt, R"({"n":3})")};
  std::vector<OutboundMessage> batch = BatchOf(rows);
  std::atomic<bool> lost{true};
  batch[1].cancel = &lost;
  CollectingSink sink;
  d->PublishBatch(batch, sink);
  if (!target_->HonoursCancel()) {
    // The file destination writes every message of the batch it is given (a local append that
    // cannot be overtaken by a lost claim).
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(sink.at(i).kind, Outcome::Kind::kDelivered);
    target_->Arrivals(3);
    EXPECT_EQ(target_->ArrivedCount(), 3u);
    return;
  }
  EXPECT_EQ(sink.at(0).kind, Outcome::Kind::kDelivered) << sink.at(0).error;
  EXPECT_EQ(sink.at(1).kind, Outcome::Kind::kCancelled) << sink.at(1).error;
  EXPECT_EQ(sink.at(2).kind, Outcome::Kind::kDelivered) << sink.at(2).error;
  std::vector<Arrival> got = target_->Arrivals(2);
  EXPECT_EQ(target_->ArrivedCount(), 2u);
  std::set<std::string> ids;
  for (const Arrival& a : got) ids.insert(a.id);
  EXPECT_EQ(ids, (std::set<std::string>{"c1", "c3"}));
}

// A server that is not there does not stop the start; every message meets an outage (the
// destination's fault: no attempt spent under the relay's circuit breaker), the health says so
// where the destination keeps a connection, and no text shows the credentials.
TEST_P(ServerDestinationContractTest, AnUnreachableServerIsAnOutage) {
  testing::UnreachableDestination u = target_->MakeUnreachable();
  ASSERT_NE(u.destination, nullptr);
  ASSERT_TRUE(u.destination->Start().ok());
  std::vector<Outcome> out = PublishAll(
      *u.destination, {BrokerRow("id-1", "t", "k", "{}"), BrokerRow("id-2", "t", "k", "{}")});
  for (const Outcome& o : out) {
    EXPECT_EQ(o.kind, Outcome::Kind::kUnavailable) << KindName(o.kind) << " " << o.error;
    EXPECT_EQ(o.retry_after_ms, 0);
    EXPECT_THAT(o.error, StartsWith(u.error_prefix));
    for (const std::string& part : u.error_parts) EXPECT_THAT(o.error, HasSubstr(part));
    if (!u.secret.empty()) {
      EXPECT_THAT(o.error, Not(HasSubstr(u.secret)));
    }
  }
  if (u.health_reports_it) {
    ASSERT_TRUE(testing::WaitUntil([&] {
      return u.destination->Health().code() == StatusCode::kUnavailable;
    })) << u.destination->Health().ToString();
    Status health = u.destination->Health();
    EXPECT_THAT(health.message(), HasSubstr(u.health_part));
    if (!u.secret.empty()) {
      EXPECT_THAT(health.message(), Not(HasSubstr(u.secret)));
    }
  }
  u.destination->Stop();
}

// Stop releases the destination; a new one on the same place delivers after what was sent
// before (a file is appended to, not truncated).
TEST_P(DestinationContractTest, AfterStopANewDestinationDeliversAfterTheFirst) {
  {
    auto first = target_->Make({});
    ASSERT_NE(first, nullptr);
    ASSERT_EQ(PublishAll(*first, {BrokerRow("a", "t", "k", "1")})[0].kind,
              Outcome::Kind::kDelivered);
    first->Stop();
  }
  auto second = target_->Make({});
  ASSERT_NE(second, nullptr);
  ASSERT_EQ(PublishAll(*second, {BrokerRow("b", "t", "k", "2")})[0].kind,
            Outcome::Kind::kDelivered);
  ASSERT_EQ(PublishAll(*second, {BrokerRow("c", "t", "k", "3")})[0].kind,
            Outcome::Kind::kDelivered);
  std::vector<Arrival> got = target_->Arrivals(3);
  EXPECT_EQ(Ids(got), (std::vector<std::string>{"a", "b", "c"}));
  second->Stop();
}

// PublishBatch from several threads at once (the relay's workers): every message delivered and
// arrived once, whole (bodies of 10,000 characters: a file's lines never interleave).
TEST_P(DestinationContractTest, ConcurrentBatchesFromSeveralThreadsAllArriveWhole) {
  auto d = target_->Make({});
  ASSERT_NE(d, nullptr);
  constexpr int kThreads = 4, kBatches = 20, kPerBatch = 10;
  const std::string body = "{\"s\":\"" + std::string(10000, 'z') + "\"}";
  std::vector<std::vector<Outcome>> outcomes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int b = 0; b < kBatches; ++b) {
        std::vector<OutboxRow> rows;
        for (int i = 0; i < kPerBatch; ++i) {
          std::string id = std::to_string(t) + "-" + std::to_string(b) + "-" + std::to_string(i);
          rows.push_back(BrokerRow(id, "t", "k" + std::to_string(i), body));
        }
        for (Outcome& o : PublishAll(*d, rows)) outcomes[t].push_back(std::move(o));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const std::vector<Outcome>& per_thread : outcomes) {
    ASSERT_EQ(per_thread.size(), static_cast<size_t>(kBatches * kPerBatch));
    for (const Outcome& o : per_thread) EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
  }
  constexpr size_t kAll = kThreads * kBatches * kPerBatch;
  std::vector<Arrival> got = target_->Arrivals(kAll);
  ASSERT_EQ(got.size(), kAll);
  std::set<std::string> ids;
  for (const Arrival& a : got) {
    ids.insert(a.id);
    ExpectBody(a, body);
  }
  EXPECT_EQ(ids.size(), kAll);
}

// The registry builds the destination from a configuration block; the block's headers are its
// static headers (docs/configuration.md: "a row header of the same name wins").
TEST_P(DestinationContractTest, TheRegistryBuildsItFromItsBlock) {
  DestinationConfig config = target_->Config();
  config.headers = {{"X-Source", "quickstart"}, {"X-Tenant", "static"}};
  const DestinationType* type = FindDestinationType(config.type);
  ASSERT_NE(type, nullptr) << config.type;
  Result<std::unique_ptr<Destination>> d = type->create(config, DestinationContext{});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)->name(), config.name);
  EXPECT_EQ((*d)->type(), config.type);
  ASSERT_TRUE((*d)->Start().ok());
  Outcome o =
      PublishAll(**d, {BrokerRow("r", "t", std::nullopt, "{}", R"({"X-Tenant":"acme"})")})[0];
  ASSERT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
  std::vector<Arrival> got = target_->Arrivals(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].headers,
            (std::map<std::string, std::string>{{"X-Source", "quickstart"}, {"X-Tenant", "acme"}}));
  (*d)->Stop();
}

INSTANTIATE_TEST_SUITE_P(AllDestinations, DestinationContractTest,
                         ::testing::ValuesIn(AllTargets()),
                         [](const ::testing::TestParamInfo<TargetKind>& kind) {
                           return kind.param.name;
                         });
INSTANTIATE_TEST_SUITE_P(ServerDestinations, ServerDestinationContractTest,
                         ::testing::ValuesIn(ServerTargets()),
                         [](const ::testing::TestParamInfo<TargetKind>& kind) {
                           return kind.param.name;
                         });

}  // namespace
}  // namespace queuebox
