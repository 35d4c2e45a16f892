#include "admin/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cctype>
#include <charconv>
#include <cstdlib>

namespace queuebox {
namespace {

using nlohmann::json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A string option, or `fallback` when absent. kInvalidArgument when present and not a string.
Result<std::string> StringOption(const json& o, const char* key, std::string fallback) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return fallback;
  if (!it->is_string())
    return InvalidArgument(std::string("admin.auth.") + key + " must be a string");
  return it->get<std::string>();
}

Result<std::string> RequiredString(const json& o, const char* key) {
  QB_ASSIGN_OR_RETURN(std::string v, StringOption(o, key, ""));
  if (v.empty()) return InvalidArgument(std::string("admin.auth.") + key + " is required");
  return v;
}

// Milliseconds from a number (ms) or a duration text "<n>ms|s|m|h|d".
Result<int64_t> DurationMs(const json& o, const char* key, int64_t fallback) {
  if (!o.contains(key)) return fallback;
  const json& v = o.at(key);
  if (v.is_null()) return fallback;
  auto bad = InvalidArgument(std::string("admin.auth.") + key +
                             " must be milliseconds or a duration such as 5m");
  int64_t n = 0;
  if (v.is_number_integer()) {
    v.get_to(n);
    return n;
  }
  std::string s;
  if (!v.is_string()) return bad;
  v.get_to(s);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || n < 0) return bad;
  std::string_view unit(p, static_cast<size_t>(s.data() + s.size() - p));
  if (unit.empty() || unit == "ms") return n;
  if (unit == "s") return n * 1000;
  if (unit == "m") return n * 60000;
  if (unit == "h") return n * 3600000;
  if (unit == "d") return n * 86400000;
  return bad;
}

Status Denied(std::string reason) { return PermissionDenied(std::move(reason)); }

class BearerAuth final : public RequestAuth {
 public:
  explicit BearerAuth(std::string token) : token_(std::move(token)) {}
  Status Check(const HeaderLookup& header, std::string_view, int64_t) const override {
    std::string v = header("Authorization");
    if (v.empty()) return Denied("Missing Authorization header");
    if (v.size() < 7 || Lower(v.substr(0, 7)) != "bearer ") return Denied("Invalid bearer token");
    std::string_view presented = std::string_view(v).substr(7);
    while (!presented.empty() && presented.front() == ' ') presented.remove_prefix(1);
    if (!ConstantTimeEquals(presented, token_)) return Denied("Invalid bearer token");
    return Status::Ok();
  }

 private:
  std::string token_;
};

class ApiKeyAuth final : public RequestAuth {
 public:
  ApiKeyAuth(std::string key, std::string header)
      : key_(std::move(key)), header_(std::move(header)) {}
  Status Check(const HeaderLookup& header, std::string_view, int64_t) const override {
    std::string v = header(header_);
    if (v.empty()) return Denied("Missing " + header_ + " header");
    if (!ConstantTimeEquals(v, key_)) return Denied("Invalid API key");
    return Status::Ok();
  }

 private:
  std::string key_, header_;
};

class HmacAuth final : public RequestAuth {
 public:
  struct Options {
    std::string secret, header, algorithm, prefix, timestamp_header;
    int64_t tolerance_ms = 300000;
    bool timestamp_dot_body = false;
  };
  explicit HmacAuth(Options o) : o_(std::move(o)) {}

  Status Check(const HeaderLookup& header, std::string_view body, int64_t now_ms) const override {
    std::string signature = header(o_.header);
    if (signature.empty()) return Denied("Missing " + o_.header + " header");
    std::string timestamp;
    if (!o_.timestamp_header.empty()) {
      timestamp = header(o_.timestamp_header);
      if (timestamp.empty()) return Denied("Missing timestamp header");
      int64_t ts = 0;
      auto [p, ec] = std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), ts);
      if (ec != std::errc() || p != timestamp.data() + timestamp.size()) {
        return Denied("Invalid timestamp format");
      }
      if (std::llabs(now_ms - ts) > o_.tolerance_ms) return Denied("Request timestamp expired");
    }
    std::string payload =
        o_.timestamp_dot_body ? timestamp + "." + std::string(body) : std::string(body);
    auto mac = HmacHex(o_.algorithm, o_.secret, payload);
    if (!mac.ok()) return Denied("Invalid signature");
    if (!ConstantTimeEquals(signature, o_.prefix + *mac)) return Denied("Invalid signature");
    return Status::Ok();
  }

 private:
  Options o_;
};

