// bindings.h: BabelQueue broker bindings (reference §2.3, manifest.json blocks `kafka` and
// `rabbitmq`): the native metadata a transport projects from an envelope. The message body is
// always the encoded envelope, byte for byte; these projections are a redundant, routable view of
// it, never a replacement.
//
// HTTP has no upstream binding (reference §2.3 "NATS / HTTP"). QueueBox's choice, documented in
// docs/sdk.md: the same string `bq-*` headers as Kafka, sent as HTTP request headers.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "babelqueue/envelope.h"

namespace babelqueue {

// Ordered name/value pairs (UTF-8 text).
using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Kafka (broker-bindings §6): record headers bq-job, bq-trace-id, bq-message-id,
// bq-schema-version, bq-source-lang, bq-attempts (integers stringified); the record value is the
// envelope bytes and the record timestamp is meta.created_at (Unix ms).
struct KafkaProjection {
  HeaderList headers;
  int64_t timestamp_ms = 0;
};
KafkaProjection ProjectKafka(const Envelope& envelope);

// Kafka consume side: the bq-attempts header is authoritative when present and a non-negative
// integer (even when lower than the body); otherwise the body's attempts.
int64_t ReconcileKafkaAttempts(int64_t body_attempts, std::optional<std::string_view> header);

// RabbitMQ / AMQP 0-9-1 (broker-bindings §2): properties type = job, correlation_id = trace_id,
// message_id = meta.id, app_id = "babelqueue", content_type = "application/json"; headers
// natively typed: x-schema-version (integer), x-source-lang (string), x-attempts (integer).
struct AmqpProjection {
  std::string type;
  std::string correlation_id;
  std::string message_id;
  std::string app_id = "babelqueue";
  std::string content_type = "application/json";
  Json headers = Json::object();  // {"x-schema-version":1,"x-source-lang":"..","x-attempts":0}
};
AmqpProjection ProjectAmqp(const Envelope& envelope);

// HTTP (QueueBox choice, see above): the Kafka bq-* headers.
HeaderList ProjectHttpHeaders(const Envelope& envelope);

}  // namespace babelqueue
