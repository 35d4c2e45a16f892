// redaction.cc: linear-time scanners for the error sanitizer (QueueBox reference §10).
#include "core/redaction.h"

#include <array>

namespace queuebox {
namespace {

constexpr std::string_view kRedacted = "[REDACTED]";

// Secret key names with the separators removed, lower case.
// (x-api-key, proxy-authorization, set-cookie, x-auth-token, access_token, refresh_token and
// client_secret end with a shorter key of the list, and any prefix is allowed, so the list is
// the shortest set with the same matches.)
constexpr std::array<std::string_view, 12> kSecretKeys = {
    "authorization", "apikey", "cookie",     "token",       "secret",     "password",
    "pwd",           "passwd", "credential", "credentials", "passphrase", "privatekey"};

constexpr std::array<std::string_view, 5> kSchemes = {"Basic", "Bearer", "Digest", "Negotiate",
                                                      "Token"};

constexpr std::array<std::string_view, 4> kSecretQueryParams = {"password", "pwd", "secret",
                                                                "token"};

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsWordChar(char c) { return IsAlpha(c) || IsDigit(c) || c == '_'; }
bool IsKeyChar(char c) { return IsWordChar(c) || c == '-' || c == '.'; }
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsBlank(char c) { return c == ' ' || c == '\t'; }
char ToLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
bool IsTokenChar(char c) {
  return IsAlpha(c) || IsDigit(c) || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' ||
         c == '-';
}
// Characters that end an unquoted value (besides whitespace for `=` notation).
bool IsValueStop(char c) {
  return c == ',' || c == ';' || c == '}' || c == ']' || c == '&' || c == '"';
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (ToLower(a[i]) != ToLower(b[i])) return false;
  }
  return true;
}

// True when the key run (characters of [A-Za-z0-9_.-]) ends with a secret key name, separators
// ignored. The run must end with a word character (the word boundary of the reference regex).
bool RunEndsWithSecretKey(std::string_view run) {
  if (run.empty() || !IsWordChar(run.back())) return false;
  std::string normalized;
  normalized.reserve(run.size());
  for (char c : run) {
    if (c != '-' && c != '_' && c != '.') normalized.push_back(ToLower(c));
  }
  std::string_view n = normalized;
  for (std::string_view key : kSecretKeys) {
    if (n.size() >= key.size() && n.substr(n.size() - key.size()) == key) return true;
  }
  return false;
}

// When text[pos..] starts with an auth scheme word and at least one blank, the position after
// the blanks; otherwise pos.
size_t SkipScheme(std::string_view text, size_t pos) {
  for (std::string_view scheme : kSchemes) {
    if (text.size() - pos > scheme.size() &&
        EqualsIgnoreCase(text.substr(pos, scheme.size()), scheme) &&
        IsBlank(text[pos + scheme.size()])) {
      size_t p = pos + scheme.size();
      while (p < text.size() && IsBlank(text[p])) ++p;
      return p;
    }
  }
  return pos;
}

// The end of a quoted string starting at text[pos] (a quote): after the closing quote, or the
// end of the line when it is never closed (the rest of the line is treated as the secret).
size_t QuotedEnd(std::string_view text, size_t pos) {
  char quote = text[pos];
  for (size_t p = pos + 1; p < text.size(); ++p) {
    if (text[p] == '\\') {
      ++p;
    } else if (text[p] == quote) {
      return p + 1;
    } else if (text[p] == '\n') {
      return p;
    }
  }
  return text.size();
}

// The end of the value that starts at text[pos] (after the delimiter and blanks).
size_t ValueEnd(std::string_view text, size_t pos, bool colon) {
  // Already redacted (Redact is idempotent).
  if (text.substr(pos).starts_with(kRedacted)) return pos + kRedacted.size();
  if (pos < text.size() && (text[pos] == '"' || text[pos] == '\'')) return QuotedEnd(text, pos);
  size_t p = SkipScheme(text, pos);
  while (p < text.size()) {
    char c = text[p];
    if (IsValueStop(c) || c == '\n' || c == '\r') break;
    if (!colon && IsSpace(c)) break;
    ++p;
  }
  // Colon notation takes the whole tail up to a stop; trailing blanks are not part of it.
  if (colon) {
    while (p > pos && IsBlank(text[p - 1])) --p;
  }
  return p;
}

// Rule 1: `key: value` / `key=value` with a secret key.
std::string RedactKeyValues(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t copied = 0;  // text[0, copied) is in `out`
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c != ':' && c != '=') {
      ++i;
      continue;
    }
    // Walk back: blanks, an optional closing quote, the key run. Never before `copied`.
    size_t k = i;
    while (k > copied && IsBlank(text[k - 1])) --k;
    if (k > copied && (text[k - 1] == '"' || text[k - 1] == '\'')) --k;
    size_t key_end = k;
    while (k > copied && IsKeyChar(text[k - 1])) --k;
    if (!RunEndsWithSecretKey(text.substr(k, key_end - k))) {
      ++i;
      continue;
    }
    size_t v = i + 1;
    while (v < text.size() && IsBlank(text[v])) ++v;
    size_t end = ValueEnd(text, v, c == ':');
    out.append(text.substr(copied, key_end - copied));
    out += '=';
    out += kRedacted;
    copied = end;
    i = end > i ? end : i + 1;
  }
  out.append(text.substr(copied));
  return out;
}

bool IsSchemeChar(char c) { return IsAlpha(c) || IsDigit(c) || c == '+' || c == '.' || c == '-'; }

