// broker_intake.h: what every broker source (RabbitMQ, Kafka, NATS JetStream) does with a
// message between the broker and the inbox (QueueBox reference §9.3, §9.4, §11.2, §11.3, §11.5):
// the header filter, the keys in QueueBox's precedence, the correlation id, the publish time, the
// dead `{"raw": ...}` row for a body that is not JSON, and counting the outcomes.
//
// A consumer converts each delivery into a BrokerMessage (headers already as strings: see
// HeaderText), asks Receive() for the row, stores the fetched batch with ONE InboxIntake::Store
// call, and acknowledges the batch only after that call succeeded (filtered messages too).
//
// Thread-safety: a built BrokerIntake is immutable; Receive and Count may run on any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/inbox.h"
#include "queuebox/status.h"
#include "sources/source_transforms.h"

namespace queuebox {

class Metrics;

namespace sources {

// One delivery as the broker gave it, before the rules.
struct BrokerMessage {
  std::string body;  // raw bytes
  // Headers converted to strings (HeaderText), in broker order; a later value of the same name
  // (any letter case) wins.
  std::vector<std::pair<std::string, std::string>> headers;
  // The broker's own message id: AMQP message_id, NATS Nats-Msg-Id (key fallback after the path).
  std::optional<std::string> message_id;
  // Kafka's record key as text: the key fallback after the path, the aggregate fallback last.
  std::optional<std::string> record_key;
  // AMQP correlation_id property: the correlation id after the X-Correlation-Id header.
  std::optional<std::string> correlation_property;
  // The broker's time (AMQP timestamp, Kafka record timestamp, JetStream stored time), Unix ms:
  // the publish time when scheduledAtHeader/Path give none.
  std::optional<int64_t> broker_time_ms;
};

// A header value as QueueBox stores it: the bytes when they are UTF-8 (and hold no NUL), else
// "base64:" + base64 of the bytes.
std::string HeaderText(std::string_view bytes);

// "sha256:" + lowercase hex SHA-256 of `body`: the last idempotency-key fallback of a broker.
std::string BodyDigestKey(std::string_view body);

class BrokerIntake {
 public:
  // `kind` is "rabbitmq", "kafka" or "nats" (which fallbacks apply). kInvalidArgument naming
  // sources.<name>.<key> for a path or filter that does not compile (config validation already
  // refuses those; this is the last guard).
  // `transforms` (the source stage and key expressions; null: none) and `metrics` (null: not
  // counted) are borrowed and must outlive the intake.
  static Result<BrokerIntake> Create(std::string kind, std::string source_name,
                                     const BrokerSourceKeys& keys,
                                     const SourceTransforms* transforms = nullptr,
                                     Metrics* metrics = nullptr);

  // The row for `message`; nullopt when the header filter drops it (acknowledge it, no row).
  // A body that is not JSON (or nests deeper than 1000) gives a dead row with payload
  // {"raw": "<body as text>"}; key precedence (§9.4):
  //   idempotency key: header attributeHeaders.idempotencyKey, idempotencyKeyExpression,
  //     idempotencyKeyPath(s), message_id (rabbitmq, nats) / record_key (kafka), then
  //     BodyDigestKey(body);
  //   aggregate id: aggregateIdExpression, aggregateIdPath(s), header attributeHeaders.aggregateId,
  //     record_key (kafka);
  //   event type: eventTypeExpression, eventTypePath(s), header attributeHeaders.eventType when
  //     eventTypeFromHeader;
  //   correlation id: header X-Correlation-Id, correlation_property, a new UUID (sanitised);
  //   publish time: scheduledAtHeader, scheduledAtPath(s), then broker_time_ms
  //   (only when scheduledAtHeader/Path is configured; an unparsable one is ignored with a WARN).
  // An idempotency key, aggregate id or event type over 255 characters makes the row dead (a
  // broker message cannot be answered 400, and must not be lost): the key becomes
  // BodyDigestKey(key), the too-long attribute is dropped, last_error names it. Dead rows get no
  // delay.
  // Then the source transform (on JSON bodies): its output is stored; a transform that fails
  // with onError Fail or Dead stores the ORIGINAL payload as a dead row (last_error "Transform
  // failed: <reason>", counted as queuebox_inbox_rejections_total{reason="transform_failed"}).
  std::optional<NewInboxMessage> Receive(const BrokerMessage& message) const;

  // Counts a stored batch's outcomes into queuebox_inbox_messages_total{status=new|duplicate}
  // and queuebox_inbox_rejections_total{reason}; `filtered` drops into
  // queuebox_inbox_filtered_total{source}. `metrics` may be null.
  void Count(Metrics* metrics, std::span<const InboxStoreOutcome> outcomes, int64_t filtered) const;

  const std::string& source() const;

 private:
  struct Rules;
  explicit BrokerIntake(std::shared_ptr<const Rules> rules) : rules_(std::move(rules)) {}
  std::shared_ptr<const Rules> rules_;
};

}  // namespace sources
}  // namespace queuebox
