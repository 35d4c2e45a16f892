#include "admin/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cctype>
#include <charconv>
#include <cstdint>

#include "config/schema.h"

namespace queuebox {
namespace {

using nlohmann::json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
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
  std::string credential_header() const override { return "Authorization"; }

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
  std::string credential_header() const override { return header_; }

 private:
  std::string key_, header_;
};

class HmacAuth final : public RequestAuth {
 public:
  // `timestamp_dot_body`: the payload is "<timestamp>.<body>" rather than the body.
  HmacAuth(HmacAuthSettings s, bool timestamp_dot_body)
      : s_(std::move(s)), timestamp_dot_body_(timestamp_dot_body) {}

  Status Check(const HeaderLookup& header, std::string_view body, int64_t now_ms) const override {
    std::string signature = header(s_.header_name);
    if (signature.empty()) return Denied("Missing " + s_.header_name + " header");
    std::string timestamp;
    if (s_.timestamp_header) {
      timestamp = header(*s_.timestamp_header);
      if (timestamp.empty()) return Denied("Missing timestamp header");
      int64_t ts = 0;
      auto [p, ec] = std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), ts);
      if (ec != std::errc() || p != timestamp.data() + timestamp.size()) {
        return Denied("Invalid timestamp format");
      }
      // |now - ts| in unsigned arithmetic: int64 subtraction overflows near the range's ends.
      const uint64_t distance = now_ms >= ts
                                    ? static_cast<uint64_t>(now_ms) - static_cast<uint64_t>(ts)
                                    : static_cast<uint64_t>(ts) - static_cast<uint64_t>(now_ms);
      if (s_.timestamp_tolerance_ms < 0 ||
          distance > static_cast<uint64_t>(s_.timestamp_tolerance_ms)) {
        return Denied("Request timestamp expired");
      }
    }
    std::string payload =
        timestamp_dot_body_ ? timestamp + "." + std::string(body) : std::string(body);
    auto mac = HmacHex(s_.algorithm, s_.secret, payload);
    if (!mac.ok()) return Denied("Invalid signature");
    if (!ConstantTimeEquals(signature, s_.signature_prefix + *mac)) {
      return Denied("Invalid signature");
    }
    return Status::Ok();
  }
  std::string credential_header() const override { return s_.header_name; }

 private:
  HmacAuthSettings s_;
  bool timestamp_dot_body_;
};

// The digest of each name in cfg::HmacAlgorithms(); nullptr for another name.
const EVP_MD* Digest(std::string_view algorithm) {
  if (algorithm == "HmacSHA256") return EVP_sha256();
  if (algorithm == "HmacSHA1") return EVP_sha1();
  if (algorithm == "HmacSHA512") return EVP_sha512();
  return nullptr;
}

Status UnknownAlgorithm(const std::string& path) {
  std::string names;
  const std::vector<std::string>& all = cfg::HmacAlgorithms();
  for (size_t i = 0; i < all.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i];
  }
  return InvalidArgument(path + ".algorithm must be " + names);
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
  if (md == nullptr) return UnknownAlgorithm("admin.auth");
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

Result<std::unique_ptr<RequestAuth>> RequestAuth::Create(const AdminAuthConfig& config,
                                                         const std::string& path) {
  const json& o = config.options.is_object() ? config.options : json::object();
  const std::string type = Lower(config.type);
  // An empty credential would accept an empty header: refuse it.
  auto required = [&path](const std::string& value, const char* key) {
    return value.empty() ? InvalidArgument(path + "." + key + " is required") : Status::Ok();
  };
  if (type == "bearer") {
    BearerAuthSettings s;
    QB_RETURN_IF_ERROR(cfg::BearerAuthOptions().Bind(o, s, path));
    QB_RETURN_IF_ERROR(required(s.token, "token"));
    return std::unique_ptr<RequestAuth>(new BearerAuth(std::move(s.token)));
  }
  if (type == "api-key") {
    ApiKeyAuthSettings s;
    QB_RETURN_IF_ERROR(cfg::ApiKeyAuthOptions().Bind(o, s, path));
    QB_RETURN_IF_ERROR(required(s.key, "key"));
    return std::unique_ptr<RequestAuth>(new ApiKeyAuth(std::move(s.key), std::move(s.header_name)));
  }
  if (type == "hmac") {
    HmacAuthSettings s;
    QB_RETURN_IF_ERROR(cfg::HmacAuthOptions().Bind(o, s, path));
    QB_RETURN_IF_ERROR(required(s.secret, "secret"));
    if (Digest(s.algorithm) == nullptr) return UnknownAlgorithm(path);
    const std::string format = cfg::PayloadFormatOf(s);
    if (format.empty()) {
      return InvalidArgument(path + ".signaturePayloadFormat must be BODY or TIMESTAMP_DOT_BODY");
    }
    if (format == "TIMESTAMP_DOT_BODY" && !s.timestamp_header) {
      return InvalidArgument(path + ".signaturePayloadFormat TIMESTAMP_DOT_BODY needs " + path +
                             ".timestampHeader");
    }
    return std::unique_ptr<RequestAuth>(new HmacAuth(std::move(s), format == "TIMESTAMP_DOT_BODY"));
  }
  return InvalidArgument(path + ".type must be bearer, api-key or hmac (got '" + config.type +
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
