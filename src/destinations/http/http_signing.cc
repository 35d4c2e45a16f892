// http_signing.cc: option tables of the signing types and the per-request signatures (OpenSSL's
// EVP_MAC: each secret's HMAC is keyed once, and each signature starts from a copy of it).
#include "destinations/http/http_signing.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <cctype>

namespace queuebox {
namespace {

constexpr std::string_view kSigningWhsec = "whsec_";

std::string SigningLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Base64Encode(const unsigned char* data, size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  int len =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(len < 0 ? 0 : static_cast<size_t>(len));
  return out;
}

// Standard base64 with padding; nullopt when it does not decode.
std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  int len = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(text.data()),
                            static_cast<int>(text.size()));
  if (len < 0) return std::nullopt;
  size_t pad = text.ends_with("==") ? 2 : text.ends_with("=") ? 1 : 0;
  out.resize(static_cast<size_t>(len) - pad);
  return out;
}

bool IsHeaderName(std::string_view name) {
  return !name.empty() && name.find_first_of(":; \t\r\n") == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

// "key: reason" problems of a standard-webhooks block; a `file:` secret is checked when bound.
std::vector<std::string> CheckStandardBlock(const nlohmann::json& block) {
  std::vector<std::string> problems;
  auto check = [&](const nlohmann::json& v, const std::string& key) {
    if (!v.is_string() || v.get_ref<const std::string&>().starts_with("file:")) return;
    Result<std::string> k = StandardWebhooksSigningKey(v.get_ref<const std::string&>());
    if (!k.ok()) problems.push_back(key + ": " + k.status().message());
  };
  if (auto s = block.find("secret"); s != block.end()) check(*s, "secret");
  if (auto p = block.find("previousSecrets"); p != block.end() && p->is_array()) {
    for (size_t i = 0; i < p->size(); ++i) {
      check((*p)[i], "previousSecrets[" + std::to_string(i) + "]");
    }
  }
  return problems;
}

std::vector<std::string> CheckHmacBlock(const nlohmann::json& block) {
  std::vector<std::string> problems;
  for (const char* key : {"headerName", "timestampHeader"}) {
    auto v = block.find(key);
    if (v != block.end() && v->is_string() && !IsHeaderName(v->get_ref<const std::string&>())) {
      problems.push_back(std::string(key) +
                         ": must be a header name (no ':', ';', spaces or line breaks)");
    }
  }
  auto prefix = block.find("prefix");
  if (prefix != block.end() && prefix->is_string() &&
      prefix->get_ref<const std::string&>().find_first_of(std::string_view("\r\n\0", 3)) !=
          std::string::npos) {
    problems.push_back("prefix: must not contain a line break or NUL");
  }
  return problems;
}

}  // namespace

const OptionTable<StandardWebhooksSigningSettings>& StandardWebhooksSigningOptions() {
  using S = StandardWebhooksSigningSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Secret("secret", &S::secret, "Signing secret: whsec_ and the base64 of 24 to 64 bytes")
          .Required(),
      opt::TextList("previousSecrets", &S::previous_secrets, nlohmann::json::array(),
                    "Secrets still signed with during a rotation (one more v1 signature each)"),
  };
  return *table;
}

const OptionTable<HmacSigningSettings>& HmacSigningOptions() {
  using S = HmacSigningSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Secret("secret", &S::secret, "HMAC key (the text's bytes)").Required(),
      opt::Text("headerName", &S::header_name, "X-Hub-Signature-256",
                "Header that carries the signature"),
      opt::Text("prefix", &S::prefix, "sha256=", "Text before the signature in the header"),
      opt::Choice("algorithm", &S::algorithm, {"sha256", "sha512"}, "sha256", "HMAC digest"),
      opt::Choice("encoding", &S::encoding, {"hex", "base64"}, "hex",
                  "Encoding of the signature (hex is lower case)"),
      opt::Text("timestampHeader", &S::timestamp_header, nullptr,
                "When set: this header carries the send time (Unix seconds) and the signed text "
                "is <timestamp>.<body>"),
  };
  return *table;
}

std::vector<BlockVariant> HttpSigningVariants() {
  BlockVariant standard{"standard-webhooks", StandardWebhooksSigningOptions().specs(),
                        CheckStandardBlock, nullptr};
  BlockVariant hmac{"hmac", HmacSigningOptions().specs(), CheckHmacBlock, nullptr};
  return {hmac, standard};
}

Result<std::string> StandardWebhooksSigningKey(std::string_view secret) {
  if (secret.starts_with(kSigningWhsec)) secret.remove_prefix(kSigningWhsec.size());
  std::optional<std::string> key = Base64Decode(secret);
  if (!key || key->size() < 24 || key->size() > 64) {
    return InvalidArgument("must be whsec_ followed by the base64 of 24 to 64 bytes");
  }
  return *key;
}

// ---- HttpSigner ---------------------------------------------------------------------------------

struct HttpSigner::Key {
  EVP_MAC_CTX* keyed = nullptr;  // initialised with the key; copied for each signature
  ~Key() { EVP_MAC_CTX_free(keyed); }
};

