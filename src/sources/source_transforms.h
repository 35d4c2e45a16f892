// source_transforms.h: what the sources need of the JSONata source stage and key expressions
// (QueueBox reference §8, §11.1 steps 6-7, §11.3, §11.4). The composition root adapts the
// transform library's SourceStages to it (apps/queuebox/transforms.h), so a source never links
// the engine and a build or configuration without transforms loads nothing.
//
// Order at receipt: keys from the ORIGINAL body (header, expression, path), then the transform,
// then the store (a repeat whose transform now fails is rejected again).
//
// Thread-safety: every method may be called from any number of threads at once.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace queuebox::sources {

// The values the key expressions gave; nullopt = no value (or no expression).
struct ExpressionValues {
  std::optional<std::string> idempotency_key;
  std::optional<std::string> aggregate_id;
  std::optional<std::string> event_type;
};

// What the source stage sees besides the body: its $ variables.
struct TransformInput {
  std::string message_id;   // $messageId: the id the new row will get
  std::string received_at;  // $timestamp: ISO-8601 UTC
  std::optional<std::string> idempotency_key;
  std::optional<std::string> event_type;
  std::vector<std::pair<std::string, std::string>> headers;  // $headers, as stored
};

struct TransformOutput {
  bool rejected = false;  // onError Fail or Dead: HTTP 422; a broker stores the original dead
  std::string payload;    // !rejected: the JSON text to store
  std::string reason;     // rejected: "<JSONata code at position n: message>"
};

class SourceTransforms {
 public:
  virtual ~SourceTransforms() = default;
  virtual bool HasKeyExpressions(std::string_view source) const = 0;
  // Evaluates the source's key expressions on the original body; failures give no value (and
  // log one WARN each).
  virtual ExpressionValues EvaluateKeys(std::string_view source, std::string_view body) const = 0;
  virtual bool HasTransform(std::string_view source) const = 0;
  // Runs the source's transform on `body` (JSON text); a source without one stores `body`.
  virtual TransformOutput Apply(std::string_view source, std::string_view body,
                                const TransformInput& input) const = 0;
};

}  // namespace queuebox::sources
