// kafka_destination.h: the `kafka` destination (QueueBox reference §7.3, §7.5, §7.7, §9.1),
// built on librdkafka.
//
// Producer: one per destination, created by Start(): enable.idempotence=true, acks=all,
// delivery.timeout.ms = timeoutMs, request.timeout.ms = max(timeoutMs - 1000, 1000), linger 5 ms,
// allow.auto.create.topics=false (an unknown topic is a failure, never created by a publish).
// Record: topic = topicFrom column or the `topic` template rendered (empty => failure
//   "rendered an empty topic"); key = the route's rendered routingKeyTemplate when the route has
//   one, else `keyTemplate` rendered (default {{ key }}); a blank key => no key; value = the
//   payload bytes verbatim; headers = static, then row headers (a row header replaces a static
//   one of the same name), then x-message-id, x-topic, x-attempt (UTF-8 text).
// Outcomes: Delivered only on a successful delivery report (acks=all). The destination's fault
//   => Unavailable (row released, no attempt spent; docs/guarantees.md §8): brokers down,
//   transport, TLS, SASL or DNS errors, no leader, not enough replicas, the message timed out
//   while no broker is reachable, the local queue full for timeoutMs, no producer (IsOutage in
//   the .cc has the codes). Every other result (message too large, invalid, topic unknown or not
//   authorized, ...) => Retry with the librdkafka reason (an attempt spent). A message
//   Kafka can never take => Reject (dead at once, the batch goes on; broker_common.h): `headers`
//   not a JSON object of strings, a payload that is not JSON, a topic longer than 249
//   characters or with a character outside [a-zA-Z0-9._-].
// Throughput: the whole batch is produced at once; delivery reports are matched to their message
//   through the message opaque and collected until all arrived or timeoutMs (+2 s) passed. The
//   relay hands it a whole claimed task in one call (PipelinesBatch).
//
// Thread-safety: PublishBatch may run on several threads at once (librdkafka is thread-safe;
// any thread's poll may serve another batch's reports, which go to that batch's shared state).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "destinations/broker_common.h"
#include "destinations/registry.h"
#include "queuebox/destination.h"

typedef struct rd_kafka_headers_s rd_kafka_headers_t;  // librdkafka/rdkafka.h

namespace queuebox {

struct KafkaDestinationSettings {
  std::string name;                       // destinations.<name>
  std::string bootstrap_servers;          // comma list host:port, required
  std::string topic;                      // literal or address template, required
  std::optional<std::string> topic_from;  // aggregate_type | topic | key; wins over topic
  std::string key_template = "{{ key }}";
  int64_t timeout_ms = 30000;                   // delivery timeout (ms), >= 2000
  std::string security_protocol = "PLAINTEXT";  // PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
  std::optional<std::string> sasl_mechanism;
  std::optional<std::string> sasl_username;
  std::optional<std::string> sasl_password;  // a secret: never logged
  std::map<std::string, std::string> static_headers;
  int max_error_body_bytes = 2048;  // cut of failure reasons (characters)
  // Extra librdkafka properties (tests, tuning); applied after the ones above.
  std::map<std::string, std::string> librdkafka;
};

// The registry entry for `type: kafka`: option table, block validator, factory.
DestinationType KafkaDestinationType();
// Cross-key checks of a kafka block (defaults filled): SASL_* needs saslMechanism,
// saslUsername and saslPassword; timeoutMs >= 2000; topic/keyTemplate placeholders; topicFrom.
std::vector<std::string> ValidateKafkaBlock(const nlohmann::json& block);

// The record headers of `row` (§9.1): `headers` (MergeRowHeaders: static, then row) in order,
// then x-message-id, x-topic, x-attempt (UTF-8 text), each name and value as its bytes. Kafka
// keeps repeated names, so a row header named like one of the relay's stays, before it: the
// relay's is the last of its name. No I/O; the caller owns the result (rd_kafka_headers_destroy,
// unless a produce took it over).
rd_kafka_headers_t* KafkaRecordHeaders(const HeaderList& headers, const OutboxRow& row);

class KafkaDestination final : public Destination {
 public:
  // kInvalidArgument (naming destinations.<name>.<key>) for a bad template, column or timeout.
  static Result<std::unique_ptr<KafkaDestination>> Create(KafkaDestinationSettings settings);
  ~KafkaDestination() override;

  const std::string& name() const override { return settings_.name; }
  std::string_view type() const override { return "kafka"; }
  // Creates the producer (no broker round trip: librdkafka connects in the background).
  // kInvalidArgument when librdkafka refuses a property.
  Status Start() override;
  void PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) override;
  // The batch is produced at once and its delivery reports collected together.
  bool PipelinesBatch() const override { return true; }
  // Unavailable while every broker is down (librdkafka _ALL_BROKERS_DOWN until a delivery or
  // a broker comes back) or after a fatal producer error.
  Status Health() override;
  // Flushes for at most timeoutMs, then destroys the producer.
  void Stop() override;
  // The value of librdkafka property `name` as the running producer holds it (rd_kafka_conf of
  // its handle, then rd_kafka_conf_get); nullopt before Start() or for an unknown name. Tests.
  std::optional<std::string> ProducerPropertyForTest(const std::string& name);
  // Messages in the running producer's local queue (rd_kafka_outq_len: waiting or awaiting their
  // acknowledgement); -1 before Start(). Tests.
  int LocalQueueLengthForTest();
  // How often a produce found the local queue full and waited for room. Tests.
  int64_t QueueFullWaitsForTest() const { return queue_full_waits_.load(); }

 private:
  struct Producer;
  struct Batch;  // the outcomes of one PublishBatch, filled by delivery reports
  struct Slot;   // the opaque of one produced message

  KafkaDestination(KafkaDestinationSettings settings, AddressSpec topic, Template key);
  // The passes of PublishBatch, in order.
  // 1, per message: renders its topic, key and headers and hands it to librdkafka, waiting for
  //   room in a full local queue until `produce_deadline`; a message that cannot be produced
  //   gets its outcome here.
  void Produce(Producer& producer, const OutboundMessage& message, size_t index,
               const std::shared_ptr<Batch>& state,
               std::chrono::steady_clock::time_point produce_deadline);
  // 2: serves delivery reports until every produced message has one or timeoutMs + 2 s passed.
  void AwaitDeliveryReports(Producer& producer, Batch& state);
  // 3: one outcome per message; a message still without a report is a Retry (a late report is
  //   then ignored).
  std::vector<Outcome> TakeOutcomes(Batch& state);
  Result<std::shared_ptr<Producer>> CurrentProducer();
  Result<std::shared_ptr<Producer>> NewProducer();

  KafkaDestinationSettings settings_;
  AddressSpec topic_;
  Template key_template_;
  std::mutex mu_;  // guards producer_ (swapped after a fatal error)
  std::shared_ptr<Producer> producer_;
  std::atomic<int64_t> queue_full_waits_{0};
};

}  // namespace queuebox
