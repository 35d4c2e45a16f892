// http_signing.h: the `signing` block of an http destination: each request is signed when it is
// sent (per attempt), over the exact body bytes that go out.
//
//   signing: {type: standard-webhooks, secret: whsec_<base64>, previousSecrets: [whsec_...]}
//     Standard Webhooks (as Svix signs): `webhook-id` = the outbox message id (the same on every
//     retry, so a receiver can deduplicate), `webhook-timestamp` = the send time in Unix seconds,
//     `webhook-signature` = "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>", one space-separated
//     signature per active secret (secret first, then previousSecrets) during a rotation. The key
//     is the base64 after "whsec_" (24 to 64 bytes).
//   signing: {type: hmac, secret, headerName?, prefix?, algorithm?, encoding?, timestampHeader?}
//     <headerName>: <prefix><HMAC(secret, body)> in hex or base64 (defaults: GitHub's
//     X-Hub-Signature-256: sha256=<hex>). With timestampHeader, that header carries the send time
//     in Unix seconds and the signed text is "<timestamp>.<body>".
// The signing headers go last and replace a row header of the same name.
// Secrets are never in a message: errors name the key, never its value.
//
// Thread-safety: Sign may be called from any thread at once.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "queuebox/options.h"
#include "queuebox/status.h"

namespace queuebox {

// destinations.<name>.signing: `type` and the validated keys of that type.
struct DestinationSigningConfig {
  std::string type;  // standard-webhooks | hmac
  nlohmann::json options = nlohmann::json::object();
};

struct StandardWebhooksSigningSettings {
  std::string secret;                         // whsec_<base64>
  std::vector<std::string> previous_secrets;  // still signed with during a rotation
};

struct HmacSigningSettings {
  std::string secret;
  std::string header_name = "X-Hub-Signature-256";
  std::string prefix = "sha256=";
  std::string algorithm = "sha256";  // sha256 | sha512
  std::string encoding = "hex";      // hex | base64
  std::optional<std::string> timestamp_header;
};

const OptionTable<StandardWebhooksSigningSettings>& StandardWebhooksSigningOptions();
const OptionTable<HmacSigningSettings>& HmacSigningOptions();
// The two types as variants of the http table's `signing` row, with their checks.
std::vector<BlockVariant> HttpSigningVariants();

// The key of a Standard Webhooks secret: the bytes of the base64 after an optional "whsec_".
// kInvalidArgument (without the value) unless it decodes to 24 to 64 bytes.
Result<std::string> StandardWebhooksSigningKey(std::string_view secret);

class HttpSigner {
 public:
  // `config` is a validated signing block; `path` ("destinations.<name>.signing") prefixes
  // errors. kInvalidArgument for a block that does not bind or a secret that does not decode.
  static Result<std::unique_ptr<HttpSigner>> Create(const DestinationSigningConfig& config,
                                                    const std::string& path);
  ~HttpSigner();

  // The headers ({name, value}) of a request of message `id` with `body`, sent at `unix_s`.
  // kInternal when the HMAC fails (never with a secret).
  Result<std::vector<std::pair<std::string, std::string>>> Sign(std::string_view id,
                                                                std::string_view body,
                                                                int64_t unix_s) const;
  // The lower-case names of the headers Sign returns (a row header of one of them is dropped).
  const std::vector<std::string>& header_names() const { return lower_names_; }

 private:
  struct Key;  // one secret's prepared HMAC
  HttpSigner() = default;

  bool standard_ = false;
  HmacSigningSettings hmac_;
  std::vector<std::unique_ptr<Key>> keys_;
  std::vector<std::string> lower_names_;
};

}  // namespace queuebox
