// redaction_fuzz: the last_error sanitizer (core/redaction.h) on arbitrary text.
// Properties: SanitizeError keeps well-formed UTF-8 well formed and within its cap; Truncate
// never gives more than max_chars characters; a `password=` value after the fuzzed text (on its
// own line) never survives Redact.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/redaction.h"
#include "fuzz_util.h"

using queuebox::fuzz::CodePoints;
using queuebox::fuzz::Require;
using queuebox::fuzz::ValidUtf8;

namespace {

size_t Count(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte picks the cap, the rest is the text.
  const size_t cap = data[0];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const bool utf8 = ValidUtf8(text);

  std::string redacted = queuebox::Redact(text);
  std::string masked = queuebox::MaskUrlCredentials(text);
  (void)queuebox::IsSecretKey(text);
  std::string cut = queuebox::Truncate(text, cap);
  std::string sanitized = queuebox::SanitizeError(text, cap);
  std::string sanitized_default = queuebox::SanitizeError(text);
  if (utf8) {
    Require(ValidUtf8(redacted), "Redact keeps UTF-8 well formed");
    Require(ValidUtf8(masked), "MaskUrlCredentials keeps UTF-8 well formed");
    Require(ValidUtf8(cut), "Truncate never splits a UTF-8 sequence");
    Require(ValidUtf8(sanitized), "SanitizeError keeps UTF-8 well formed");
    Require(CodePoints(cut) <= cap, "Truncate gives at most max_chars characters");
    Require(CodePoints(sanitized) <= cap, "SanitizeError gives at most max_chars characters");
    Require(CodePoints(sanitized_default) <= queuebox::kMaxErrorChars,
            "SanitizeError gives at most kMaxErrorChars characters");
    if (CodePoints(text) <= cap) Require(cut == text, "Truncate keeps a short text");
  }

  // A secret after the fuzzed prose, on a line of its own, is hidden whatever came before.
  static constexpr std::string_view kSecret = "Zq7Secret0Value";
  std::string with_secret = std::string(text) + "\npassword=" + std::string(kSecret) + "\n";
  // (The prose may hold the same text: only its own copies may survive.)
  const size_t in_prose = Count(text, kSecret);
  Require(Count(queuebox::Redact(with_secret), kSecret) <= in_prose,
          "a password= value never survives Redact");
  Require(Count(queuebox::SanitizeError(with_secret, 1 << 20), kSecret) <= in_prose,
          "a password= value never survives SanitizeError");
  return 0;
}
