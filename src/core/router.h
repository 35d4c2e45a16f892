// router.h: topic routing (QueueBox reference §6). Routes are tried in list order and the first
// whose topicPattern matches the whole topic wins; a row whose topic matches none goes `dead`
// with "No route matches topic '<topic>'".
//
// Glob: `**` matches any text (may be empty, may contain dots); `*` matches exactly one
// non-empty segment without a dot; every other character is literal. A blank pattern or one
// containing `***` is invalid.
//
// Thread-safety: immutable after Create; Match may be called from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/status.h"

namespace queuebox {

// A compiled topic pattern. Matching takes time linear in topic length times pattern length
// (no backtracking, however many wildcards) and memory linear in topic length.
class TopicPattern {
 public:
  // kInvalidArgument for a blank pattern or one that contains `***`.
  static Result<TopicPattern> Compile(std::string_view pattern);
  bool Matches(std::string_view topic) const;
  const std::string& text() const { return text_; }

 private:
  enum class Kind { kLiteral, kOne, kAny };
  struct Token {
    Kind kind;
    std::string literal;
  };
  std::string text_;
  std::vector<Token> tokens_;
};

class Router {
 public:
  // kInvalidArgument naming routes[i].topicPattern for an invalid pattern.
  static Result<Router> Create(const std::vector<RouteConfig>& routes);
  // Index into the routes of the first match, or nullopt.
  std::optional<size_t> Match(std::string_view topic) const;
  const RouteConfig& route(size_t i) const { return routes_[i]; }
  size_t size() const { return routes_.size(); }

 private:
  std::vector<RouteConfig> routes_;
  std::vector<TopicPattern> patterns_;
};

}  // namespace queuebox
