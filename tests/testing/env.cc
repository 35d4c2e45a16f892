#include "testing/env.h"

#include <cstdlib>

namespace queuebox::testing {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

bool InCi() {
  std::string v = Env("CI");
  return !v.empty() && v != "false" && v != "0";
}

}  // namespace queuebox::testing
