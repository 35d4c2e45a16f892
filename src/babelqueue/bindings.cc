// bindings.cc: broker-binding projections (see bindings.h).
#include "babelqueue/bindings.h"

#include <charconv>

namespace babelqueue {

KafkaProjection ProjectKafka(const Envelope& env) {
  KafkaProjection out;
  out.headers = {
      {"bq-job", env.job},
      {"bq-trace-id", env.trace_id},
      {"bq-message-id", env.meta.id},
      {"bq-schema-version", std::to_string(env.meta.schema_version)},
      {"bq-source-lang", env.meta.lang},
      {"bq-attempts", std::to_string(env.attempts)},
  };
  out.timestamp_ms = env.meta.created_at;
  return out;
}

int64_t ReconcileKafkaAttempts(int64_t body_attempts, std::optional<std::string_view> header) {
  if (!header || header->empty()) return body_attempts;
  int64_t value = 0;
  const char* end = header->data() + header->size();
  auto [ptr, ec] = std::from_chars(header->data(), end, value);
  if (ec != std::errc() || ptr != end || value < 0) return body_attempts;  // unparseable: body
  return value;
}

AmqpProjection ProjectAmqp(const Envelope& env) {
  AmqpProjection out;
  out.type = env.job;
  out.correlation_id = env.trace_id;
  out.message_id = env.meta.id;
  out.headers["x-schema-version"] = env.meta.schema_version;
  out.headers["x-source-lang"] = env.meta.lang;
  out.headers["x-attempts"] = env.attempts;
  return out;
}

HeaderList ProjectHttpHeaders(const Envelope& env) { return ProjectKafka(env).headers; }

}  // namespace babelqueue
