// transforms.h: the JSONata transforms in the composition root (QueueBox reference §8, §13.6
// step 2). A build without them (QUEUEBOX_WITH_TRANSFORMS=OFF) refuses a configuration that has a
// transform block instead of ignoring it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "queuebox/config.h"
#include "queuebox/relay.h"
#include "queuebox/status.h"
#include "sources/source_transforms.h"

namespace queuebox::app {

// Compiles every route, destination and source transform and source key expression (start-up
// check, also for check-config).
// kInvalidArgument in the configuration's error format, naming each key path with JSONata's code
// and position.
Status CheckTransforms(const Config& config);

// The relay's transform stages with their evaluation threads (one per core, at most one per relay
// worker); null when no route or destination has a transform, so nothing loads.
Result<std::shared_ptr<const DeliveryTransforms>> BuildDeliveryTransforms(const Config& config);

// The sources' transforms and key expressions (sources.<name>.transform, *Expression) with their
// own evaluation threads; null when no source has any, so nothing loads. Errors as
// CheckTransforms, naming sources.<name>.<key>.
Result<std::unique_ptr<sources::SourceTransforms>> BuildSourceTransforms(const Config& config);

// The handler of POST /admin/transform/test (AdminServerDeps::transform_test): a tester with its
// own evaluation thread, kept alive by the handler; its engine loads on the first request.
// Empty when admin.enabled is false or the build has no transforms (the route then answers 404).
std::function<std::pair<int, std::string>(std::string_view)> MakeTransformTestHandler(
    const Config& config);

// Whether this process loaded the JSONata engine (logged at stop: a relay without transforms
// never does).
bool TransformEngineLoaded();

}  // namespace queuebox::app
