// yaml.h: a YAML file as a JSON tree (yaml-cpp wrapped: no exception escapes).
//
// Scalars follow the YAML 1.2 core schema when plain (null, true/false, integers, floats, else
// text); quoted scalars stay text. Mapping keys are text. An empty file is an empty map.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "queuebox/status.h"

namespace queuebox::cfg {

// kInvalidArgument when the file cannot be read (naming it) or does not parse (with line and
// column); the root must be a map.
Result<nlohmann::json> LoadYamlFile(const std::string& path);
Result<nlohmann::json> ParseYaml(const std::string& text, const std::string& name);

}  // namespace queuebox::cfg
