// source_stage.cc: the source stage and the key expressions (see source_stage.h).
#include "queuebox/transform/source_stage.h"

#include <nlohmann/json.hpp>
#include <thread>

#include "core/log.h"
#include "core/redaction.h"
#include "problems.h"

namespace queuebox::transform {

struct SourceStages::Source {
  std::optional<Stage> transform;
  std::optional<Expression> idempotency_key, aggregate_id, event_type;
};

namespace {

// §11.4: key expressions run with QueueBox's fixed limits.
Limits KeyLimits() { return Limits{std::chrono::milliseconds(100), 100}; }

std::string JsonString(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Bindings SourceBindings(const SourceMessage& message) {
  Bindings b;
  b.SetString("messageId", message.message_id)
      .SetString("topic", message.event_type.value_or(""))
      .SetInt("attempt", 0)
      .SetString("timestamp", InstantText(message.received_at))
      .SetString("source", message.source);
  std::string headers = "{";
  for (const auto& [name, value] : message.headers) {
    if (headers.size() > 1) headers += ',';
    headers += JsonString(name) + ":" + JsonString(value);
  }
  headers += "}";
  b.SetJson("headers", headers);
  if (message.idempotency_key) {
    b.SetString("idempotencyKey", *message.idempotency_key);
  } else {
    b.SetNull("idempotencyKey");
  }
  if (message.event_type) {
    b.SetString("eventType", *message.event_type);
  } else {
    b.SetNull("eventType");
  }
  return b;
}

std::string RejectionBody(std::string_view reason) {
  nlohmann::json body = {{"error", "Transform failed: " + std::string(reason)}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

SourceStageResult ApplySourceStage(const Stage& stage, std::string_view body,
                                   const SourceMessage& message) {
  SourceStageResult result;
  auto out = stage.expression.Evaluate(body, SourceBindings(message));
  if (out.ok()) {
    result.payload = std::move(out).value().value_or("null");
    return result;
  }
  result.failed = true;
  const TransformError& e = out.error();
  log::Warn(stage.on_error == OnError::kSkip
                ? "A source transform failed; the original body is stored"
                : "A source transform failed; the message is rejected",
            {{"source", message.source},
             {"message_id", message.message_id},
             {"transform", stage.path},
             {"on_error", std::string(StrategyLabel(stage.on_error))},
             {"reason", SanitizeError(e.ToString(), 2000)}});
  if (stage.on_error == OnError::kSkip) {
    result.payload = std::string(body);
    return result;
  }
  result.kind = SourceStageResult::Kind::kRejected;
  result.reason = e.ToString();
  return result;
}

std::optional<std::string> EvaluateKeyExpression(const Expression& expression,
                                                 std::string_view body, std::string_view source,
                                                 std::string_view key) {
  auto out = expression.Evaluate(body);
  if (!out.ok()) {
    log::Warn("The " + std::string(key) + "Expression of source '" + std::string(source) +
                  "' failed, so it gives no value: " + SanitizeError(out.error().ToString(), 2000),
              {{"source", std::string(source)}});
    return std::nullopt;
  }
  return KeyValue(out);
}

Result<std::unique_ptr<SourceStages>> SourceStages::Create(
    const std::vector<SourceTransformConfig>& sources, int threads) {
  bool any = false;
  for (const SourceTransformConfig& s : sources) {
    any = any || s.transform || s.idempotency_key_expression || s.aggregate_id_expression ||
          s.event_type_expression;
  }
  if (!any) return std::unique_ptr<SourceStages>();
  std::unique_ptr<SourceStages> stages(new SourceStages());
  std::vector<std::string> problems;
  // Compiled on a thread of its own, joined here: no engine stays on the caller's thread.
  std::thread compiler([&] {
    for (const SourceTransformConfig& s : sources) {
      auto source = std::make_unique<Source>();
      const std::string prefix = "sources." + s.name + ".";
      if (s.transform) {
        Result<Stage> stage = CompileStage(*s.transform, prefix + "transform");
        if (stage.ok()) {
          source->transform = std::move(stage).value();
        } else {
          problems.push_back(stage.status().message());
        }
      }
      auto key = [&](const std::optional<std::string>& text, const char* name,
                     std::optional<Expression>& into) {
        if (!text) return;
        TransformResult<Expression> e = Expression::Compile(*text, KeyLimits());
        if (e.ok()) {
          into = std::move(e).value();
        } else {
          problems.push_back(prefix + name + ": " + e.error().ToString());
        }
      };
      key(s.idempotency_key_expression, "idempotencyKeyExpression", source->idempotency_key);
      key(s.aggregate_id_expression, "aggregateIdExpression", source->aggregate_id);
      key(s.event_type_expression, "eventTypeExpression", source->event_type);
      stages->sources_[s.name] = std::move(source);
    }
  });
  compiler.join();
  if (!problems.empty()) return internal::ConfigProblems(problems);
  stages->threads_ = std::make_unique<EvaluationThreads>(threads);
  return stages;
}

SourceStages::~SourceStages() = default;

const SourceStages::Source* SourceStages::Find(std::string_view source) const {
  auto it = sources_.find(source);
  return it == sources_.end() ? nullptr : it->second.get();
}

bool SourceStages::HasTransform(std::string_view source) const {
  const Source* s = Find(source);
  return s != nullptr && s->transform.has_value();
}

bool SourceStages::HasKeyExpressions(std::string_view source) const {
  const Source* s = Find(source);
  return s != nullptr && (s->idempotency_key || s->aggregate_id || s->event_type);
}

SourceStageResult SourceStages::Apply(std::string_view source, std::string_view body,
                                      const SourceMessage& message) const {
  const Source* s = Find(source);
  if (s == nullptr || !s->transform) return SourceStageResult{{}, std::string(body), {}, false};
  SourceStageResult result;
  threads_->Run(1, [&](std::size_t) { result = ApplySourceStage(*s->transform, body, message); });
  return result;
}

ExpressionKeys SourceStages::EvaluateKeys(std::string_view source, std::string_view body) const {
  ExpressionKeys keys;
  const Source* s = Find(source);
  if (s == nullptr || !(s->idempotency_key || s->aggregate_id || s->event_type)) return keys;
  threads_->Run(1, [&](std::size_t) {
    if (s->idempotency_key) {
      keys.idempotency_key =
          EvaluateKeyExpression(*s->idempotency_key, body, source, "idempotencyKey");
    }
    if (s->aggregate_id) {
      keys.aggregate_id = EvaluateKeyExpression(*s->aggregate_id, body, source, "aggregateId");
    }
    if (s->event_type) {
      keys.event_type = EvaluateKeyExpression(*s->event_type, body, source, "eventType");
    }
  });
  return keys;
}

}  // namespace queuebox::transform
