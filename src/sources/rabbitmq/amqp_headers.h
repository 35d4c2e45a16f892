// amqp_headers.h: AMQP 0-9-1 header tables as the inbox stores them (QueueBox reference §11.3):
// every value becomes a string. Numbers and booleans as their text ("42", "-1.5", "true"),
// decimals as their decimal text ("123.45"), timestamps (seconds) as ISO-8601 UTC
// ("2026-12-01T21:00:00Z"), strings and byte arrays through HeaderText (UTF-8, else "base64:"),
// nested tables and arrays as JSON text (the same conversions inside, a void value as null).
// A void (null) header has no text and is left out.
//
// Thread-safety: pure functions.
#pragma once

#include <amqp.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace queuebox::sources {

// The text of one header value; nullopt for a void value.
std::optional<std::string> AmqpFieldText(const amqp_field_value_t& value);

// Every entry of `table` with a text, in table order (names through HeaderText too).
std::vector<std::pair<std::string, std::string>> AmqpHeaderStrings(const amqp_table_t& table);

}  // namespace queuebox::sources
