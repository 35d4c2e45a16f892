// transforms.cc: see transforms.h.
#include "transforms.h"

#include <algorithm>

#if QB_WITH_TRANSFORMS
#include "queuebox/transform/jsonata.h"
#include "queuebox/transform/stages.h"
#include "queuebox/transform/transform_tester.h"
#endif

namespace queuebox::app {

#if QB_WITH_TRANSFORMS

Status CheckTransforms(const Config& config) { return transform::CheckTransforms(config); }

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
  return false;
}

}  // namespace

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
