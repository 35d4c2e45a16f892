// json/utf8.h: well-formed UTF-8 (RFC 3629), the one check every reader of text here uses (the
// BabelQueue envelope, the configuration's YAML and environment, the inbox's stored text, the
// intake's JSON guard). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace queuebox::json {

// Length in bytes (1-4) of the UTF-8 sequence that starts at s[i], or 0 when it is not
// well-formed there: a stray continuation byte, a sequence cut short, an overlong form, a UTF-16
// surrogate or a code point past U+10FFFF. Requires i < s.size().
size_t Utf8SequenceLength(std::string_view s, size_t i);

// The byte offset of the first sequence of `s` that is not well-formed UTF-8; nullopt when all of
// `s` is. NUL is a well-formed code point here; callers that refuse it check for it themselves.
std::optional<size_t> FirstInvalidUtf8(std::string_view s);

// The number of code points in `s`, or nullopt when `s` is not well-formed UTF-8.
std::optional<size_t> Utf8CodePoints(std::string_view s);

}  // namespace queuebox::json
