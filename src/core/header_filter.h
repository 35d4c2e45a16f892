// header_filter.h: a source's header filter (QueueBox reference §11.2). `require` rules must all
// match and `exclude` rules must all fail. A rule names a header (any letter case) and exactly one
// of: equals (a string), in (a non-empty list), matches (a topic glob: `*` one segment, `**` any
// text), exists: true. Values match case-sensitively; a rule with equals/in/matches does not match
// a message lacking the header.
//
// Thread-safety: a built filter is immutable.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/router.h"
#include "queuebox/status.h"

namespace queuebox {

class HeaderFilter {
 public:
  // The value of a header of the message (any letter case); nullopt when absent.
  using Lookup = std::function<std::optional<std::string>(std::string_view name)>;

  // `block`: null (no filter) or {"require": [rules], "exclude": [rules]}. Every problem, as
  // "require[0].in: must be a non-empty list of strings" (relative to the filter block).
  static Result<HeaderFilter> Parse(const nlohmann::json& block);
  // The problems Parse would report, all of them.
  static std::vector<std::string> Problems(const nlohmann::json& block);

  bool empty() const { return require_.empty() && exclude_.empty(); }

  // nullopt when the message passes; else the first failed rule, as QueueBox logs it:
  // "require[0] (X-Env equals)" or "exclude[1] (X-Test exists)". Never a header value.
  std::optional<std::string> FirstFailure(const Lookup& header) const;

 private:
  enum class Kind { kEquals, kIn, kMatches, kExists };
  struct Rule {
    std::string header;
    Kind kind = Kind::kExists;
    std::vector<std::string> values;  // equals: one; in: several
    std::optional<TopicPattern> pattern;
    bool Matches(const Lookup& header) const;
    std::string Describe() const;
  };
  std::vector<Rule> require_, exclude_;
};

}  // namespace queuebox
