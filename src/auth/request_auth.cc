// request_auth.cc: RequestAuth::Create through the scheme list.
#include "auth/request_auth.h"

#include <algorithm>
#include <cctype>

#include "auth/auth_schemes.h"

namespace queuebox {
namespace {

using nlohmann::json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The schemes a block under `path` may name: admin.auth takes those offered to the admin routes.
std::vector<const AuthScheme*> SchemesFor(const std::string& path) {
  const bool admin = path.rfind("admin.", 0) == 0;
  std::vector<const AuthScheme*> out;
  for (const AuthScheme& s : BuiltinAuthSchemes()) {
    if (s.admin || !admin) out.push_back(&s);
  }
  return out;
}

// "a, b or c": the schemes in list order.
std::string SchemeNames(const std::vector<const AuthScheme*>& all) {
  std::string names;
  for (size_t i = 0; i < all.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i]->type;
  }
  return names;
}

}  // namespace

Result<std::unique_ptr<RequestAuth>> RequestAuth::Create(const AdminAuthConfig& config,
                                                         const std::string& path) {
  const std::vector<const AuthScheme*> schemes = SchemesFor(path);
  const std::string type = Lower(config.type);
  auto found = std::find_if(schemes.begin(), schemes.end(),
                            [&type](const AuthScheme* s) { return s->type == type; });
  if (found == schemes.end()) {
    return InvalidArgument(path + ".type must be " + SchemeNames(schemes) + " (got '" +
                           config.type + "')");
  }
  const AuthScheme* scheme = *found;
  return scheme->create(config.options.is_object() ? config.options : json::object(), path);
}

}  // namespace queuebox
