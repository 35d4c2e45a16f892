// intake.h: the one intake pipeline of every source (QueueBox reference §9.3, §9.4, §11.1-§11.5):
// what a received message goes through before it is stored, written once for the HTTP and the
// broker sources. The steps, in order:
//   1. filter        the header filter (sources.<name>.filter): a message that fails is Filtered
//   2. correlation   X-Correlation-Id, else the broker's correlation property, else a new UUID
//                    (SanitizeCorrelationId)
//   3. headers       the headers stored with the row (StoredHeaders: never a credential)
//   4. JSON guard    the body is UTF-8 without NUL, nests at most kMaxJsonDepth, and parses
//   5. keys          idempotency key, aggregate id, event type, each by its KeyPlan
//   6. key length    each at most kMaxKeyChars characters
//   7. publish time  initialDelay; scheduledAtHeader, scheduledAtPath(s), then the broker's time
//                    (only when a publish-time key is configured; one that is not a time is
//                    ignored with a WARN)
//   8. transform     the source stage (sources.<name>.transform) on the original body
// A step that finds a fault hands it to the source's refusal policy:
//   kRefuse     (HTTP) the message is Refused with its status and error, nothing is stored:
//               not JSON 400 "Invalid JSON", no idempotency key 400, a key too long 400, a
//               failed transform 422; each counted as queuebox_inbox_rejections_total{reason}.
//   kStoreDead  (brokers) a message cannot be answered and must not be lost: the row goes dead
//               with last_error. Not JSON stores {"raw": "<body as text>"} (keys from headers
//               and ids only); a key too long stores BodyDigestKey(key) and drops a too long
//               attribute; a dead row skips steps 7 and 8. A failed transform stores the
//               original payload, without delay (counted as transform_failed).
// With tracing on (IntakeRules::tracer), before the steps the message's traceparent and
// tracestate are replaced by those of its receive span (a child of a valid traceparent, else a
// new trace or none; an invalid value is dropped), so the stored headers carry the span on; the
// span is recorded when the steps end.
// A new step is one member function and one entry of the step list in intake.cc.
//
// Thread-safety: a built Intake is immutable; Receive may run on any number of threads at once.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/header_filter.h"
#include "core/json_path.h"
#include "core/log.h"
#include "queuebox/inbox.h"
#include "queuebox/status.h"
#include "sources/intake_observer.h"
#include "sources/source_keys.h"
#include "sources/source_transforms.h"

namespace queuebox::telemetry {
class Tracer;
struct SpanStart;
}  // namespace queuebox::telemetry

