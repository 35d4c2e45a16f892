// standard_webhooks_auth.cc: `type: standard-webhooks` (https://www.standardwebhooks.com, as Svix
// sends it): webhook-id, webhook-timestamp and webhook-signature, or the same under svix-*; the
// signature header holds space-separated `<version>,<base64>` entries, and one `v1` entry equal to
// base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>") under an active secret passes.
#include "auth/auth_schemes.h"

namespace queuebox {
namespace {

class StandardWebhooksAuth final : public RequestAuth {
 public:
  StandardWebhooksAuth(std::vector<std::string> keys, int64_t tolerance_ms)
      : keys_(std::move(keys)), tolerance_ms_(tolerance_ms) {}

  Status Check(const HeaderLookup& header, std::string_view body, int64_t now_ms) const override {
    // One family of names: webhook-* when its signature is there, else svix-*.
    std::string prefix = "webhook-";
    std::string signatures = header("webhook-signature");
    if (signatures.empty()) {
      signatures = header("svix-signature");
      if (signatures.empty()) return PermissionDenied("Missing webhook-signature header");
      prefix = "svix-";
    }
    const std::string id = header(prefix + "id");
    if (id.empty()) return PermissionDenied("Missing " + prefix + "id header");
    int64_t ts = 0;
    QB_RETURN_IF_ERROR(CheckUnixSeconds(header(prefix + "timestamp"), prefix + "timestamp", now_ms,
                                        tolerance_ms_, &ts));
    std::vector<std::string_view> v1 = V1Entries(signatures);
    if (v1.empty()) return PermissionDenied("Invalid " + prefix + "signature header");
    bool match = false;
    for (const std::string& key : keys_) {
      const std::string expected = StandardWebhooksSignature(key, id, ts, body).substr(3);
      for (std::string_view presented : v1)
        match = ConstantTimeEquals(presented, expected) || match;
    }
    return match ? Status::Ok() : PermissionDenied("Invalid signature");
  }
  std::vector<std::string> credential_headers() const override {
    return {"webhook-signature", "svix-signature"};
  }
  MessageIdSource message_id_source() const override { return {{"webhook-id", "svix-id"}, ""}; }

 private:
  // The base64 of each `v1,<base64>` entry; entries of other versions (v1a, ...) are skipped.
  static std::vector<std::string_view> V1Entries(std::string_view header) {
    std::vector<std::string_view> out;
    while (!header.empty()) {
      const size_t end = std::min(header.find(' '), header.size());
      std::string_view entry = header.substr(0, end);
      header.remove_prefix(std::min(end + 1, header.size()));
      if (entry.size() > 3 && entry.substr(0, 3) == "v1,") out.push_back(entry.substr(3));
    }
    return out;
  }

  std::vector<std::string> keys_;  // decoded: secret, then previousSecrets
  int64_t tolerance_ms_;
};

Result<std::unique_ptr<RequestAuth>> CreateStandardWebhooksAuth(StandardWebhooksAuthSettings s,
                                                                const std::string& path) {
  QB_RETURN_IF_ERROR(CheckSecrets(s.secret, s.previous_secrets, path));
  std::vector<std::string> keys;
  const std::vector<std::string> secrets = ActiveSecrets(s.secret, s.previous_secrets);
  for (size_t i = 0; i < secrets.size(); ++i) {
    std::optional<std::string> key = StandardWebhooksKey(secrets[i]);
    if (!key) {
      const std::string where =
          i == 0 ? ".secret" : ".previousSecrets[" + std::to_string(i - 1) + "]";
      return InvalidArgument(path + where + " must be whsec_ followed by base64");
    }
    keys.push_back(std::move(*key));
  }
  return std::unique_ptr<RequestAuth>(
      new StandardWebhooksAuth(std::move(keys), s.timestamp_tolerance_ms));
}

}  // namespace

const OptionTable<StandardWebhooksAuthSettings>& StandardWebhooksAuthOptions() {
  using S = StandardWebhooksAuthSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Secret("secret", &S::secret, "The endpoint's signing secret: whsec_<base64>").Required(),
      PreviousSecretsOption(&S::previous_secrets),
      opt::Millis("timestampTolerance", &S::timestamp_tolerance_ms, 300000,
                  "Largest accepted distance between webhook-timestamp and now, past or future")
          .Min(0),
  };
  return *table;
}

AuthScheme StandardWebhooksAuthScheme() {
  AuthScheme scheme = MakeAuthScheme<StandardWebhooksAuthSettings>(
      "standard-webhooks", StandardWebhooksAuthOptions(), &CreateStandardWebhooksAuth);
  scheme.admin = false;  // a provider signs webhooks, not admin calls
  return scheme;
}

}  // namespace queuebox