namespace {

EVP_MAC* HmacMac() {
  static EVP_MAC* const mac = EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr);
  return mac;
}

// An HMAC context keyed with `key` for `digest` ("SHA256", "SHA512"); nullptr on failure.
EVP_MAC_CTX* KeyedHmac(std::string_view key, const char* digest) {
  if (HmacMac() == nullptr) return nullptr;
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(HmacMac());
  if (ctx == nullptr) return nullptr;
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>(digest), 0),
      OSSL_PARAM_construct_end()};
  if (EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) !=
      1) {
    EVP_MAC_CTX_free(ctx);
    return nullptr;
  }
  return ctx;
}

}  // namespace

HttpSigner::~HttpSigner() = default;

Result<std::unique_ptr<HttpSigner>> HttpSigner::Create(const DestinationSigningConfig& config,
                                                       const std::string& path) {
  std::unique_ptr<HttpSigner> s(new HttpSigner());
  std::vector<std::string> keys;
  const char* digest = "SHA256";
  if (config.type == "standard-webhooks") {
    StandardWebhooksSigningSettings w;
    QB_RETURN_IF_ERROR(StandardWebhooksSigningOptions().Bind(config.options, w, path));
    std::vector<std::string> secrets = {w.secret};
    secrets.insert(secrets.end(), w.previous_secrets.begin(), w.previous_secrets.end());
    for (size_t i = 0; i < secrets.size(); ++i) {
      Result<std::string> key = StandardWebhooksSigningKey(secrets[i]);
      if (!key.ok()) {
        std::string where = i == 0 ? ".secret" : ".previousSecrets[" + std::to_string(i - 1) + "]";
        return InvalidArgument(path + where + ": " + key.status().message());
      }
      keys.push_back(std::move(key).value());
    }
    s->standard_ = true;
    s->lower_names_ = {"webhook-id", "webhook-timestamp", "webhook-signature"};
  } else if (config.type == "hmac") {
    QB_RETURN_IF_ERROR(HmacSigningOptions().Bind(config.options, s->hmac_, path));
    if (s->hmac_.secret.empty()) return InvalidArgument(path + ".secret: must not be empty");
    keys.push_back(s->hmac_.secret);
    digest = s->hmac_.algorithm == "sha512" ? "SHA512" : "SHA256";
    s->lower_names_ = {SigningLower(s->hmac_.header_name)};
    if (s->hmac_.timestamp_header)
      s->lower_names_.push_back(SigningLower(*s->hmac_.timestamp_header));
  } else {
    return InvalidArgument(path + ".type: '" + config.type +
                           "' is not one of hmac, standard-webhooks");
  }
  for (const std::string& key : keys) {
    auto k = std::make_unique<Key>();
    k->keyed = KeyedHmac(key, digest);
    if (k->keyed == nullptr) return Internal(path + ": OpenSSL could not key the HMAC");
    s->keys_.push_back(std::move(k));
  }
  return s;
}

Result<std::vector<std::pair<std::string, std::string>>> HttpSigner::Sign(std::string_view id,
                                                                          std::string_view body,
                                                                          int64_t unix_s) const {
  const std::string ts = std::to_string(unix_s);
  // The signed text in parts (no copy of the body): id.ts.body, ts.body or body.
  std::vector<std::string_view> parts;
  if (standard_) parts = {id, ".", ts, "."};
  if (!standard_ && hmac_.timestamp_header) parts = {ts, "."};
  parts.push_back(body);
  std::vector<std::string> sigs;
  for (const auto& key : keys_) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t len = 0;
    EVP_MAC_CTX* ctx = EVP_MAC_CTX_dup(key->keyed);
    bool ok = ctx != nullptr;
    for (std::string_view p : parts) {
      ok = ok && EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(p.data()), p.size());
    }
    ok = ok && EVP_MAC_final(ctx, mac, &len, sizeof mac);
    EVP_MAC_CTX_free(ctx);
    if (!ok) return Internal("signing the request failed (OpenSSL HMAC)");
    if (standard_ || hmac_.encoding == "base64") {
      sigs.push_back(Base64Encode(mac, len));
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      std::string hex;
      hex.reserve(len * 2);
      for (size_t i = 0; i < len; ++i) (hex += kHex[mac[i] >> 4]) += kHex[mac[i] & 0xf];
      sigs.push_back(std::move(hex));
    }
  }
  std::vector<std::pair<std::string, std::string>> out;
  if (standard_) {
    std::string value;
    for (const std::string& sig : sigs) (value += value.empty() ? "v1," : " v1,") += sig;
    out = {
        {"webhook-id", std::string(id)}, {"webhook-timestamp", ts}, {"webhook-signature", value}};
    return out;
  }
  if (hmac_.timestamp_header) out.emplace_back(*hmac_.timestamp_header, ts);
  out.emplace_back(hmac_.header_name, hmac_.prefix + sigs.front());
  return out;
}

}  // namespace queuebox
