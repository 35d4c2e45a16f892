// transform_options.h: the option table of a JSONata transform block (QueueBox reference §8):
// routes[i].transform, destinations.<name>.transform and sources.<name>.transform, bound into
// TransformConfig (queuebox/config.h). Beside the struct, below both the configuration and the
// sources that nest it.
//
// Thread-safety: built once and immutable.
#pragma once

#include "queuebox/config.h"
#include "queuebox/options.h"

namespace queuebox {

// expression, timeoutMs, maxDepth, onError.
const OptionTable<TransformConfig>& TransformOptions();

}  // namespace queuebox
