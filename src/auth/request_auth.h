// request_auth.h: authentication of an inbound HTTP request, for the admin routes and the HTTP
// sources (admin.auth, sources.<name>.auth; QueueBox reference §11.1, §13.2). A block names its
// scheme by `type`; each scheme (bearer, api-key, hmac) declares its keys and builds its check in
// auth/auth_schemes.h. Every comparison of a credential is constant-time (OpenSSL
// CRYPTO_memcmp). A failure reason names the check and never a credential ("Missing
// Authorization header", "Invalid bearer token", "Missing X-API-Key header", "Invalid API key",
// "Missing timestamp header", "Invalid timestamp format", "Request timestamp expired", "Invalid
// signature").
//
// Thread-safety: immutable after Create; Check may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "auth/webhook_signature.h"
#include "queuebox/config.h"
#include "queuebox/status.h"

namespace queuebox {

class RequestAuth {
 public:
  // Reads a header of the request (case-insensitive name); "" when absent.
  using HeaderLookup = std::function<std::string(std::string_view name)>;

  // Binds `config.options` through the scheme's option table (auth/auth_schemes.h).
  // kInvalidArgument naming the key under `path` (admin.auth, sources.<name>.auth) that is
  // missing, empty (a credential) or invalid, or `path`.type for a scheme that does not exist.
  static Result<std::unique_ptr<RequestAuth>> Create(const AdminAuthConfig& config,
                                                     const std::string& path = "admin.auth");
  virtual ~RequestAuth() = default;

  // OK, or kPermissionDenied with the reason for the 401 body. `body`: the raw bytes as
  // received. `now_ms`: Unix ms (the app clock; injectable for tests).
  virtual Status Check(const HeaderLookup& header, std::string_view body, int64_t now_ms) const = 0;

  // The headers that carry the credential (Authorization, the api-key/hmac headerName, a
  // provider's signature headers): never stored with an inbox row.
  virtual std::vector<std::string> credential_headers() const = 0;

  // Where the provider puts its message id, the idempotency key of a source that configures none
  // (Standard Webhooks: the webhook-id header; Stripe: the event id, $.id of the body). Empty
  // for the schemes without one.
  struct MessageIdSource {
    std::vector<std::string> headers;  // the first present one wins
    std::string json_path;             // a definite JSONPath of the body; "" for none
  };
  virtual MessageIdSource message_id_source() const { return {}; }
};

// Lowercase hex HMAC of `payload`; algorithm one of HmacAlgorithms() (HmacSHA256, HmacSHA1,
// HmacSHA512). kInvalidArgument for another algorithm. (HMAC, base64 and ConstantTimeEquals:
// auth/webhook_signature.h.)
Result<std::string> HmacHex(std::string_view algorithm, std::string_view secret,
                            std::string_view payload);

}  // namespace queuebox
