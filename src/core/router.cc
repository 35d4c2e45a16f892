#include "core/router.h"

namespace queuebox {

Result<TopicPattern> TopicPattern::Compile(std::string_view pattern) {
  bool blank = true;
  for (char c : pattern) {
    if (c != ' ' && c != '\t') blank = false;
  }
  if (blank) return InvalidArgument("the topic pattern is blank");
  if (pattern.find("***") != std::string_view::npos) {
    return InvalidArgument("the topic pattern '" + std::string(pattern) +
                           "' contains '***'; use '*' for one segment or '**' for any text");
  }
  TopicPattern p;
  p.text_ = std::string(pattern);
  for (size_t i = 0; i < pattern.size();) {
    if (pattern[i] == '*') {
      if (i + 1 < pattern.size() && pattern[i + 1] == '*') {
        p.tokens_.push_back({Kind::kAny, {}});
        i += 2;
      } else {
        p.tokens_.push_back({Kind::kOne, {}});
        i += 1;
      }
      continue;
    }
    size_t j = pattern.find('*', i);
    if (j == std::string_view::npos) j = pattern.size();
    p.tokens_.push_back({Kind::kLiteral, std::string(pattern.substr(i, j - i))});
    i = j;
  }
  return p;
}

bool TopicPattern::MatchFrom(size_t t, std::string_view topic) const {
  if (t == tokens_.size()) return topic.empty();
  const Token& tok = tokens_[t];
  switch (tok.kind) {
    case Kind::kLiteral:
      if (topic.substr(0, tok.literal.size()) != tok.literal) return false;
      return MatchFrom(t + 1, topic.substr(tok.literal.size()));
    case Kind::kOne: {
      // One non-empty run without a dot: try every length (the run ends before a dot).
      size_t max = topic.find('.');
      if (max == std::string_view::npos) max = topic.size();
      for (size_t n = max; n >= 1; --n) {
        if (MatchFrom(t + 1, topic.substr(n))) return true;
      }
      return false;
    }
    case Kind::kAny:
      for (size_t n = 0; n <= topic.size(); ++n) {
        if (MatchFrom(t + 1, topic.substr(n))) return true;
      }
      return false;
  }
  return false;
}

bool TopicPattern::Matches(std::string_view topic) const { return MatchFrom(0, topic); }

Result<Router> Router::Create(const std::vector<RouteConfig>& routes) {
  Router r;
  for (size_t i = 0; i < routes.size(); ++i) {
    auto p = TopicPattern::Compile(routes[i].topic_pattern);
    if (!p.ok()) {
      return InvalidArgument("routes[" + std::to_string(i) +
                             "].topicPattern: " + p.status().message());
    }
    r.patterns_.push_back(std::move(p).value());
    r.routes_.push_back(routes[i]);
  }
  return r;
}

std::optional<size_t> Router::Match(std::string_view topic) const {
  for (size_t i = 0; i < patterns_.size(); ++i) {
    if (patterns_[i].Matches(topic)) return i;
  }
  return std::nullopt;
}

}  // namespace queuebox
