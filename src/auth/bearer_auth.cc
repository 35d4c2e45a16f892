// bearer_auth.cc: `type: bearer`, Authorization: Bearer <token> (scheme any case).
#include <cctype>

#include "auth/auth_schemes.h"

namespace queuebox {
namespace {

class BearerAuth final : public RequestAuth {
 public:
  explicit BearerAuth(std::string token) : token_(std::move(token)) {}
  Status Check(const HeaderLookup& header, std::string_view, int64_t) const override {
    std::string v = header("Authorization");
    if (v.empty()) return PermissionDenied("Missing Authorization header");
    if (v.size() < 7 || !IsBearer(std::string_view(v).substr(0, 7))) {
      return PermissionDenied("Invalid bearer token");
    }
    std::string_view presented = std::string_view(v).substr(7);
    while (!presented.empty() && presented.front() == ' ') presented.remove_prefix(1);
    if (!ConstantTimeEquals(presented, token_)) return PermissionDenied("Invalid bearer token");
    return Status::Ok();
  }
  std::vector<std::string> credential_headers() const override { return {"Authorization"}; }

 private:
  // "bearer " in any letter case.
  static bool IsBearer(std::string_view s) {
    static constexpr std::string_view kScheme = "bearer ";
    for (size_t i = 0; i < kScheme.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(s[i])) != kScheme[i]) return false;
    }
    return true;
  }

  std::string token_;
};

}  // namespace

const OptionTable<BearerAuthSettings>& BearerAuthOptions() {
  static const OptionTable<BearerAuthSettings>* const table = new OptionTable<BearerAuthSettings>{
      opt::Secret("token", &BearerAuthSettings::token,
                  "Expected token of `Authorization: Bearer <token>`")
          .Required(),
  };
  return *table;
}

AuthScheme BearerAuthScheme() {
  return MakeAuthScheme<BearerAuthSettings>(
      "bearer", BearerAuthOptions(),
      [](BearerAuthSettings s, const std::string& path) -> Result<std::unique_ptr<RequestAuth>> {
        // An empty credential would accept an empty header: refuse it.
        if (s.token.empty()) return InvalidArgument(path + ".token is required");
        return std::unique_ptr<RequestAuth>(new BearerAuth(std::move(s.token)));
      });
}

}  // namespace queuebox