// Rule 2a: userinfo of `scheme:/` or `scheme://` URLs.
std::string MaskUserinfo(std::string_view text) {
  constexpr size_t kMaxUserinfo = 64;
  constexpr size_t kMaxLongUserinfo = 1024;
  std::string out;
  out.reserve(text.size());
  size_t copied = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != ':' || i + 1 >= text.size() || text[i + 1] != '/') {
      ++i;
      continue;
    }
    // A scheme before the colon: a letter followed by scheme characters.
    size_t s = i;
    while (s > copied && IsSchemeChar(text[s - 1])) --s;
    while (s < i && !IsAlpha(text[s])) ++s;
    if (s == i) {
      ++i;
      continue;
    }
    size_t start = i + 2;  // after ":/"
    if (start < text.size() && text[start] == '/') ++start;
    // The last '@' within the bounded window, which never crosses a comma or a line end.
    size_t at = std::string_view::npos;
    size_t p = start;
    for (; p < text.size() && p - start < kMaxUserinfo; ++p) {
      char c = text[p];
      if (c == ',' || c == '\n' || c == '\r' || c == '"') break;
      if (c == '@') at = p;
    }
    // A longer userinfo (a 64-character token or password) has no '@' in the window: past it,
    // the '@' of one run without whitespace, '/', '?', '#', ',' or '"' still ends a userinfo.
    if (at == std::string_view::npos && p - start == kMaxUserinfo) {
      for (; p < text.size() && p - start < kMaxLongUserinfo; ++p) {
        char c = text[p];
        if (IsSpace(c) || c == '/' || c == '?' || c == '#' || c == ',' || c == '"') break;
        if (c == '@') at = p;
      }
    }
    if (at == std::string_view::npos || at == start) {
      i = start;
      continue;
    }
    out.append(text.substr(copied, s - copied));
    out.append(text.substr(s, i - s));
    out += "://***@";
    copied = at + 1;
    i = at + 1;
  }
  out.append(text.substr(copied));
  return out;
}

// Rule 2b: `?password=x`, `&token=x`, `;secret=x` -> `=***`.
std::string MaskQueryParams(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t copied = 0;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c != '?' && c != '&' && c != ';') {
      ++i;
      continue;
    }
    size_t name_start = i + 1;
    size_t p = name_start;
    while (p < text.size() && IsWordChar(text[p])) ++p;
    if (p >= text.size() || text[p] != '=') {
      i = name_start;
      continue;
    }
    std::string_view name = text.substr(name_start, p - name_start);
    bool secret = false;
    for (std::string_view q : kSecretQueryParams) secret = secret || EqualsIgnoreCase(name, q);
    size_t v = p + 1;
    size_t end = v;
    while (end < text.size() && text[end] != '&' && text[end] != ';' && text[end] != '#' &&
           text[end] != ',' && text[end] != '"' && !IsSpace(text[end])) {
      ++end;
    }
    if (!secret || text.substr(v, end - v) == kRedacted) {
      i = end;
      continue;
    }
    out.append(text.substr(copied, v - copied));
    out += "***";
    copied = end;
    i = end;
  }
  out.append(text.substr(copied));
  return out;
}

// Rule 3: bare `Bearer abc.def` -> `Bearer [REDACTED]`.
std::string RedactSchemeTokens(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t copied = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!IsAlpha(text[i]) || (i > 0 && IsWordChar(text[i - 1]))) {
      ++i;
      continue;
    }
    size_t word_end = i;
    while (word_end < text.size() && IsWordChar(text[word_end])) ++word_end;
    std::string_view word = text.substr(i, word_end - i);
    bool scheme = false;
    for (std::string_view s : kSchemes) scheme = scheme || word == s;
    if (!scheme) {
      i = word_end;
      continue;
    }
    size_t p = word_end;
    while (p < text.size() && IsSpace(text[p])) ++p;
    size_t token_start = p;
    while (p < text.size() && IsTokenChar(text[p])) ++p;
    if (token_start == word_end || token_start == p) {
      i = word_end;
      continue;
    }
    while (p < text.size() && text[p] == '=') ++p;
    out.append(text.substr(copied, word_end - copied));
    out += ' ';
    out += kRedacted;
    copied = p;
    i = p;
  }
  out.append(text.substr(copied));
  return out;
}

// Length of the UTF-8 sequence that starts with byte `lead` (1 for stray continuation bytes).
size_t Utf8Length(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Byte offset after the first `chars` code points of text (text.size() when shorter).
size_t OffsetOfChar(std::string_view text, size_t chars) {
  size_t pos = 0;
  for (size_t n = 0; n < chars && pos < text.size(); ++n) {
    pos += Utf8Length(static_cast<unsigned char>(text[pos]));
  }
  return pos < text.size() ? pos : text.size();
}

}  // namespace

std::string MaskUrlCredentials(std::string_view text) {
  return MaskQueryParams(MaskUserinfo(text));
}

std::string Redact(std::string_view text) {
  return RedactSchemeTokens(MaskUrlCredentials(RedactKeyValues(text)));
}

bool IsSecretKey(std::string_view name) {
  for (char c : name) {
    if (!IsKeyChar(c)) return false;
  }
  return RunEndsWithSecretKey(name);
}

std::string Truncate(std::string_view text, size_t max_chars) {
  size_t all = OffsetOfChar(text, max_chars);
  if (all >= text.size()) return std::string(text);
  if (max_chars <= kTruncatedMarker.size()) return std::string(text.substr(0, all));
  std::string out(text.substr(0, OffsetOfChar(text, max_chars - kTruncatedMarker.size())));
  out += kTruncatedMarker;
  return out;
}

std::string SanitizeError(std::string_view text, size_t max_chars) {
  return Truncate(Redact(text), max_chars);
}

}  // namespace queuebox
