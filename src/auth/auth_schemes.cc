// auth_schemes.cc: the one list of request auth schemes, and what the signing schemes share.
#include "auth/auth_schemes.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>

namespace queuebox {
namespace {

// The variants of the schemes (those offered to admin.auth when `admin_only`), sorted by type.
std::vector<BlockVariant>* VariantsOf(bool admin_only) {
  auto* v = new std::vector<BlockVariant>();
  for (const AuthScheme& s : BuiltinAuthSchemes()) {
    if (admin_only && !s.admin) continue;
    v->push_back(BlockVariant{s.type, s.options, s.validate, s.complete});
  }
  std::sort(v->begin(), v->end(),
            [](const BlockVariant& a, const BlockVariant& b) { return a.type < b.type; });
  return v;
}

}  // namespace

const std::vector<AuthScheme>& BuiltinAuthSchemes() {
  static const std::vector<AuthScheme>* const schemes = new std::vector<AuthScheme>{
      BearerAuthScheme(),  ApiKeyAuthScheme(),           HmacAuthScheme(),   GitHubAuthScheme(),
      ShopifyAuthScheme(), StandardWebhooksAuthScheme(), StripeAuthScheme(),
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
  static const std::vector<BlockVariant>* const variants = VariantsOf(/*admin_only=*/true);
  return *variants;
}

const std::vector<BlockVariant>& SourceAuthVariants() {
  static const std::vector<BlockVariant>* const variants = VariantsOf(/*admin_only=*/false);
  return *variants;
}

std::vector<std::string> ActiveSecrets(const std::string& secret,
                                       const std::vector<std::string>& previous) {
  std::vector<std::string> all{secret};
  all.insert(all.end(), previous.begin(), previous.end());
  return all;
}

Status CheckSecrets(const std::string& secret, const std::vector<std::string>& previous,
                    const std::string& path) {
  // An empty secret would make a signature anyone can compute: refuse it.
  if (secret.empty()) return InvalidArgument(path + ".secret is required");
  for (const std::string& p : previous) {
    if (p.empty()) return InvalidArgument(path + ".previousSecrets: a secret is empty");
  }
  return Status::Ok();
}

Status CheckUnixSeconds(std::string_view text, std::string_view header, int64_t now_ms,
                        int64_t tolerance_ms, int64_t* seconds) {
  if (text.empty()) return PermissionDenied("Missing " + std::string(header) + " header");
  int64_t ts = 0;
  const bool digits =
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), ts);
  if (!digits || ec != std::errc() || p != text.data() + text.size()) {
    return PermissionDenied("Invalid timestamp format");
  }
  if (ts > std::numeric_limits<int64_t>::max() / 1000) {
    return PermissionDenied("Request timestamp in the future");
  }
  const int64_t ts_ms = ts * 1000;
  // The distance in unsigned arithmetic: int64 subtraction overflows near the range's ends.
  const bool past = now_ms >= ts_ms;
  const uint64_t distance = past ? static_cast<uint64_t>(now_ms) - static_cast<uint64_t>(ts_ms)
                                 : static_cast<uint64_t>(ts_ms) - static_cast<uint64_t>(now_ms);
  if (tolerance_ms < 0 || distance > static_cast<uint64_t>(tolerance_ms)) {
    return PermissionDenied(past ? "Request timestamp expired" : "Request timestamp in the future");
  }
  *seconds = ts;
  return Status::Ok();
}

}  // namespace queuebox
