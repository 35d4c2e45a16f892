// json_path.h: the definite JSONPath subset that source key paths use (QueueBox reads them with
// Jayway json-path; reference §9.4, §11.4). A definite path names at most one value:
//   $                the document          $.a.b, a.b       members ("$." is implied)
//   $['a'], $["a"]   one member by name    $.a[0], $.a[-1]  one array element (-1: the last)
// Anything that can name several values is indefinite and refused at start: `..`, `*`, `[*]`,
// filters `[?(...)]`, slices `[1:3]`, unions `[0,1]` / `['a','b']`.
//
// Thread-safety: a compiled path is immutable.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "queuebox/status.h"

namespace queuebox {

class JsonPath {
 public:
  // kInvalidArgument "<path> is not a definite JSONPath: <why>" for an indefinite path, or
  // "<path> is not a JSONPath: <why>" for one that does not parse.
  static Result<JsonPath> Compile(std::string_view path);

  // The value the path names; nullptr when a step is missing.
  const nlohmann::json* Find(const nlohmann::json& document) const;

  // The path's value as a key: a string (trimmed), a number (its JSON text) or a boolean;
  // nullopt for a missing value, null, an object, an array or a blank string.
  std::optional<std::string> Text(const nlohmann::json& document) const;

  const std::string& text() const { return text_; }

 private:
  using Step = std::variant<std::string, long long>;  // member name | array index
  std::string text_;
  std::vector<Step> steps_;
};

// The first path of `paths` that gives a value (JsonPath::Text), if any.
std::optional<std::string> FirstText(const std::vector<JsonPath>& paths,
                                     const nlohmann::json& document);

}  // namespace queuebox
