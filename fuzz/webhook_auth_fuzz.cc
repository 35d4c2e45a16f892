// webhook_auth_fuzz: the auth of HTTP sources and admin routes (auth/request_auth.h) against
// fuzzed request headers and bodies, for each kind (bearer, api-key, hmac with BODY and
// TIMESTAMP_DOT_BODY payloads, github, shopify, standard-webhooks, stripe).
// Properties: Check never crashes (no overflow on any timestamp); a request carrying the right
// credential passes (signed with the active or a previous secret, a bad signature before the
// good one where the scheme takes a list, either Standard Webhooks header family); a signature
// not made with an active secret never passes; a refusal is one of the documented reasons, so it
// never quotes a credential or a signature.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "auth/request_auth.h"
#include "auth/webhook_signature.h"
#include "fuzz_util.h"
#include "queuebox/config.h"

using queuebox::fuzz::Require;

namespace {

constexpr char kSecret[] = "whsec-Zq7Secret0Value";
constexpr char kPrevious[] = "whsec-Prev1ousSecret9";
// Standard Webhooks secrets: whsec_ + base64 of the key.
constexpr char kSwSecret[] = "whsec_c3RhbmRhcmQgd2ViaG9va3MgZnV6eiBrZXkgMQ==";
constexpr char kSwPrevious[] = "whsec_c3RhbmRhcmQgd2ViaG9va3MgZnV6eiBrZXkgMg==";

constexpr const char* kHeaders[] = {
    "authorization",   "x-api-key",           "x-signature",
    "x-timestamp",     "x-hub-signature-256", "x-shopify-hmac-sha256",
    "webhook-id",      "webhook-timestamp",   "webhook-signature",
    "svix-id",         "svix-timestamp",      "svix-signature",
    "stripe-signature"};

// Every reason Check may give (auth/request_auth.h, auth/auth_schemes.h).
bool Documented(const std::string& m) {
  static const char* const kReasons[] = {"Missing Authorization header",
                                         "Invalid bearer token",
                                         "Missing X-API-Key header",
                                         "Invalid API key",
                                         "Missing X-Signature header",
                                         "Missing timestamp header",
                                         "Invalid timestamp format",
                                         "Request timestamp expired",
                                         "Request timestamp in the future",
                                         "Invalid signature",
                                         "Missing X-Hub-Signature-256 header",
                                         "Missing X-Shopify-Hmac-Sha256 header",
                                         "Missing webhook-signature header",
                                         "Missing webhook-id header",
                                         "Missing svix-id header",
                                         "Missing webhook-timestamp header",
                                         "Missing svix-timestamp header",
                                         "Invalid webhook-signature header",
                                         "Invalid svix-signature header",
                                         "Missing Stripe-Signature header",
                                         "Invalid Stripe-Signature header"};
  for (const char* r : kReasons) {
    if (m == r) return true;
  }
  return false;
}

// The headers a client holding the secret sends for scheme `which` (the index in auths).
void SignRequest(size_t which, bool previous, bool svix, int64_t now_ms, const std::string& body,
                 std::map<std::string, std::string>& headers) {
  const std::string secret = previous ? kPrevious : kSecret;
  const std::string ts_s = std::to_string(now_ms / 1000);
  switch (which) {
    case 0:
      headers["authorization"] = std::string("Bearer ") + kSecret;
      break;
    case 1:
      headers["x-api-key"] = kSecret;
      break;
    case 2:
      headers["x-signature"] = "sha256=" + queuebox::HmacHex("HmacSHA256", kSecret, body).value();
      break;
    case 3:
      headers["x-timestamp"] = std::to_string(now_ms);
      headers["x-signature"] =
          queuebox::HmacHex("HmacSHA512", kSecret, std::to_string(now_ms) + "." + body).value();
      break;
    case 4:
      headers["x-hub-signature-256"] =
          "sha256=" + queuebox::HmacHex("HmacSHA256", secret, body).value();
      break;
    case 5:
      headers["x-shopify-hmac-sha256"] =
          queuebox::Base64Encode(queuebox::HmacBytes("HmacSHA256", secret, body).value());
      break;
    case 6: {
      const std::string p = svix ? "svix-" : "webhook-";
      if (headers[p + "id"].empty()) headers[p + "id"] = "msg_fuzz";
      headers[p + "timestamp"] = ts_s;
      const std::string key =
          queuebox::StandardWebhooksKey(previous ? kSwPrevious : kSwSecret).value();
      // A bad entry (the fuzzed value, without spaces) before the good one.
      std::string bad = headers[p + "signature"];
      bad.erase(std::remove(bad.begin(), bad.end(), ' '), bad.end());
      headers[p + "signature"] =
          (bad.empty() ? "" : "v1," + bad + " ") +
          queuebox::StandardWebhooksSignature(key, headers[p + "id"], now_ms / 1000, body);
      if (svix) headers.erase("webhook-signature");
      break;
    }
    default: {
      const std::string mac = queuebox::HmacHex("HmacSHA256", secret, ts_s + "." + body).value();
      headers["stripe-signature"] = "t=" + ts_s + ",v1=00ff,v1=" + mac;
      break;
    }
  }
}

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string LowerText(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = Lower(c);
  return out;
}

std::unique_ptr<queuebox::RequestAuth> Make(const std::string& type, nlohmann::json options) {
  queuebox::AdminAuthConfig config;
  config.type = type;
  config.options = std::move(options);
  auto made = queuebox::RequestAuth::Create(config, "sources.fuzz.auth");
  Require(made.ok(), "the fuzz auth blocks are valid");
  return std::move(made).value();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto* auths = new std::unique_ptr<queuebox::RequestAuth>[] {
    Make("bearer", {{"token", kSecret}}), Make("api-key", {{"key", kSecret}}),
        Make("hmac", {{"secret", kSecret}}),
        Make("hmac", {{"secret", kSecret},
                      {"algorithm", "HmacSHA512"},
                      {"signaturePrefix", ""},
                      {"timestampHeader", "X-Timestamp"},
                      {"timestampTolerance", 300000}}),
        Make("github", {{"secret", kSecret}, {"previousSecrets", {kPrevious}}}),
        Make("shopify", {{"secret", kSecret}, {"previousSecrets", {kPrevious}}}),
        Make("standard-webhooks", {{"secret", kSwSecret}, {"previousSecrets", {kSwPrevious}}}),
        Make("stripe", {{"secret", kSecret}, {"previousSecrets", {kPrevious}}}),
  };
  FuzzedDataProvider in(data, size);
  const size_t which = in.ConsumeIntegralInRange<size_t>(0, 7);
  const int64_t now_ms = in.ConsumeIntegral<int64_t>();
  const bool sign = in.ConsumeBool();
  const bool previous = in.ConsumeBool();      // sign with the previous secret (rotation)
  const bool svix = in.ConsumeBool();          // Standard Webhooks under the svix-* names
  std::map<std::string, std::string> headers;  // lower-case names
  for (int i = in.ConsumeIntegralInRange(0, 4); i > 0; --i) {
    std::string name = LowerText(in.ConsumeRandomLengthString(24));
    headers[name] = in.ConsumeRandomLengthString(160);
  }
  // The usual headers, each with a fuzzed value.
  for (const char* name : kHeaders) {
    if (in.ConsumeBool()) headers[name] = in.ConsumeRandomLengthString(160);
  }
  std::string body = in.ConsumeRemainingBytesAsString();

  const queuebox::RequestAuth& auth = *auths[which];
  // A signing scheme's timestamp must be whole seconds since the epoch.
  const bool signable = sign && (which < 6 || now_ms >= 0);
  if (signable) SignRequest(which, previous, svix, now_ms, body, headers);
  queuebox::RequestAuth::HeaderLookup lookup = [&headers](std::string_view name) {
    auto it = headers.find(LowerText(name));
    return it == headers.end() ? std::string() : it->second;
  };
  queuebox::Status s = auth.Check(lookup, body, now_ms);
  if (signable) Require(s.ok(), "the right credential passes");
  if (!s.ok()) {
    Require(Documented(s.message()), "a refusal is a documented reason (it quotes nothing)");
    Require(s.code() == queuebox::StatusCode::kPermissionDenied, "a refusal is kPermissionDenied");
  }
  // A credential that is not the secret never passes.
  if (s.ok() && (which == 0 || which == 1)) {
    const std::string& v = headers[which == 0 ? "authorization" : "x-api-key"];
    Require(v.find(kSecret) != std::string::npos, "only the secret passes");
  }
  if (s.ok() && which >= 2) Require(signable, "only a signature by an active secret passes");
  return 0;
}
