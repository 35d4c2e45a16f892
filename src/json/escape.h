// json/escape.h: a string as JSON text (RFC 8259), escaped the one way every hand-written JSON
// writer here uses.
#pragma once

#include <string>
#include <string_view>

namespace queuebox::json {

// Appends s escaped for the inside of a JSON string: `"` and `\` with a backslash, \b \f \n \r \t
// in their short forms, the other control characters below 0x20 as \u00XX (lower-case hex), and
// U+2028 / U+2029 as \u2028 / \u2029 (as PHP and Go write them: JavaScript source may not hold
// them raw). Every other byte, UTF-8 included, passes through unchanged; the caller checks
// UTF-8 where it must be valid.
void AppendEscaped(std::string& out, std::string_view s);

// Appends s as a JSON string: AppendEscaped between double quotes.
void AppendQuoted(std::string& out, std::string_view s);

// s as a JSON string, quotes included.
std::string Quoted(std::string_view s);

}  // namespace queuebox::json
