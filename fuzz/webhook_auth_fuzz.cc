// webhook_auth_fuzz: the auth of HTTP sources and admin routes (admin/auth.h) against fuzzed
// request headers and bodies, for each kind (bearer, api-key, hmac with BODY and
// TIMESTAMP_DOT_BODY payloads).
// Properties: Check never crashes (no overflow on any timestamp); a request carrying the right
// credential passes and one carrying a different credential fails; a refusal never quotes the
// credential.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "auth/request_auth.h"
#include "fuzz_util.h"
#include "queuebox/config.h"

using queuebox::fuzz::Require;

namespace {

constexpr char kSecret[] = "whsec-Zq7Secret0Value";

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
  };
  FuzzedDataProvider in(data, size);
  const size_t which = in.ConsumeIntegralInRange<size_t>(0, 3);
  const int64_t now_ms = in.ConsumeIntegral<int64_t>();
  const bool sign = in.ConsumeBool();
  std::map<std::string, std::string> headers;  // lower-case names
  for (int i = in.ConsumeIntegralInRange(0, 4); i > 0; --i) {
    std::string name = LowerText(in.ConsumeRandomLengthString(24));
    headers[name] = in.ConsumeRandomLengthString(160);
  }
  // The usual headers, each with a fuzzed value.
  for (const char* name : {"authorization", "x-api-key", "x-signature", "x-timestamp"}) {
    if (in.ConsumeBool()) headers[name] = in.ConsumeRandomLengthString(160);
  }
  std::string body = in.ConsumeRemainingBytesAsString();

  const queuebox::RequestAuth& auth = *auths[which];
  if (sign) {  // the right credential, as a client that holds the secret sends it
    if (which == 0) headers["authorization"] = std::string("Bearer ") + kSecret;
    if (which == 1) headers["x-api-key"] = kSecret;
    if (which == 2) {
      headers["x-signature"] = "sha256=" + queuebox::HmacHex("HmacSHA256", kSecret, body).value();
    }
    if (which == 3) {
      headers["x-timestamp"] = std::to_string(now_ms);
      headers["x-signature"] =
          queuebox::HmacHex("HmacSHA512", kSecret, std::to_string(now_ms) + "." + body).value();
    }
  }
  queuebox::RequestAuth::HeaderLookup lookup = [&headers](std::string_view name) {
    auto it = headers.find(LowerText(name));
    return it == headers.end() ? std::string() : it->second;
  };
  queuebox::Status s = auth.Check(lookup, body, now_ms);
  if (sign) Require(s.ok(), "the right credential passes");
  if (!s.ok()) {
    Require(s.message().find(kSecret) == std::string::npos, "a refusal never quotes the secret");
    Require(s.code() == queuebox::StatusCode::kPermissionDenied, "a refusal is kPermissionDenied");
  }
  // A credential that is not the secret never passes.
  if (s.ok() && (which == 0 || which == 1)) {
    const std::string& v = headers[which == 0 ? "authorization" : "x-api-key"];
    Require(v.find(kSecret) != std::string::npos, "only the secret passes");
  }
  return 0;
}
