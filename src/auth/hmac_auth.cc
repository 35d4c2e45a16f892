// hmac_auth.cc: `type: hmac`, <headerName>: signaturePrefix + lowercase hex HMAC(secret, payload),
// payload = the raw body or "<timestamp>.<body>"; the timestamp header holds Unix milliseconds.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cctype>
#include <charconv>
#include <cstdint>

#include "auth/auth_schemes.h"

namespace queuebox {
namespace {

// The digest of each name in HmacAlgorithms(); nullptr for another name.
const EVP_MD* Digest(std::string_view algorithm) {
  if (algorithm == "HmacSHA256") return EVP_sha256();
  if (algorithm == "HmacSHA1") return EVP_sha1();
  if (algorithm == "HmacSHA512") return EVP_sha512();
  return nullptr;
}

Status UnknownAlgorithm(const std::string& path) {
  std::string names;
  const std::vector<std::string>& all = HmacAlgorithms();
  for (size_t i = 0; i < all.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == all.size() ? " or " : ", ") + all[i];
  }
  return InvalidArgument(path + ".algorithm must be " + names);
}

class HmacAuth final : public RequestAuth {
 public:
  // `timestamp_dot_body`: the payload is "<timestamp>.<body>" rather than the body.
  HmacAuth(HmacAuthSettings s, bool timestamp_dot_body)
      : s_(std::move(s)), timestamp_dot_body_(timestamp_dot_body) {}

  Status Check(const HeaderLookup& header, std::string_view body, int64_t now_ms) const override {
    std::string signature = header(s_.header_name);
    if (signature.empty()) return PermissionDenied("Missing " + s_.header_name + " header");
    std::string timestamp;
    if (s_.timestamp_header) {
      timestamp = header(*s_.timestamp_header);
      if (Status fresh = CheckTimestamp(timestamp, now_ms); !fresh.ok()) return fresh;
    }
    std::string payload =
        timestamp_dot_body_ ? timestamp + "." + std::string(body) : std::string(body);
    auto mac = HmacHex(s_.algorithm, s_.secret, payload);
    if (!mac.ok()) return PermissionDenied("Invalid signature");
    if (!ConstantTimeEquals(signature, s_.signature_prefix + *mac)) {
      return PermissionDenied("Invalid signature");
    }
    return Status::Ok();
  }
  std::string credential_header() const override { return s_.header_name; }

 private:
  Status CheckTimestamp(const std::string& timestamp, int64_t now_ms) const {
    if (timestamp.empty()) return PermissionDenied("Missing timestamp header");
    int64_t ts = 0;
    auto [p, ec] = std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), ts);
    if (ec != std::errc() || p != timestamp.data() + timestamp.size()) {
      return PermissionDenied("Invalid timestamp format");
    }
    // |now - ts| in unsigned arithmetic: int64 subtraction overflows near the range's ends.
    const uint64_t distance = now_ms >= ts
                                  ? static_cast<uint64_t>(now_ms) - static_cast<uint64_t>(ts)
                                  : static_cast<uint64_t>(ts) - static_cast<uint64_t>(now_ms);
    if (s_.timestamp_tolerance_ms < 0 ||
        distance > static_cast<uint64_t>(s_.timestamp_tolerance_ms)) {
      return PermissionDenied("Request timestamp expired");
    }
    return Status::Ok();
  }

  HmacAuthSettings s_;
  bool timestamp_dot_body_;
};

Result<std::unique_ptr<RequestAuth>> CreateHmacAuth(HmacAuthSettings s, const std::string& path) {
  if (s.secret.empty()) return InvalidArgument(path + ".secret is required");
  if (Digest(s.algorithm) == nullptr) return UnknownAlgorithm(path);
  const std::string format = PayloadFormatOf(s);
  if (format.empty()) {
    return InvalidArgument(path + ".signaturePayloadFormat must be BODY or TIMESTAMP_DOT_BODY");
  }
  if (format == "TIMESTAMP_DOT_BODY" && !s.timestamp_header) {
    return InvalidArgument(path + ".signaturePayloadFormat TIMESTAMP_DOT_BODY needs " + path +
                           ".timestampHeader");
  }
  return std::unique_ptr<RequestAuth>(new HmacAuth(std::move(s), format == "TIMESTAMP_DOT_BODY"));
}

}  // namespace

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

const std::vector<std::string>& HmacAlgorithms() {
  static const std::vector<std::string>* const names =
      new std::vector<std::string>{"HmacSHA256", "HmacSHA1", "HmacSHA512"};
  return *names;
}

const OptionTable<HmacAuthSettings>& HmacAuthOptions() {
  using S = HmacAuthSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Secret("secret", &S::secret, "HMAC key (UTF-8)").Required(),
      opt::Text("headerName", &S::header_name, "X-Signature", "Header carrying the signature"),
      opt::Choice("algorithm", &S::algorithm, HmacAlgorithms(), "HmacSHA256", "HMAC hash"),
      opt::Text("signaturePrefix", &S::signature_prefix,
                "sha256=", "Text before the lowercase hex signature; may be empty"),
      opt::Text("timestampHeader", &S::timestamp_header, nullptr,
                "Header with the request time in Unix milliseconds; checked when set"),
      opt::Millis("timestampTolerance", &S::timestamp_tolerance_ms, 300000,
                  "Largest accepted distance between the timestamp and now")
          .Min(0),
      opt::Choice("signaturePayloadFormat", &S::signature_payload_format,
                  {"BODY", "TIMESTAMP_DOT_BODY", "body", "timestamp-dot-body"}, nullptr,
                  "What is signed: the body, or `<timestamp>.<body>`. Default TIMESTAMP_DOT_BODY "
                  "when timestampHeader is set, else BODY"),
  };
  return *table;
}

std::string PayloadFormatOf(const HmacAuthSettings& hmac) {
  std::string format =
      hmac.signature_payload_format.value_or(hmac.timestamp_header ? "TIMESTAMP_DOT_BODY" : "BODY");
  for (char& c : format)
    c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return format == "BODY" || format == "TIMESTAMP_DOT_BODY" ? format : "";
}

AuthScheme HmacAuthScheme() {
  AuthScheme scheme = MakeAuthScheme<HmacAuthSettings>("hmac", HmacAuthOptions(), &CreateHmacAuth);
  scheme.validate = [](const nlohmann::json& block) {
    std::vector<std::string> problems;
    std::string format = block.value("signaturePayloadFormat", std::string());
    if ((format == "TIMESTAMP_DOT_BODY" || format == "timestamp-dot-body") &&
        !block.contains("timestampHeader")) {
      problems.push_back("signaturePayloadFormat: " + format +
                         " needs timestampHeader; set timestampHeader or use BODY");
    }
    return problems;
  };
  // One spelling for consumers and the printout: BODY or TIMESTAMP_DOT_BODY.
  scheme.complete = [](nlohmann::json& block) {
    HmacAuthSettings settings;
    HmacAuthOptions().Assign(block, settings);
    block["signaturePayloadFormat"] = PayloadFormatOf(settings);
  };
  return scheme;
}

}  // namespace queuebox
