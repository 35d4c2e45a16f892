// redaction.h: the error sanitizer. Every text that reaches `last_error` or a log line passes
// through SanitizeError so that secrets never leave the process (QueueBox reference §10,
// ErrorSanitizer / CredentialMasking; architecture §7 rule 10).
//
// What Redact hides, in this order:
//  1. key/value pairs whose key names a secret (authorization, proxy-authorization, x-api-key,
//     api-key, apikey, cookie, set-cookie, x-auth-token, token, access_token, refresh_token,
//     client_secret, secret, password, pwd, passwd, credential, credentials, passphrase,
//     private_key), matched case-insensitively, with any [A-Za-z0-9_] prefix (PGPASSWORD) and
//     any of `-` `_` `.` as separators (apiKey, API_KEY, client.secret), ending at a word
//     boundary (`passwordless` is not a key), optionally followed by a closing quote (JSON):
//       key: <quoted string | [scheme] everything up to , ; } ] & " or end of line>
//       key= <quoted string | [scheme] a run up to whitespace or , ; } ] & ">
//     each becomes `<key>=[REDACTED]`.
//  2. URL credentials: `scheme://user:pass@host` -> `scheme://***@host` (the last `@` within 64
//     characters after `//`, no comma in between: passwords with spaces, `/` or `@` are covered,
//     and some prose is over-masked on purpose; past those 64, the last `@` of a run of up to 1024
//     characters without whitespace, `/`, `?`, `#`, `,` or `"`: long tokens); query parameters
//     password|pwd|secret|token after
//     `?`, `&` or `;` -> `=***`.
//  3. bare scheme tokens: the words Basic, Bearer, Digest, Negotiate, Token (exact case) followed
//     by whitespace and a token run [A-Za-z0-9._~+/-]+ (and trailing `=`) -> `<Scheme> [REDACTED]`
//     ("the token bucket" survives).
// Every pass is a hand-written scanner: time is linear in the input size (no regex backtracking).
//
// Lengths are counted in Unicode code points ("characters"); a cut never splits a UTF-8 sequence.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace queuebox {

// Appended by Truncate when it cuts.
inline constexpr std::string_view kTruncatedMarker = "...[truncated]";
// The cap of `last_error` and of logged error texts (characters).
inline constexpr std::size_t kMaxErrorChars = 2000;

// Hides secrets (rules 1-3 above). Text without secrets is returned unchanged.
std::string Redact(std::string_view text);

// Rule 2 alone: URL userinfo and secret query parameters.
std::string MaskUrlCredentials(std::string_view text);

// True when `name` names a secret (rule 1's key list, same matching), e.g. "X-Api-Key",
// "PGPASSWORD", "client.secret". For masking header values in printouts.
bool IsSecretKey(std::string_view name);

// `text` when it has at most max_chars characters; otherwise its first
// (max_chars - |kTruncatedMarker|) characters followed by kTruncatedMarker (exactly max_chars
// characters). When max_chars is not larger than the marker, the first max_chars characters.
std::string Truncate(std::string_view text, std::size_t max_chars);

// Redact, then Truncate to max_chars: what may be stored in last_error or logged.
std::string SanitizeError(std::string_view text, std::size_t max_chars = kMaxErrorChars);

}  // namespace queuebox
