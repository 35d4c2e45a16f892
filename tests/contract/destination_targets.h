// destination_targets.h: the DestinationTarget of each destination (destination_contract.h):
// HTTP against a real HTTP server on loopback, file on the real file system, Kafka on
// librdkafka's mock cluster, RabbitMQ and NATS against the real servers of scripts/services.sh.
// Header-only: the test binaries get the client libraries through qb_destinations.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "contract/destination_contract.h"
#include "destinations/file/file_destination.h"
#include "destinations/http/http_destination.h"
#include "testing/broker_servers.h"
#include "testing/broker_testing.h"
#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/process.h"

#if defined(QB_WITH_KAFKA)
#include "destinations/kafka/kafka_destination.h"
#include "testing/kafka_reader.h"
#endif
#if defined(QB_WITH_RABBITMQ)
#include "destinations/rabbitmq/rabbitmq_destination.h"
#include "testing/amqp_queue.h"
#endif
#if defined(QB_WITH_NATS)
#include "destinations/nats/nats_destination.h"
#endif

namespace queuebox::testing {

inline std::string LowerText(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Moves the standard headers of a message (id, topic, attempt, key; names in any case) out of
// `headers`.
inline void TakeStandardHeaders(Arrival& a) {
  auto take = [&](const std::string& name) -> std::optional<std::string> {
    for (auto it = a.headers.begin(); it != a.headers.end(); ++it) {
      if (LowerText(it->first) != name) continue;
      std::string value = it->second;
      a.headers.erase(it);
      return value;
    }
    return std::nullopt;
  };
  a.id = take("x-message-id").value_or("");
  a.topic = take("x-topic").value_or("");
  a.attempt = take("x-attempt").value_or("");
  a.key = take("x-message-key");
}

// An UnreachableDestination holding a D made (not started) from `settings`.
template <class D, class Settings>
UnreachableDestination UnstartedDestination(Settings settings) {
  Result<std::unique_ptr<D>> d = D::Create(std::move(settings));
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  UnreachableDestination u;
  if (d.ok()) u.destination = std::move(d).value();
  return u;
}

// ---- HTTP -------------------------------------------------------------------------------------

class HttpTarget : public DestinationTarget {
 public:
  void SetUp() override { ASSERT_TRUE(receiver_.Start().ok()); }
  void TearDown() override { receiver_.Stop(); }

  std::unique_ptr<Destination> Make(
      const std::map<std::string, std::string>& static_headers) override {
    HttpDestinationSettings s;
    s.name = "webhook";
    s.base_url = receiver_.BaseUrl();
    s.path = "/hooks";
    s.timeout_ms = 10000;
    s.static_headers = static_headers;
    return StartedDestination<HttpDestination>(std::move(s));
  }
  DestinationConfig Config() override {
    return {.name = "webhook",
            .type = "http",
            .headers = {},
            .options = {{"baseUrl", receiver_.BaseUrl()}, {"path", "/hooks"}}};
  }
  // Connection refused; the destination carries a bearer token and a static secret header.
  UnreachableDestination MakeUnreachable() override {
    const int port = UnusedLoopbackPort();
    HttpDestinationSettings s;
    s.name = "webhook";
    s.base_url = "http://127.0.0.1:" + std::to_string(port);
    s.static_headers = {{"X-Api-Key", "qb-static-s3cret"}};
    s.auth = DestinationAuthConfig{
        "header", {{"headerName", "Authorization"}, {"headerValue", "Bearer qb-static-s3cret"}}};
    UnreachableDestination u = UnstartedDestination<HttpDestination>(std::move(s));
    u.secret = "qb-static-s3cret";
    u.error_prefix = "Publish failed: ";
    u.error_parts = {std::to_string(port)};
    u.health_reports_it = false;  // no connection to watch: each request finds out
    return u;
  }

  std::vector<Arrival> Arrivals(size_t count) override {
    receiver_.WaitForRequests(count, std::chrono::seconds(20));
    std::vector<Arrival> out;
    for (const ReceivedRequest& r : receiver_.Requests()) {
      Arrival a;
      for (const auto& [name, value] : r.headers) {
        const std::string lower = LowerText(name);
        if (lower == "host" || lower == "accept" || lower == "user-agent" ||
            lower == "content-length" || lower == "content-type") {
          continue;  // the transport's own
        }
        a.headers[name] = value;
      }
      TakeStandardHeaders(a);
      a.body = r.body;
      out.push_back(std::move(a));
    }
    return out;
  }
  size_t ArrivedCount() override { return receiver_.RequestCount(); }

  void Break() override { receiver_.SetDefaultResponse({.status = 500}); }
  void Heal() override { receiver_.SetDefaultResponse({.status = 204}); }
  std::string TransientErrorPart() const override { return "HTTP 500: Internal Server Error"; }
  bool KeepsOrderWithinABatch() const override { return false; }

 private:
  HttpReceiver receiver_{64};
};

// ---- file -------------------------------------------------------------------------------------

class FileTarget : public DestinationTarget {
 public:
  void SetUp() override { path_ = dir_.File("out.jsonl"); }
  void TearDown() override { Heal(); }

  std::unique_ptr<Destination> Make(
      const std::map<std::string, std::string>& static_headers) override {
    auto d = std::make_unique<FileDestination>(FileDestinationSettings{
        .name = "archive", .path = path_, .fsync = true, .static_headers = static_headers});
    EXPECT_TRUE(d->Start().ok());
    return d;
  }
  DestinationConfig Config() override {
    return {.name = "archive",
            .type = "file",
            .headers = {},
            .options = {{"path", path_}, {"fsync", true}}};
  }
  // A file has no server: a folder that does not exist is refused by Start (file test).
  UnreachableDestination MakeUnreachable() override { return {}; }

  std::vector<Arrival> Arrivals(size_t /*count*/) override {
    std::vector<Arrival> out;
    std::ifstream in(path_);
    for (std::string line; std::getline(in, line);) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      EXPECT_FALSE(j.is_discarded()) << line;
      if (j.is_discarded()) continue;
      Arrival a;
      a.id = j["id"].get<std::string>();
      a.topic = j["topic"].get<std::string>();
      a.attempt = std::to_string(j["attempt"].get<int>());
      if (!j["key"].is_null()) a.key = j["key"].get<std::string>();
      for (const auto& [name, value] : j["headers"].items()) {
        a.headers[name] = value.get<std::string>();
      }
      a.body = j["payload"].dump();
      out.push_back(std::move(a));
    }
    return out;
  }
  size_t ArrivedCount() override { return Arrivals(0).size(); }

  // The file size limit of the process (RLIMIT_FSIZE) at the file's size: the next write fails
  // with EFBIG (SIGXFSZ ignored meanwhile).
  void Break() override {
    struct stat st {};
    ASSERT_EQ(::stat(path_.c_str(), &st), 0);
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved_limit_), 0);
    saved_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit lowered = saved_limit_;
    lowered.rlim_cur = static_cast<rlim_t>(st.st_size);
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lowered), 0);
    broken_ = true;
  }
  void Heal() override {
    if (!broken_) return;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &saved_limit_), 0);
    ::signal(SIGXFSZ, saved_handler_);
    broken_ = false;
  }
  std::string TransientErrorPart() const override {
    return "Publish failed: write " + path_ + ": File too large";
  }
  bool KeepsBodyBytes() const override { return false; }
  bool HonoursCancel() const override { return false; }

 private:
  TempDir dir_;
  std::string path_;
  bool broken_ = false;
  rlimit saved_limit_{};
  sighandler_t saved_handler_ = SIG_DFL;
};

