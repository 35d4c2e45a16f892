// auth_schemes.cc: the one list of request auth schemes.
#include "auth/auth_schemes.h"

#include <algorithm>

namespace queuebox {

const std::vector<AuthScheme>& BuiltinAuthSchemes() {
  static const std::vector<AuthScheme>* const schemes = new std::vector<AuthScheme>{
      BearerAuthScheme(),
      ApiKeyAuthScheme(),
      HmacAuthScheme(),
  };
  return *schemes;
}

const AuthScheme* FindAuthScheme(std::string_view type) {
  for (const AuthScheme& s : BuiltinAuthSchemes()) {
    if (s.type == type) return &s;
  }
  return nullptr;
}

const std::vector<BlockVariant>& AuthVariants() {
  static const std::vector<BlockVariant>* const variants = [] {
    auto* v = new std::vector<BlockVariant>();
    for (const AuthScheme& s : BuiltinAuthSchemes()) {
      v->push_back(BlockVariant{s.type, s.options, s.validate, s.complete});
    }
    std::sort(v->begin(), v->end(),
              [](const BlockVariant& a, const BlockVariant& b) { return a.type < b.type; });
    return v;
  }();
  return *variants;
}

}  // namespace queuebox
