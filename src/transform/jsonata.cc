// jsonata.cc: Expression, Bindings and TransformError (the engine: engine.cc and module/).
#include "queuebox/transform/jsonata.h"

#include <functional>
#include <optional>
#include <string>

#include "engine.h"
#include "json/escape.h"
#include "json/utf8.h"

namespace queuebox::transform {

std::string_view ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kSyntax:
      return "syntax";
    case ErrorKind::kEvaluation:
      return "evaluation";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kDepth:
      return "depth";
    case ErrorKind::kMemory:
      return "memory";
    case ErrorKind::kInvalidArgument:
      return "invalid_argument";
    case ErrorKind::kEngine:
      return "engine";
  }
  return "unknown";
}

std::string TransformError::ToString() const {
  std::string out = code;
  if (!code.empty() && position >= 0) out += " at position " + std::to_string(position);
  if (!out.empty()) out += ": ";
  return out + message;
}

Status TransformError::ToStatus() const {
  switch (kind) {
    case ErrorKind::kTimeout:
      return DeadlineExceeded(ToString());
    case ErrorKind::kDepth:
    case ErrorKind::kMemory:
      return {StatusCode::kResourceExhausted, ToString()};
    case ErrorKind::kEngine:
      return Internal(ToString());
    case ErrorKind::kSyntax:
    case ErrorKind::kEvaluation:
    case ErrorKind::kInvalidArgument:
      break;
  }
  return InvalidArgument(ToString());
}

void Bindings::AppendName(std::string_view name) {
  json_.push_back(json_.empty() ? '{' : ',');
  queuebox::json::AppendQuoted(json_, name);
  json_.push_back(':');
}

Bindings& Bindings::SetString(std::string_view name, std::string_view value) {
  AppendName(name);
  queuebox::json::AppendQuoted(json_, value);
  return *this;
}

Bindings& Bindings::SetInt(std::string_view name, std::int64_t value) {
  AppendName(name);
  json_ += std::to_string(value);
  return *this;
}

Bindings& Bindings::SetNull(std::string_view name) {
  AppendName(name);
  json_ += "null";
  return *this;
}

Bindings& Bindings::SetJson(std::string_view name, std::string_view json) {
  AppendName(name);
  json_.append(json);
  return *this;
}

TransformResult<Expression> Expression::Compile(std::string text, Limits limits) {
  if (limits.timeout.count() <= 0 || limits.max_depth <= 0) {
    TransformError e;
    e.kind = ErrorKind::kInvalidArgument;
    e.message = "timeoutMs and maxDepth must be greater than 0";
    return e;
  }
  // SpiderMonkey refuses text that is not UTF-8 with an exception, which reads as running out of
  // memory; a store may hold such bytes (SQLite TEXT), so it is refused here, by name.
  if (std::optional<size_t> at = json::FirstInvalidUtf8(text)) {
    TransformError e;
    e.kind = ErrorKind::kInvalidArgument;
    e.message = "The expression is not UTF-8 (byte " + std::to_string(*at) + ")";
    return e;
  }
  auto state = std::make_shared<State>();
  state->hash = std::hash<std::string>()(text) * 31 + std::hash<int>()(limits.max_depth);
  state->text = std::move(text);
  state->limits = limits;
  TransformResult<internal::Engine*> engine = internal::Engine::ForThisThread();
  if (!engine.ok()) return engine.error();
  TransformResult<bool> compiled = engine.value()->Compile(*state);
  if (!compiled.ok()) return compiled.error();
  return Expression(std::move(state));
}

const std::string& Expression::text() const { return state_->text; }
const Limits& Expression::limits() const { return state_->limits; }

TransformResult<std::optional<std::string>> Expression::Evaluate(std::string_view input_json,
                                                                 const Bindings& bindings) const {
  // A UTF-8 byte order mark before the input is skipped, as the JSON checks of the sources and
  // destinations (nlohmann) skip it; JSON.parse would refuse the input as not JSON.
  if (input_json.substr(0, 3) == "\xEF\xBB\xBF") input_json.remove_prefix(3);
  // As in Compile: bytes that are not UTF-8 are named, not taken for a lack of memory.
  const std::string bindings_json = bindings.json();
  std::optional<size_t> at = json::FirstInvalidUtf8(input_json);
  if (at || json::FirstInvalidUtf8(bindings_json)) {
    TransformError e;
    e.kind = ErrorKind::kInvalidArgument;
    e.message = "The input or a binding is not JSON: " +
                (at ? "the input is not UTF-8 (byte " + std::to_string(*at) + ")"
                    : std::string("a binding is not UTF-8"));
    return e;
  }
  TransformResult<internal::Engine*> engine = internal::Engine::ForThisThread();
  if (!engine.ok()) return engine.error();
  return engine.value()->Evaluate(*state_, input_json, bindings_json);
}

}  // namespace queuebox::transform
