// webhook_signature.h: the primitives of webhook signatures, shared by the source auth schemes
// (auth/auth_schemes.h) and anything that signs deliveries: HMAC, hex and base64, constant-time
// comparison, and the Standard Webhooks secret and signature
// (https://www.standardwebhooks.com: `whsec_<base64 key>`, `v1,<base64 HMAC-SHA256 of
// "<id>.<timestamp>.<body>">`).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "queuebox/status.h"

namespace queuebox {

// Raw HMAC of `payload` under `key`; algorithm one of HmacAlgorithms() (HmacSHA256, HmacSHA1,
// HmacSHA512). kInvalidArgument for another algorithm.
Result<std::string> HmacBytes(std::string_view algorithm, std::string_view key,
                              std::string_view payload);

// Lowercase hex of `bytes`.
std::string HexLower(std::string_view bytes);

// Standard base64 (RFC 4648 §4) with padding.
std::string Base64Encode(std::string_view bytes);
// The bytes of standard base64 text (padding optional); nullopt for any other character or a
// length no encoding has.
std::optional<std::string> Base64Decode(std::string_view text);

// Constant-time equality (length leaks, content does not).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// The HMAC key of a Standard Webhooks secret: `whsec_` (optional, as the reference libraries
// read it) then base64. nullopt when the rest is not base64 or decodes to nothing.
std::optional<std::string> StandardWebhooksKey(std::string_view secret);

// "v1,<base64 HMAC-SHA256(key, "<id>.<timestamp_s>.<body>")>": one entry of webhook-signature.
std::string StandardWebhooksSignature(std::string_view key, std::string_view id,
                                      int64_t timestamp_s, std::string_view body);

}  // namespace queuebox
