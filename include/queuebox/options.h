// options.h: declarative option tables (architecture §7 rule 4). One table per component drives
// parsing, defaults, validation, error messages and docs/configuration.md.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace queuebox {

enum class OptionType {
  kString,      // any string
  kInt,         // integer within [min, max]
  kMillis,      // integer milliseconds within [min, max]
  kBool,
  kEnum,        // one of enum_values, exact case
  kSecret,      // a string or "file:<path>" (read once at load, trailing newline removed)
  kDuration,    // "<int><s|m|h|d>" -> stored as integer milliseconds
  kStringMap,   // map of string -> string (e.g. headers)
  kStringList,  // list of strings, or a comma-separated string
  kAny,         // a JSON/YAML value kept as is (validated by a component hook)
};

struct OptionSpec {
  std::string key;                       // camelCase key as in QueueBox
  OptionType type = OptionType::kString;
  nlohmann::json default_value;          // null = no default
  bool required = false;
  int64_t min = INT64_MIN, max = INT64_MAX;
  std::vector<std::string> enum_values;
  std::string description;               // one line for docs/configuration.md
};

// Extra checks across keys of one block (e.g. SASL needs three keys). Receives the block with
// defaults filled; returns problems as "key: reason" (key relative to the block).
using BlockValidator = std::function<std::vector<std::string>(const nlohmann::json& block)>;

}  // namespace queuebox
