#include "core/router.h"

#include <vector>

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

bool TopicPattern::Matches(std::string_view topic) const {
  // Dynamic programming over (token, position), from the last token back: next[i] says whether
  // tokens t+1.. match topic[i..]. No backtracking, so several wildcards cannot make a long topic
  // (a header value, for a filter's `matches`) exponential.
  const size_t n = topic.size();
  std::vector<char> next(n + 1, 0), cur(n + 1, 0);
  std::vector<size_t> hits(n + 2, 0);  // kOne: hits[j] = number of true next[k], k < j
  next[n] = 1;
  for (size_t t = tokens_.size(); t-- > 0;) {
    const Token& tok = tokens_[t];
    switch (tok.kind) {
      case Kind::kLiteral: {
        const size_t len = tok.literal.size();
        for (size_t i = 0; i <= n; ++i) {
          cur[i] = i + len <= n && next[i + len] != 0 && topic.substr(i, len) == tok.literal;
        }
        break;
      }
      case Kind::kOne: {
        // One non-empty dot-free run topic[i, j): j in i+1 .. the first dot at or after i.
        for (size_t k = 0; k <= n; ++k) hits[k + 1] = hits[k] + (next[k] != 0 ? 1 : 0);
        size_t dot = n;
        for (size_t i = n + 1; i-- > 0;) {
          if (i < n && topic[i] == '.') dot = i;
          cur[i] = i < dot && hits[dot + 1] - hits[i + 1] > 0;
        }
        break;
      }
      case Kind::kAny: {
        char any = 0;
        for (size_t i = n + 1; i-- > 0;) {
          any = static_cast<char>(any | next[i]);
          cur[i] = any;
        }
        break;
      }
    }
    next.swap(cur);
  }
  return next[0] != 0;
}

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
