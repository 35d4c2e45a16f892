// auth_schemes.h: the one list of request auth schemes (admin.auth and sources.<name>.auth;
// QueueBox reference §11.1). Each scheme brings its settings, its option table (validated by
// src/config, which offers the schemes as the variants of both blocks) and the factory of its
// check, as a destination type does (destinations/registry.h):
//   bearer   Authorization: Bearer <token> (scheme any case)
//   api-key  <headerName>: <key>
//   hmac     <headerName>: signaturePrefix + lowercase hex HMAC(secret, payload), payload = the
//            raw body or "<timestamp>.<body>"; the timestamp header holds Unix milliseconds and
//            |now - ts| <= timestampTolerance (milliseconds).
//   github   X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)> (hmac with GitHub's rules)
//   shopify  X-Shopify-Hmac-Sha256: base64 HMAC-SHA256(secret, body)
//   standard-webhooks  webhook-id, webhook-timestamp (Unix s), webhook-signature: one or more
//            space-separated `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>` (or the
//            svix-* names); secret `whsec_<base64 key>`; |now - ts| <= timestampTolerance
//   stripe   Stripe-Signature: t=<Unix s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>[,v1=...];
//            |now - t| <= timestampTolerance
// Every signing scheme takes previousSecrets (rotation): a signature by any active secret passes.
// The provider's message id (webhook-id; Stripe's event id) is the idempotency key of a source
// that configures none (RequestAuth::message_id_source).
// The request clock (`now_ms`, the app's clock) checks the timestamps: the check runs before the
// intake, which has no database time then, and a round trip per request for it would cost more
// than the intake (docs/inbox.md).
// A new scheme is a file beside bearer_auth.cc and one line in auth_schemes.cc.
//
// Thread-safety: the list and the tables are built once and immutable.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/request_auth.h"
#include "queuebox/options.h"

