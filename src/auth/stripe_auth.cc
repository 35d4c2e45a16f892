// stripe_auth.cc: `type: stripe`, Stripe-Signature: t=<Unix s>,v1=<hex>[,v1=<hex>...] (other
// schemes, v0, are skipped); one v1 equal to hex HMAC-SHA256(secret, "<t>.<body>") under an active
// secret passes. The secret (whsec_...) is the key as given, as Stripe's libraries use it.
#include "auth/auth_schemes.h"

namespace queuebox {
namespace {

constexpr char kStripeHeader[] = "Stripe-Signature";

class StripeAuth final : public RequestAuth {
 public:
  explicit StripeAuth(const StripeAuthSettings& s)
      : secrets_(ActiveSecrets(s.secret, s.previous_secrets)),
        tolerance_ms_(s.timestamp_tolerance_ms) {}

  Status Check(const HeaderLookup& header, std::string_view body, int64_t now_ms) const override {
    const std::string value = header(kStripeHeader);
    if (value.empty()) return PermissionDenied(std::string("Missing ") + kStripeHeader + " header");
    std::string_view t;
    std::vector<std::string_view> v1;
    Parse(value, t, v1);
    if (t.empty() || v1.empty()) {
      return PermissionDenied(std::string("Invalid ") + kStripeHeader + " header");
    }
    int64_t ts = 0;
    QB_RETURN_IF_ERROR(CheckUnixSeconds(t, "timestamp", now_ms, tolerance_ms_, &ts));
    std::string payload = std::to_string(ts);
    payload.append(".").append(body);
    bool match = false;
    for (const std::string& secret : secrets_) {
      auto mac = HmacBytes("HmacSHA256", secret, payload);
      if (!mac.ok()) continue;
      const std::string expected = HexLower(*mac);
      for (std::string_view presented : v1)
        match = ConstantTimeEquals(presented, expected) || match;
    }
    return match ? Status::Ok() : PermissionDenied("Invalid signature");
  }
  std::vector<std::string> credential_headers() const override { return {kStripeHeader}; }
  MessageIdSource message_id_source() const override { return {{}, "$.id"}; }

 private:
  // The `t` item (the first) and every `v1` item of "k=v,k=v,...".
  static void Parse(std::string_view header, std::string_view& t,
                    std::vector<std::string_view>& v1) {
    while (!header.empty()) {
      const size_t end = std::min(header.find(','), header.size());
      std::string_view item = header.substr(0, end);
      header.remove_prefix(std::min(end + 1, header.size()));
      if (item.substr(0, 2) == "t=" && t.empty()) t = item.substr(2);
      if (item.substr(0, 3) == "v1=" && item.size() > 3) v1.push_back(item.substr(3));
    }
  }

  std::vector<std::string> secrets_;  // secret, then previousSecrets
  int64_t tolerance_ms_;
};

}  // namespace

const OptionTable<StripeAuthSettings>& StripeAuthOptions() {
  using S = StripeAuthSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Secret("secret", &S::secret, "The endpoint's signing secret (whsec_...)").Required(),
      PreviousSecretsOption(&S::previous_secrets),
      opt::Millis("timestampTolerance", &S::timestamp_tolerance_ms, 300000,
                  "Largest accepted distance between t= and now, past or future")
          .Min(0),
  };
  return *table;
}

AuthScheme StripeAuthScheme() {
  AuthScheme scheme = MakeAuthScheme<StripeAuthSettings>(
      "stripe", StripeAuthOptions(),
      [](StripeAuthSettings s, const std::string& path) -> Result<std::unique_ptr<RequestAuth>> {
        QB_RETURN_IF_ERROR(CheckSecrets(s.secret, s.previous_secrets, path));
        return std::unique_ptr<RequestAuth>(new StripeAuth(s));
      });
  scheme.admin = false;  // a provider signs webhooks, not admin calls
  return scheme;
}

}  // namespace queuebox
