// source_stage.h: the source stage and the key expressions of the inbox sources (QueueBox
// reference §8, §11.1 step 6-7, §11.3, §11.4), for the HTTP and broker sources to call.
//
// Order at receipt: the keys are read from the ORIGINAL body (key headers, key expressions, key
// paths), then the source transform runs, then the row is stored (before the duplicate check, so
// a repeat whose transform now fails is rejected again).
//
// Source stage variables ($ = the received body): $messageId (id of the new inbox row), $topic
// (the extracted event type, or ""), $attempt 0, $timestamp (receipt time, ISO-8601), $source
// (the source name), $headers (the received headers, one value per name, exact-case names),
// $idempotencyKey and $eventType (JSON null when missing).
//
// Error strategies at a source:
//   Fail, Dead  rejected: an HTTP source answers 422 {"error":"Transform failed: <reason>"} and
//               stores nothing; a broker source stores the ORIGINAL payload as a dead row and
//               acknowledges. Count queuebox_inbox_rejections_total{reason="transform_failed"}.
//   Skip        the original body is stored.
//
// Key expressions (idempotencyKeyExpression, aggregateIdExpression, eventTypeExpression): on
// the original body, no variables, 100 ms / depth 100. A string as is, a boolean true/false, a
// whole number without a decimal point (515725.0 -> "515725"); an object, array, null, blank
// string or no value give no value. A failure gives no value and one WARN:
//   The {name}Expression of source '{source}' failed, so it gives no value: {reason}
// An expression that does not compile stops the start (the error names the key path).
//
// Threads: evaluation runs on the SourceStages' own EvaluationThreads (bounded engines, joined
// when the SourceStages is destroyed). Thread-safety: immutable after Create; every method may be
// called from any number of threads at once.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/status.h"
#include "queuebox/transform/evaluation_threads.h"
#include "queuebox/transform/jsonata.h"
#include "queuebox/transform/stages.h"

namespace queuebox::transform {

// The transform keys of one source (sources.<name>.*), whatever its kind.
struct SourceTransformConfig {
  std::string name;  // sources.<name>
  std::optional<TransformConfig> transform;
  std::optional<std::string> idempotency_key_expression;
  std::optional<std::string> aggregate_id_expression;
  std::optional<std::string> event_type_expression;
};

// What the source knows about a received message when the stage runs.
struct SourceMessage {
  std::string source;                          // $source
  std::string message_id;                      // $messageId: the id the new inbox row will get
  std::string received_at;                     // $timestamp: ISO-8601 (InstantText applies)
  std::optional<std::string> idempotency_key;  // $idempotencyKey (null when missing)
  std::optional<std::string> event_type;       // $eventType (null when missing), $topic ("")
  // $headers: one value per name, names in the letter case received (the credential headers an
  // HTTP source does not store are left out by the caller).
  std::vector<std::pair<std::string, std::string>> headers;
};

// The $ variables of the source stage.
Bindings SourceBindings(const SourceMessage& message);

struct SourceStageResult {
  enum class Kind {
    kStore,     // store `payload` (the transform's output, or the original body after Skip)
    kRejected,  // Fail or Dead: HTTP 422 with RejectionBody(); broker: the original body, dead
  };
  Kind kind = Kind::kStore;
  std::string payload;  // kStore: JSON text to store
  std::string reason;   // kRejected: "<JSONata code at position n: message>"
  bool failed = false;  // the transform failed (Skip stores the original body)
};

// {"error":"Transform failed: <reason>"}: the 422 body of an HTTP source.
std::string RejectionBody(std::string_view reason);

// The three keys a source may read with expressions; nullopt = no value.
struct ExpressionKeys {
  std::optional<std::string> idempotency_key;
  std::optional<std::string> aggregate_id;
  std::optional<std::string> event_type;
};

class SourceStages {
 public:
  // Compiles every source's transform and key expressions (on a short-lived thread) and starts
  // `threads` evaluation threads. nullptr when no source has any. kInvalidArgument in the
  // configuration's error format, one line per block or key that does not compile:
  //   "  - sources.github.transform.expression: S0203 at position 22: ..."
  //   "  - sources.github.idempotencyKeyExpression: S0201 at position 3: ..."
  static Result<std::unique_ptr<SourceStages>> Create(
      const std::vector<SourceTransformConfig>& sources, int threads);
  ~SourceStages();

  // Whether `source` has a transform / any key expression.
  bool HasTransform(std::string_view source) const;
  bool HasKeyExpressions(std::string_view source) const;

  // Runs the source's transform on `body` (JSON text). A source without one stores `body`.
  SourceStageResult Apply(std::string_view source, std::string_view body,
                          const SourceMessage& message) const;

  // Evaluates the source's key expressions on `body` (the original); keys without an expression
  // stay nullopt. A failure logs one WARN per key and gives no value.
  ExpressionKeys EvaluateKeys(std::string_view source, std::string_view body) const;

 private:
  struct Source;
  SourceStages() = default;
  const Source* Find(std::string_view source) const;

  std::map<std::string, std::unique_ptr<Source>, std::less<>> sources_;
  std::unique_ptr<EvaluationThreads> threads_;
};

// Evaluates one key expression on the calling thread's engine and applies the value rules; on a
// failure logs the WARN above (`key` is "idempotencyKey", "aggregateId" or "eventType").
std::optional<std::string> EvaluateKeyExpression(const Expression& expression,
                                                 std::string_view body, std::string_view source,
                                                 std::string_view key);

// The source stage on the calling thread's engine (SourceStages::Apply without the hand-off).
SourceStageResult ApplySourceStage(const Stage& stage, std::string_view body,
                                   const SourceMessage& message);

}  // namespace queuebox::transform
