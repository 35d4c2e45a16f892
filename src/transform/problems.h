// problems.h (private to qb_transform): start-up errors in the configuration's format.
#pragma once

#include <string>
#include <vector>

#include "queuebox/status.h"

namespace queuebox::transform::internal {

// kInvalidArgument: "The configuration has N error(s). Fix each one and start QueueBox again."
// then "\n  - <problem>" for each (the format of LoadConfig, src/config).
inline Status ConfigProblems(const std::vector<std::string>& problems) {
  std::string m = "The configuration has " + std::to_string(problems.size()) +
                  (problems.size() == 1 ? " error" : " errors") +
                  ". Fix each one and start QueueBox again.";
  for (const std::string& p : problems) m += "\n  - " + p;
  return InvalidArgument(m);
}

}  // namespace queuebox::transform::internal
