// shopify_auth.cc: `type: shopify`, X-Shopify-Hmac-Sha256: base64 HMAC-SHA256(secret, body).
#include "auth/auth_schemes.h"

namespace queuebox {
namespace {

constexpr char kShopifyHeader[] = "X-Shopify-Hmac-Sha256";

class ShopifyAuth final : public RequestAuth {
 public:
  explicit ShopifyAuth(const ShopifyAuthSettings& s)
      : secrets_(ActiveSecrets(s.secret, s.previous_secrets)) {}

  Status Check(const HeaderLookup& header, std::string_view body, int64_t) const override {
    const std::string signature = header(kShopifyHeader);
    if (signature.empty())
      return PermissionDenied(std::string("Missing ") + kShopifyHeader + " header");
    bool match = false;
    for (const std::string& secret : secrets_) {
      auto mac = HmacBytes("HmacSHA256", secret, body);
      if (mac.ok() && ConstantTimeEquals(signature, Base64Encode(*mac))) match = true;
    }
    return match ? Status::Ok() : PermissionDenied("Invalid signature");
  }
  std::vector<std::string> credential_headers() const override { return {kShopifyHeader}; }

 private:
  std::vector<std::string> secrets_;  // secret, then previousSecrets
};

}  // namespace

const OptionTable<ShopifyAuthSettings>& ShopifyAuthOptions() {
  using S = ShopifyAuthSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Secret("secret", &S::secret, "The app's client secret (UTF-8)").Required(),
      PreviousSecretsOption(&S::previous_secrets),
  };
  return *table;
}

AuthScheme ShopifyAuthScheme() {
  AuthScheme scheme = MakeAuthScheme<ShopifyAuthSettings>(
      "shopify", ShopifyAuthOptions(),
      [](ShopifyAuthSettings s, const std::string& path) -> Result<std::unique_ptr<RequestAuth>> {
        QB_RETURN_IF_ERROR(CheckSecrets(s.secret, s.previous_secrets, path));
        return std::unique_ptr<RequestAuth>(new ShopifyAuth(s));
      });
  scheme.admin = false;  // a provider signs webhooks, not admin calls
  return scheme;
}

}  // namespace queuebox