namespace queuebox::sources {

// The deepest nesting of arrays and objects a body may have (the parser recurses).
inline constexpr int kMaxJsonDepth = 1000;

// One message as a source received it, before the steps.
struct Arrival {
  std::string body;  // raw bytes
  // Headers as strings, in arrival order; a name may repeat (any letter case).
  std::vector<std::pair<std::string, std::string>> headers;
  // The broker's own message id: AMQP message_id, NATS Nats-Msg-Id.
  std::optional<std::string> message_id;
  // Kafka's record key as text.
  std::optional<std::string> record_key;
  // AMQP correlation_id property: the correlation id after the X-Correlation-Id header.
  std::optional<std::string> correlation_property;
  // The broker's time (AMQP timestamp, Kafka record timestamp, JetStream stored time), Unix ms:
  // the publish time when scheduledAtHeader/Path give none.
  std::optional<int64_t> broker_time_ms;
};

// What a source does with a fault of a message (see above).
enum class RefusalPolicy { kRefuse, kStoreDead };

// Which value of a repeated header the steps read.
enum class RepeatedHeader { kFirstWins, kLastWins };

// Where a key is read from; a KeyPlan tries its places in order, the first non-blank value wins
// (trimmed, except a path's value).
enum class KeyFrom {
  kHeader,      // KeyPlan::header
  kExpression,  // the source's JSONata key expression (JSON bodies)
  kPaths,       // KeyPlan::paths (JSON bodies)
  kMessageId,   // Arrival::message_id
  kRecordKey,   // Arrival::record_key
  kBodyDigest,  // BodyDigestKey(body)
};

struct KeyPlan {
  std::vector<KeyFrom> order;
  std::string header;           // kHeader
  std::vector<JsonPath> paths;  // kPaths
};

// Everything the steps read of one source, built once by the source.
struct IntakeRules {
  std::string source;  // sources.<name>: the row's source
  RefusalPolicy policy = RefusalPolicy::kStoreDead;
  RepeatedHeader repeated = RepeatedHeader::kLastWins;
  HeaderFilter filter;
  KeyPlan idempotency_key, aggregate_id, event_type;
  std::optional<std::string> scheduled_at_header;
  std::vector<JsonPath> publish_paths;
  std::optional<int64_t> initial_delay_ms;
  InboxConsumption consumption = InboxConsumption::kPush;
  // Headers never stored besides the credential ones StoredHeaders drops: the source auth's
  // headers (may be none) and, when set, every name `unstored` accepts.
  std::vector<std::string> credential_headers;
  bool (*unstored)(std::string_view name) = nullptr;
  // Borrowed, may be null, and must outlive the Intake.
  const SourceTransforms* transforms = nullptr;
  IntakeObserver* observer = nullptr;
  // Limits the per-message WARN lines (publish time, refusals) of a source that answers its
  // sender; null: each is logged. Borrowed.
  log::RateLimiter* refusal_log = nullptr;
  // Tracing (telemetry.enabled): the receive span of each message. RulesFromKeys sets the
  // process's tracer (telemetry::ProcessTracer()); null: off. `kind` names the span's
  // messaging.system ("http", "rabbitmq", "kafka", "nats").
  std::shared_ptr<telemetry::Tracer> tracer;
  std::string kind = "http";
};

// What the steps made of one message.
struct Intaken {
  enum class Kind { kRow, kFiltered, kRefused };
  Kind kind = Kind::kRow;
  // kRow: the row to store (dead or not). kRefused: what was read before the fault (the
  // correlation id, for the answer).
  NewInboxMessage row;
  std::string filter_rule;  // kFiltered: the first rule that failed
  int status = 0;           // kRefused: the HTTP status of the answer
  std::string error;        // kRefused: the answer's error text
};

class Intake {
 public:
  explicit Intake(IntakeRules rules);
  ~Intake();
  Intake(Intake&&) noexcept;
  Intake& operator=(Intake&&) noexcept;

  // Runs the steps over `arrival`. Never throws for any input.
  Intaken Receive(Arrival arrival) const;

  const std::string& source() const;

 private:
  struct Draft;
  enum class Fault { kInvalidJson, kNoKey, kKeyTooLong, kTransformFailed };
  using Step = bool (Intake::*)(Draft&) const;  // false: the steps end here

  bool Filter(Draft& d) const;
  bool Correlate(Draft& d) const;
  bool KeepHeaders(Draft& d) const;
  bool GuardJson(Draft& d) const;
  bool ReadKeys(Draft& d) const;
  bool CheckKeyLength(Draft& d) const;
  bool SetPublishTime(Draft& d) const;
  bool Transform(Draft& d) const;

  // Hands a fault to the policy; false when the steps end (refused).
  bool OnFault(Draft& d, Fault fault, std::string text) const;
  // Tracing: the receive span's start (rewrites the arrival's trace headers), and its record.
  std::optional<telemetry::SpanStart> BeginSpan(Arrival& arrival) const;
  void EndSpan(const telemetry::SpanStart& span, const Intaken& out) const;
  std::optional<std::string> Header(const Arrival& a, std::string_view name) const;
  std::optional<std::string> Read(const Draft& d, const KeyPlan& plan,
                                  const std::optional<std::string>& expressed) const;
  void Warn(const std::string& message, std::initializer_list<log::Field> fields) const;

  std::unique_ptr<const IntakeRules> rules_;
};

// The rules every kind reads from its SourceKeys and idempotencyKeyPath: the filter, the paths
// of the three plans (their order left to the kind), the publish-time keys, initialDelay and
// consumption. kInvalidArgument naming sources.<source>.<key> for a filter or a path that does
// not compile (config validation refuses those first; this is the last guard).
Result<IntakeRules> RulesFromKeys(const std::string& source, const SourceKeys& keys,
                                  const std::vector<std::string>& idempotency_key_path);

// "sha256:" + lowercase hex SHA-256 of `body`: the last idempotency-key fallback of a broker.
std::string BodyDigestKey(std::string_view body);

}  // namespace queuebox::sources
