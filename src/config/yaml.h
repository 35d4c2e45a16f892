// yaml.h: a YAML file as a JSON tree (yaml-cpp wrapped: no exception escapes).
//
// Scalars follow the YAML 1.2 core schema when plain (null, true/false, integers, floats, else
// text); quoted scalars stay text. Mapping keys are text. An empty file is an empty map.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "queuebox/status.h"

namespace queuebox::cfg {

// kInvalidArgument when the file cannot be read (naming it) or does not parse (with line and
// column); the root must be a map.
Result<nlohmann::json> LoadYamlFile(const std::string& path);
// Also kInvalidArgument, with line and column, for bytes that are not UTF-8.
Result<nlohmann::json> ParseYaml(const std::string& text, const std::string& name);

// A plain (unquoted) scalar as the YAML 1.2 core schema reads it: null (~, null, Null, NULL or
// empty), a boolean (true/True/TRUE, false/False/FALSE), an integer ([-+]?[0-9]+, text when out
// of range), a float, else the text itself.
nlohmann::json PlainScalar(const std::string& s);


}  // namespace queuebox::cfg
