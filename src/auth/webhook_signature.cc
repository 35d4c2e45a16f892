// webhook_signature.cc: HMAC through OpenSSL, hex, base64 and the Standard Webhooks signature.
#include "auth/webhook_signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace queuebox {
namespace {

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The digest of each name in HmacAlgorithms(); nullptr for another name.
const EVP_MD* Digest(std::string_view algorithm) {
  if (algorithm == "HmacSHA256") return EVP_sha256();
  if (algorithm == "HmacSHA1") return EVP_sha1();
  if (algorithm == "HmacSHA512") return EVP_sha512();
  return nullptr;
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

Result<std::string> HmacBytes(std::string_view algorithm, std::string_view key,
                              std::string_view payload) {
  const EVP_MD* md = Digest(algorithm);
  if (md == nullptr) return InvalidArgument("unknown HMAC algorithm");
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(md, key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), out,
           &len) == nullptr) {
    return Internal("HMAC failed");
  }
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string HexLower(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 0xf]);
  }
  return hex;
}

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<unsigned char>(bytes[i]) << 16 |
                       static_cast<unsigned char>(bytes[i + 1]) << 8 |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out.push_back(kBase64[(v >> shift) & 63]);
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out.push_back(kBase64[(v >> 18) & 63]);
    out.push_back(kBase64[(v >> 12) & 63]);
    out.push_back(rest == 2 ? kBase64[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 == 0 && !text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 3 && !text.empty() && text.back() == '=') text.remove_suffix(1);
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    const int v = Base64Value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  if (a.empty()) return true;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::optional<std::string> StandardWebhooksKey(std::string_view secret) {
  static constexpr std::string_view kPrefix = "whsec_";
  if (secret.substr(0, kPrefix.size()) == kPrefix) secret.remove_prefix(kPrefix.size());
  std::optional<std::string> key = Base64Decode(secret);
  if (!key || key->empty()) return std::nullopt;
  return key;
}

std::string StandardWebhooksSignature(std::string_view key, std::string_view id,
                                      int64_t timestamp_s, std::string_view body) {
  std::string payload;
  payload.reserve(id.size() + body.size() + 24);
  payload.append(id).append(".").append(std::to_string(timestamp_s)).append(".").append(body);
  return "v1," + Base64Encode(HmacBytes("HmacSHA256", key, payload).value());
}

}  // namespace queuebox
