// request_auth.cc: RequestAuth::Create through the scheme list, and the constant-time comparison
// the schemes share.
#include "auth/request_auth.h"

#include <openssl/crypto.h>

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

// "a, b or c": the schemes in list order.
std::string SchemeNames() {
  const std::vector<AuthScheme>& all = BuiltinAuthSchemes();
  std::string names;
  for (size_t i = 0; i < all.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i].type;
  }
  return names;
}

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<std::unique_ptr<RequestAuth>> RequestAuth::Create(const AdminAuthConfig& config,
                                                         const std::string& path) {
  const AuthScheme* scheme = FindAuthScheme(Lower(config.type));
  if (scheme == nullptr) {
    return InvalidArgument(path + ".type must be " + SchemeNames() + " (got '" + config.type +
                           "')");
  }
  return scheme->create(config.options.is_object() ? config.options : json::object(), path);
}

}  // namespace queuebox
