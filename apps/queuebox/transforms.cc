// transforms.cc: see transforms.h.
#include "transforms.h"

#include <algorithm>

#include "sources/registry.h"

#if QB_WITH_TRANSFORMS
#include "queuebox/transform/jsonata.h"
#include "queuebox/transform/source_stage.h"
#include "queuebox/transform/stages.h"
#include "queuebox/transform/transform_tester.h"
#endif

namespace queuebox::app {
namespace {

// The transform keys of every source that has any.
Result<std::vector<std::pair<std::string, SourceKeys>>> SourcesWithTransforms(
    const Config& config) {
  std::vector<std::pair<std::string, SourceKeys>> out;
  for (const auto& [name, source] : config.sources) {
    QB_ASSIGN_OR_RETURN(sources::SourceCommon common, sources::BindSourceCommon(source));
    SourceKeys& keys = common.keys;
    if (keys.transform || keys.idempotency_key_expression || keys.aggregate_id_expression ||
        keys.event_type_expression) {
      out.emplace_back(name, std::move(keys));
    }
  }
  return out;
}

}  // namespace

#if QB_WITH_TRANSFORMS

namespace {

class SourceStagesAdapter final : public sources::SourceTransforms {
 public:
  explicit SourceStagesAdapter(std::unique_ptr<transform::SourceStages> stages)
      : stages_(std::move(stages)) {}

  bool HasKeyExpressions(std::string_view source) const override {
    return stages_->HasKeyExpressions(source);
  }
  sources::ExpressionValues EvaluateKeys(std::string_view source,
                                         std::string_view body) const override {
    transform::ExpressionKeys keys = stages_->EvaluateKeys(source, body);
    return {std::move(keys.idempotency_key), std::move(keys.aggregate_id),
            std::move(keys.event_type)};
  }
  bool HasTransform(std::string_view source) const override {
    return stages_->HasTransform(source);
  }
  sources::TransformOutput Apply(std::string_view source, std::string_view body,
                                 const sources::TransformInput& input) const override {
    transform::SourceMessage message;
    message.source = std::string(source);
    message.message_id = input.message_id;
    message.received_at = input.received_at;
    message.idempotency_key = input.idempotency_key;
    message.event_type = input.event_type;
    message.headers = input.headers;
    transform::SourceStageResult r = stages_->Apply(source, body, message);
    sources::TransformOutput out;
    out.rejected = r.kind == transform::SourceStageResult::Kind::kRejected;
    out.payload = std::move(r.payload);
    out.reason = std::move(r.reason);
    return out;
  }

 private:
  std::unique_ptr<transform::SourceStages> stages_;
};

}  // namespace

Result<std::unique_ptr<sources::SourceTransforms>> BuildSourceTransforms(const Config& config) {
  QB_ASSIGN_OR_RETURN(auto list, SourcesWithTransforms(config));
  if (list.empty()) return std::unique_ptr<sources::SourceTransforms>();
  std::vector<transform::SourceTransformConfig> configs;
  for (auto& [name, keys] : list) {
    transform::SourceTransformConfig c;
    c.name = name;
    c.transform = keys.transform;
    c.idempotency_key_expression = keys.idempotency_key_expression;
    c.aggregate_id_expression = keys.aggregate_id_expression;
    c.event_type_expression = keys.event_type_expression;
    configs.push_back(std::move(c));
  }
  QB_ASSIGN_OR_RETURN(
      std::unique_ptr<transform::SourceStages> stages,
      transform::SourceStages::Create(configs, transform::DefaultEvaluationThreads(4)));
  if (!stages) return std::unique_ptr<sources::SourceTransforms>();
  return std::unique_ptr<sources::SourceTransforms>(
      std::make_unique<SourceStagesAdapter>(std::move(stages)));
}

Status CheckTransforms(const Config& config) {
  QB_RETURN_IF_ERROR(transform::CheckTransforms(config));
  return BuildSourceTransforms(config).status();
}

Result<std::shared_ptr<const DeliveryTransforms>> BuildDeliveryTransforms(const Config& config) {
  // The relay runs one publish worker per unit of outbox.concurrency, at most 16 (core/relay.cc).
  const int workers = std::clamp(config.outbox.concurrency, 1, 16);
  QB_ASSIGN_OR_RETURN(
      std::shared_ptr<transform::DeliveryStages> stages,
      transform::DeliveryStages::Create(config, transform::DefaultEvaluationThreads(workers)));
  return std::shared_ptr<const DeliveryTransforms>(std::move(stages));
}

std::function<std::pair<int, std::string>(std::string_view)> MakeTransformTestHandler(
    const Config& config) {
  if (!config.admin.enabled) return {};
  transform::TransformTester::Options options;
  options.max_transform_timeout_ms = config.admin.max_transform_timeout_ms;
  auto tester = std::make_shared<transform::TransformTester>(std::move(options));
  return [tester](std::string_view body) {
    transform::TransformTestAnswer answer = tester->Handle(body);
    return std::make_pair(answer.status, std::move(answer.body));
  };
}

bool TransformEngineLoaded() { return transform::EnginesLoaded(); }

#else

namespace {

bool HasTransforms(const Config& config) {
  for (const RouteConfig& r : config.routes) {
    if (r.transform) return true;
  }
  for (const auto& [name, d] : config.destinations) {
    if (d.transform) return true;
  }
  auto sources = SourcesWithTransforms(config);
  return !sources.ok() || !sources->empty();
}

}  // namespace

Result<std::unique_ptr<sources::SourceTransforms>> BuildSourceTransforms(const Config& config) {
  QB_RETURN_IF_ERROR(CheckTransforms(config));
  return std::unique_ptr<sources::SourceTransforms>();
}

Status CheckTransforms(const Config& config) {
  if (!HasTransforms(config)) return Status::Ok();
  return InvalidArgument(
      "The configuration has transform blocks, but this build has no JSONata transforms "
      "(QUEUEBOX_WITH_TRANSFORMS=OFF). Remove the blocks or use a build with transforms.");
}

Result<std::shared_ptr<const DeliveryTransforms>> BuildDeliveryTransforms(const Config& config) {
  QB_RETURN_IF_ERROR(CheckTransforms(config));
  return std::shared_ptr<const DeliveryTransforms>();
}

std::function<std::pair<int, std::string>(std::string_view)> MakeTransformTestHandler(
    const Config& /*config*/) {
  return {};
}

bool TransformEngineLoaded() { return false; }

#endif

}  // namespace queuebox::app