// ---- Kafka ------------------------------------------------------------------------------------

#if defined(QB_WITH_KAFKA)

// One mock cluster (3 brokers) for the whole binary; never torn down (librdkafka's threads may
// outlive a static destructor).
inline MockKafkaCluster& SharedKafkaCluster() {
  static MockKafkaCluster* cluster = new MockKafkaCluster(3);
  return *cluster;
}

class KafkaTarget : public DestinationTarget {
 public:
  static constexpr int kPartitions = 3;

  void SetUp() override {
    static std::atomic<int> n{0};
    topic_ = "qb.contract." + std::to_string(::getpid()) + "." + std::to_string(++n);
    ASSERT_EQ(rd_kafka_mock_topic_create(cluster(), topic_.c_str(), kPartitions, 3),
              RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  void TearDown() override { Heal(); }

  std::unique_ptr<Destination> Make(
      const std::map<std::string, std::string>& static_headers) override {
    KafkaDestinationSettings s;
    s.name = "events";
    s.bootstrap_servers = bootstraps();
    s.topic = topic_;
    s.timeout_ms = 3000;  // the transient failure waits it out
    s.static_headers = static_headers;
    return StartedDestination<KafkaDestination>(std::move(s));
  }
  DestinationConfig Config() override {
    return {.name = "events",
            .type = "kafka",
            .headers = {},
            .options = {{"bootstrapServers", bootstraps()},
                        {"topic", topic_},
                        {"timeoutMs", 10000},
                        {"keyTemplate", "{{ key }}"}}};
  }
  UnreachableDestination MakeUnreachable() override {
    KafkaDestinationSettings s;
    s.name = "events";
    s.bootstrap_servers = "127.0.0.1:" + std::to_string(UnusedLoopbackPort());
    s.topic = topic_;
    s.timeout_ms = 2000;
    UnreachableDestination u = UnstartedDestination<KafkaDestination>(std::move(s));
    u.error_parts = {"Kafka"};
    u.health_part = "are down";
    return u;
  }

  std::vector<Arrival> Arrivals(size_t count) override {
    std::vector<Arrival> out;
    for (KafkaRecord& r : ConsumeKafka(bootstraps(), topic_, count, kPartitions)) {
      Arrival a;
      for (auto& [name, value] : r.headers) a.headers[name] = value;
      TakeStandardHeaders(a);
      a.key = r.key;
      a.body = std::move(r.value);
      out.push_back(std::move(a));
    }
    return out;
  }
  size_t ArrivedCount() override {
    int64_t total = 0;
    for (int32_t p = 0; p < kPartitions; ++p) {
      total += std::max<int64_t>(0, StoredKafkaRecords(bootstraps(), topic_, p));
    }
    return static_cast<size_t>(total);
  }

  // The topic answers as a broker without it would.
  void Break() override {
    rd_kafka_mock_topic_set_error(cluster(), topic_.c_str(),
                                  RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
  }
  void Heal() override {
    rd_kafka_mock_topic_set_error(cluster(), topic_.c_str(), RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  std::string TransientErrorPart() const override { return topic_; }

 private:
  static rd_kafka_mock_cluster_t* cluster() { return SharedKafkaCluster().get(); }
  static std::string bootstraps() { return SharedKafkaCluster().bootstraps(); }

  std::string topic_;
};

#endif  // QB_WITH_KAFKA

// ---- RabbitMQ ---------------------------------------------------------------------------------

#if defined(QB_WITH_RABBITMQ)

class RabbitMqTarget : public DestinationTarget {
 public:
  void SetUp() override {
    QB_REQUIRE_SERVER_ENV("QB_TEST_AMQP_URL", url_);
    static std::atomic<int> n{0};
    exchange_ = "qb.contract." + std::to_string(::getpid()) + "." + std::to_string(++n);
    queue_ = std::make_unique<AmqpTestQueue>(url_, exchange_, "#");
  }
  void TearDown() override { queue_.reset(); }

  std::unique_ptr<Destination> Make(
      const std::map<std::string, std::string>& static_headers) override {
    RabbitMqDestinationSettings s;
    s.name = "rabbit";
    s.url = url_;
    s.exchange = exchange_;
    s.static_headers = static_headers;
    return StartedDestination<RabbitMqDestination>(std::move(s));
  }
  DestinationConfig Config() override {
    return {.name = "rabbit",
            .type = "rabbitmq",
            .headers = {},
            .options = {{"url", url_},
                        {"exchange", exchange_},
                        {"exchangeType", "topic"},
                        {"deliveryMode", "persistent"},
                        {"routingKeyTemplate", "{{ topic }}"}}};
  }
  UnreachableDestination MakeUnreachable() override {
    RabbitMqDestinationSettings s;
    s.name = "rabbit";
    s.url = "amqp://guest:hunter2@127.0.0.1:1/";
    s.exchange = exchange_;
    s.connect_timeout_ms = 2000;
    UnreachableDestination u = UnstartedDestination<RabbitMqDestination>(std::move(s));
    u.secret = "hunter2";
    u.health_part = "127.0.0.1:1";
    return u;
  }

  std::vector<Arrival> Arrivals(size_t count) override {
    WaitUntil([&] { return ArrivedCount() >= count; });
    std::vector<Arrival> out;
    for (const AmqpReceived& m : taken_) {
      Arrival a;
      for (const auto& [name, value] : m.string_headers) a.headers[name] = value;
      a.id = m.message_id;
      a.topic = a.headers["x-topic"];
      a.headers.erase("x-topic");
      auto attempt = m.int_headers.find("x-attempt");
      if (attempt != m.int_headers.end()) a.attempt = std::to_string(attempt->second);
      a.body = m.body;
      out.push_back(std::move(a));
    }
    return out;
  }
  size_t ArrivedCount() override {
    for (AmqpReceived& m : queue_->Drain()) taken_.push_back(std::move(m));
    return taken_.size();
  }

  void Break() override { queue_->Unbind(); }
  void Heal() override { queue_->Bind(); }
  std::string TransientErrorPart() const override { return "unroutable"; }
  bool CarriesKey() const override { return false; }

 private:
  std::string url_, exchange_;
  std::unique_ptr<AmqpTestQueue> queue_;
  std::vector<AmqpReceived> taken_;
};

#endif  // QB_WITH_RABBITMQ

// ---- NATS -------------------------------------------------------------------------------------

#if defined(QB_WITH_NATS)

class NatsTarget : public DestinationTarget {
 public:
  void SetUp() override {
    QB_REQUIRE_SERVER_ENV("QB_TEST_NATS_URL", url_);
    static std::atomic<int> n{0};
    std::string id = std::to_string(::getpid()) + "_" + std::to_string(++n);
    stream_name_ = "QBCONTRACT_" + id;
    prefix_ = "qbcontract." + id;
    stream_ = std::make_unique<JetStreamTestStream>(url_, stream_name_, prefix_);
  }
  void TearDown() override { stream_.reset(); }

  std::unique_ptr<Destination> Make(
      const std::map<std::string, std::string>& static_headers) override {
    NatsDestinationSettings s;
    s.name = "nats";
    s.servers = url_;
    s.subject = prefix_ + ".{{ topic }}";
    s.timeout_ms = 5000;
    s.static_headers = static_headers;
    return StartedDestination<NatsDestination>(std::move(s));
  }
  DestinationConfig Config() override {
    return {.name = "nats",
            .type = "nats",
            .headers = {},
            .options = {{"servers", url_},
                        {"subject", prefix_ + ".{{ topic }}"},
                        {"jetStream", true},
                        {"timeoutMs", 5000}}};
  }
  UnreachableDestination MakeUnreachable() override {
    NatsDestinationSettings s;
    s.name = "nats";
    s.servers = "nats://user:hunter2@127.0.0.1:1";
    s.subject = "x";
    s.timeout_ms = 1000;
    UnreachableDestination u = UnstartedDestination<NatsDestination>(std::move(s));
    u.secret = "hunter2";
    return u;
  }

  std::vector<Arrival> Arrivals(size_t count) override {
    WaitUntil([&] { return ArrivedCount() >= count; });
    std::vector<Arrival> out;
    const uint64_t stored = stream_ ? stream_->Count() : 0;
    for (uint64_t seq = 1; seq <= stored; ++seq) {
      StoredNatsMessage m = stream_->Get(seq);
      Arrival a;
      for (auto& [name, value] : m.headers) a.headers[name] = value;
      a.headers.erase("Nats-Msg-Id");
      TakeStandardHeaders(a);
      a.body = std::move(m.body);
      out.push_back(std::move(a));
    }
    return out;
  }
  size_t ArrivedCount() override { return stream_ ? stream_->Count() : 0; }

  // No stream covers the subjects: JetStream has no responder.
  void Break() override { stream_.reset(); }
  void Heal() override {
    if (!stream_) stream_ = std::make_unique<JetStreamTestStream>(url_, stream_name_, prefix_);
  }
  std::string TransientErrorPart() const override { return prefix_ + "."; }

 private:
  std::string url_, stream_name_, prefix_;
  std::unique_ptr<JetStreamTestStream> stream_;
};

#endif  // QB_WITH_NATS

}  // namespace queuebox::testing
