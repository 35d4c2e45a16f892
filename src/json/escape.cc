#include "json/escape.h"

namespace queuebox::json {
namespace {

// The escape of a byte below 0x80, or empty when it stands for itself.
std::string_view ShortEscape(char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      return {};
  }
}

// U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR: E2 80 A8 / E2 80 A9.
bool IsLineOrParagraphSeparator(std::string_view s, size_t i) {
  return i + 2 < s.size() && s[i] == '\xE2' && s[i + 1] == '\x80' &&
         (s[i + 2] == '\xA8' || s[i + 2] == '\xA9');
}

}  // namespace

void AppendEscaped(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  size_t plain = 0;  // start of the bytes not yet appended that need no escape
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && !(c == 0xE2 && IsLineOrParagraphSeparator(s, i))) {
      continue;
    }
    out.append(s.substr(plain, i - plain));
    if (c == 0xE2) {
      out += s[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else if (const std::string_view e = ShortEscape(s[i]); !e.empty()) {
      out += e;
    } else {
      out += "\\u00";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
    plain = i + 1;
  }
  out.append(s.substr(plain));
}

void AppendQuoted(std::string& out, std::string_view s) {
  out.push_back('"');
  AppendEscaped(out, s);
  out.push_back('"');
}

std::string Quoted(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendQuoted(out, s);
  return out;
}

}  // namespace queuebox::json