namespace queuebox {

struct BearerAuthSettings {
  std::string token;  // secret: `Authorization: Bearer <token>`
};

struct ApiKeyAuthSettings {
  std::string key;  // secret
  std::string header_name = "X-API-Key";
};

struct HmacAuthSettings {
  std::string secret;
  std::string header_name = "X-Signature";
  std::string algorithm = "HmacSHA256";  // HmacSHA256 | HmacSHA1 | HmacSHA512
  std::string signature_prefix = "sha256=";
  std::optional<std::string> timestamp_header;  // request time in Unix ms; checked when set
  int64_t timestamp_tolerance_ms = 300000;      // largest |now - timestamp|
  // BODY | TIMESTAMP_DOT_BODY (any case, - or _); unset: TIMESTAMP_DOT_BODY with
  // timestamp_header, else BODY.
  std::optional<std::string> signature_payload_format;
  std::vector<std::string> previous_secrets;  // still accepted (rotation)
};

struct GitHubAuthSettings {
  std::string secret;
  std::vector<std::string> previous_secrets;
};

struct ShopifyAuthSettings {
  std::string secret;
  std::vector<std::string> previous_secrets;
};

struct StandardWebhooksAuthSettings {
  std::string secret;  // whsec_<base64>
  std::vector<std::string> previous_secrets;
  int64_t timestamp_tolerance_ms = 300000;  // past and future
};

struct StripeAuthSettings {
  std::string secret;  // whsec_..., used as given (UTF-8)
  std::vector<std::string> previous_secrets;
  int64_t timestamp_tolerance_ms = 300000;  // past and future
};

struct AuthScheme {
  std::string type;                 // "bearer", "api-key", "hmac", ...
  std::vector<OptionSpec> options;  // keys of the block besides `type`
  bool admin = true;                // offered to admin.auth too (else sources.<name>.auth only)
  BlockValidator validate;          // cross-key checks; may be empty
  // Fills values that depend on other keys, after validation passed; may be empty.
  std::function<void(nlohmann::json& block)> complete;
  // Each option's value in a default-constructed settings struct, by key (the defaults test).
  nlohmann::json settings_defaults = nlohmann::json::object();
  // Binds a validated block (without `type`) and builds the check; kInvalidArgument naming
  // `path`.<key>.
  std::function<Result<std::unique_ptr<RequestAuth>>(const nlohmann::json& options,
                                                     const std::string& path)>
      create;
};

// A scheme whose options bind into `Settings`: the factory receives the settings with every
// option of the block set, and `path` for its messages.
template <typename Settings>
AuthScheme MakeAuthScheme(
    std::string type, const OptionTable<Settings>& options,
    std::function<Result<std::unique_ptr<RequestAuth>>(Settings, const std::string& path)> create) {
  AuthScheme s;
  s.type = std::move(type);
  s.options = options.specs();
  s.settings_defaults = options.StructDefaults();
  s.create = [options, create = std::move(create)](
                 const nlohmann::json& block,
                 const std::string& path) -> Result<std::unique_ptr<RequestAuth>> {
    Settings settings;
    QB_RETURN_IF_ERROR(options.Bind(block, settings, path));
    return create(std::move(settings), path);
  };
  return s;
}

// The schemes, in the order messages name them (bearer, api-key, hmac, github, shopify,
// standard-webhooks, stripe).
const std::vector<AuthScheme>& BuiltinAuthSchemes();
// nullptr when unknown (`type` exactly as listed).
const AuthScheme* FindAuthScheme(std::string_view type);
// The variants of admin.auth, sorted by type: api-key, bearer, hmac (the provider schemes sign
// webhooks, not admin calls).
const std::vector<BlockVariant>& AuthVariants();
// The variants of sources.<name>.auth: every scheme, sorted by type.
const std::vector<BlockVariant>& SourceAuthVariants();

// The option tables of the schemes.
const OptionTable<BearerAuthSettings>& BearerAuthOptions();
const OptionTable<ApiKeyAuthSettings>& ApiKeyAuthOptions();
const OptionTable<HmacAuthSettings>& HmacAuthOptions();
const OptionTable<GitHubAuthSettings>& GitHubAuthOptions();
const OptionTable<ShopifyAuthSettings>& ShopifyAuthOptions();
const OptionTable<StandardWebhooksAuthSettings>& StandardWebhooksAuthOptions();
const OptionTable<StripeAuthSettings>& StripeAuthOptions();
// The values of hmac `algorithm`: HmacSHA256 (default), HmacSHA1, HmacSHA512.
const std::vector<std::string>& HmacAlgorithms();
// What an hmac block signs: "BODY" or "TIMESTAMP_DOT_BODY" (signaturePayloadFormat in any case,
// with - or _; unset: TIMESTAMP_DOT_BODY when timestampHeader is set, else BODY). "" for another
// value.
std::string PayloadFormatOf(const HmacAuthSettings& hmac);

// The schemes' factories (one file each; github beside hmac).
AuthScheme BearerAuthScheme();
AuthScheme ApiKeyAuthScheme();
AuthScheme HmacAuthScheme();
AuthScheme GitHubAuthScheme();
AuthScheme ShopifyAuthScheme();
AuthScheme StandardWebhooksAuthScheme();
AuthScheme StripeAuthScheme();

// Shared by the signing schemes.
// The `previousSecrets` row: secrets still accepted while a rotation is under way.
template <typename S>
Option<S> PreviousSecretsOption(std::vector<std::string> S::*member) {
  return opt::TextList("previousSecrets", member, nlohmann::json::array(),
                       "Secrets still accepted beside secret while it is rotated (masked)");
}
// `secret` then `previous`: the secrets a signature may be made with.
std::vector<std::string> ActiveSecrets(const std::string& secret,
                                       const std::vector<std::string>& previous);
// kInvalidArgument naming `path`.secret or `path`.previousSecrets when one is empty.
Status CheckSecrets(const std::string& secret, const std::vector<std::string>& previous,
                    const std::string& path);
// A provider timestamp in whole Unix seconds, checked against now: OK with `*seconds` set, or
// kPermissionDenied "Missing <header> header", "Invalid timestamp format", "Request timestamp
// expired" (older than tolerance) or "Request timestamp in the future" (newer than tolerance).
Status CheckUnixSeconds(std::string_view text, std::string_view header, int64_t now_ms,
                        int64_t tolerance_ms, int64_t* seconds);

}  // namespace queuebox