const EVP_MD* Digest(std::string_view algorithm) {
  if (algorithm == "HmacSHA256") return EVP_sha256();
  if (algorithm == "HmacSHA1") return EVP_sha1();
  if (algorithm == "HmacSHA512") return EVP_sha512();
  return nullptr;
}

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<std::string> HmacHex(std::string_view algorithm, std::string_view secret,
                            std::string_view payload) {
  const EVP_MD* md = Digest(algorithm);
  if (md == nullptr) {
    return InvalidArgument("admin.auth.algorithm must be HmacSHA256, HmacSHA1 or HmacSHA512");
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(md, secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), out,
           &len) == nullptr) {
    return Internal("HMAC failed");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[out[i] >> 4]);
    hex.push_back(kHex[out[i] & 0xf]);
  }
  return hex;
}

Result<std::unique_ptr<RequestAuth>> RequestAuth::Create(const AdminAuthConfig& config) {
  const json& o = config.options.is_object() ? config.options : json::object();
  std::string type = Lower(config.type);
  if (type == "bearer") {
    QB_ASSIGN_OR_RETURN(std::string token, RequiredString(o, "token"));
    return std::unique_ptr<RequestAuth>(new BearerAuth(std::move(token)));
  }
  if (type == "api-key") {
    QB_ASSIGN_OR_RETURN(std::string key, RequiredString(o, "key"));
    QB_ASSIGN_OR_RETURN(std::string header, StringOption(o, "headerName", "X-API-Key"));
    return std::unique_ptr<RequestAuth>(new ApiKeyAuth(std::move(key), std::move(header)));
  }
  if (type == "hmac") {
    HmacAuth::Options h;
    QB_ASSIGN_OR_RETURN(h.secret, RequiredString(o, "secret"));
    QB_ASSIGN_OR_RETURN(h.header, StringOption(o, "headerName", "X-Signature"));
    QB_ASSIGN_OR_RETURN(h.algorithm, StringOption(o, "algorithm", "HmacSHA256"));
    if (Digest(h.algorithm) == nullptr) {
      return InvalidArgument("admin.auth.algorithm must be HmacSHA256, HmacSHA1 or HmacSHA512");
    }
    QB_ASSIGN_OR_RETURN(h.prefix, StringOption(o, "signaturePrefix", "sha256="));
    QB_ASSIGN_OR_RETURN(h.timestamp_header, StringOption(o, "timestampHeader", ""));
    QB_ASSIGN_OR_RETURN(h.tolerance_ms, DurationMs(o, "timestampTolerance", 300000));
    QB_ASSIGN_OR_RETURN(std::string format,
                        StringOption(o, "signaturePayloadFormat",
                                     h.timestamp_header.empty() ? "BODY" : "TIMESTAMP_DOT_BODY"));
    std::string f = Lower(format);
    if (f == "body") {
      h.timestamp_dot_body = false;
    } else if (f == "timestamp_dot_body" || f == "timestamp-dot-body") {
      if (h.timestamp_header.empty()) {
        return InvalidArgument(
            "admin.auth.signaturePayloadFormat TIMESTAMP_DOT_BODY needs "
            "admin.auth.timestampHeader");
      }
      h.timestamp_dot_body = true;
    } else {
      return InvalidArgument(
          "admin.auth.signaturePayloadFormat must be BODY or TIMESTAMP_DOT_BODY");
    }
    return std::unique_ptr<RequestAuth>(new HmacAuth(std::move(h)));
  }
  return InvalidArgument("admin.auth.type must be bearer, api-key or hmac (got '" + config.type +
                         "')");
}

Status RequireAdminAuth(const AdminConfig& admin) {
  if (admin.enabled && !admin.auth && !admin.insecure) {
    return FailedPrecondition(
        "The admin routes are enabled with no authentication. Set 'admin.auth' to a bearer "
        "token, an API key, or an HMAC signature. Set 'admin.insecure' to true only for a local "
        "test, or set 'admin.enabled' to false.");
  }
  return Status::Ok();
}

}  // namespace queuebox
