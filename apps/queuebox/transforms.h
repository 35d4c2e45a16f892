// transforms.h: the JSONata transforms in the composition root (QueueBox reference §8, §13.6
// step 2). A build without them (QUEUEBOX_WITH_TRANSFORMS=OFF) refuses a configuration that has a
// transform block instead of ignoring it.
#pragma once

#include <memory>

#include "queuebox/config.h"
#include "queuebox/relay.h"
#include "queuebox/status.h"

namespace queuebox::app {

// Compiles every route and destination transform (start-up check, also for check-config).
// kInvalidArgument in the configuration's error format, naming each key path with JSONata's code
// and position.
Status CheckTransforms(const Config& config);

// The relay's transform stages with their evaluation threads (one per core, at most one per relay
// worker); null when no route or destination has a transform, so nothing loads.
Result<std::shared_ptr<const DeliveryTransforms>> BuildDeliveryTransforms(const Config& config);

// Whether this process loaded the JSONata engine (logged at stop: a relay without transforms
// never does).
bool TransformEngineLoaded();

}  // namespace queuebox::app
