// transforms.cc: see transforms.h.
#include "transforms.h"

#include <algorithm>

#if QB_WITH_TRANSFORMS
#include "queuebox/transform/jsonata.h"
#include "queuebox/transform/stages.h"
#endif

namespace queuebox::app {

#if QB_WITH_TRANSFORMS

Status CheckTransforms(const Config& config) { return transform::CheckTransforms(config); }

Result<std::shared_ptr<const DeliveryTransforms>> BuildDeliveryTransforms(const Config& config) {
  // The relay runs one publish worker per unit of outbox.concurrency, at most 16 (core/relay.cc).
  const int workers = std::clamp(config.outbox.concurrency, 1, 16);
  QB_ASSIGN_OR_RETURN(std::shared_ptr<transform::DeliveryStages> stages,
                      transform::DeliveryStages::Create(
                          config, transform::DefaultEvaluationThreads(workers)));
  return std::shared_ptr<const DeliveryTransforms>(std::move(stages));
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

bool TransformEngineLoaded() { return false; }

#endif

}  // namespace queuebox::app
