// hmac_auth.cc: `type: hmac`, <headerName>: signaturePrefix + lowercase hex HMAC(secret, payload),
// payload = the raw body or "<timestamp>.<body>"; the timestamp header holds Unix milliseconds.
// `type: github` is its alias with GitHub's rules (X-Hub-Signature-256: sha256=<hex> of the body).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>

#include "auth/auth_schemes.h"

namespace queuebox {
namespace {

bool KnownAlgorithm(std::string_view algorithm) {
  const std::vector<std::string>& all = HmacAlgorithms();
  return std::find(all.begin(), all.end(), algorithm) != all.end();
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
      : s_(std::move(s)),
        secrets_(ActiveSecrets(s_.secret, s_.previous_secrets)),
        timestamp_dot_body_(timestamp_dot_body) {}

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
    // Each active secret (rotation: secret, then previousSecrets); every one is tried.
    bool match = false;
    for (const std::string& secret : secrets_) {
      auto mac = HmacHex(s_.algorithm, secret, payload);
      if (mac.ok() && ConstantTimeEquals(signature, s_.signature_prefix + *mac)) match = true;
    }
    if (!match) return PermissionDenied("Invalid signature");
    return Status::Ok();
  }
  std::vector<std::string> credential_headers() const override { return {s_.header_name}; }

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
  std::vector<std::string> secrets_;  // secret, then previousSecrets
  bool timestamp_dot_body_;
};

Result<std::unique_ptr<RequestAuth>> CreateHmacAuth(HmacAuthSettings s, const std::string& path) {
  QB_RETURN_IF_ERROR(CheckSecrets(s.secret, s.previous_secrets, path));
  if (!KnownAlgorithm(s.algorithm)) return UnknownAlgorithm(path);
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
  if (!KnownAlgorithm(algorithm)) return UnknownAlgorithm("admin.auth");
  QB_ASSIGN_OR_RETURN(std::string mac, HmacBytes(algorithm, secret, payload));
  return HexLower(mac);
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
      PreviousSecretsOption(&S::previous_secrets),
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

const OptionTable<GitHubAuthSettings>& GitHubAuthOptions() {
  using S = GitHubAuthSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Secret("secret", &S::secret, "The webhook's secret (UTF-8)").Required(),
      PreviousSecretsOption(&S::previous_secrets),
  };
  return *table;
}

AuthScheme GitHubAuthScheme() {
  AuthScheme scheme = MakeAuthScheme<GitHubAuthSettings>(
      "github", GitHubAuthOptions(),
      [](GitHubAuthSettings g, const std::string& path) -> Result<std::unique_ptr<RequestAuth>> {
        HmacAuthSettings s;
        s.secret = std::move(g.secret);
        s.previous_secrets = std::move(g.previous_secrets);
        s.header_name = "X-Hub-Signature-256";
        s.signature_prefix = "sha256=";
        s.signature_payload_format = "BODY";
        return CreateHmacAuth(std::move(s), path);
      });
  scheme.admin = false;  // a provider signs webhooks, not admin calls
  return scheme;
}

}  // namespace queuebox
