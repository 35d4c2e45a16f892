// trace_context.h: W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent`
// and `tracestate` values the relay reads from a request, a broker message or an outbox row and
// writes on every delivery. A value that breaks the specification's rules is dropped (never
// forwarded malformed, never a failure of the message).
//
// Thread-safety: plain values and pure functions; NewTraceId/NewSpanId use a per-thread
// generator.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace queuebox::telemetry {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

inline constexpr std::string_view kTraceparent = "traceparent";
inline constexpr std::string_view kTracestate = "tracestate";
inline constexpr uint8_t kSampled = 0x01;

// A parsed, valid trace context: non-zero ids, flags, and a valid tracestate (empty when the
// message had none or an invalid one).
struct TraceContext {
  TraceId trace_id{};
  SpanId span_id{};
  uint8_t flags = 0;
  std::string tracestate;
};

// The `traceparent` value by the specification's parsing rules: version 00 is exactly 55
// characters; a later version (not ff) at least 55, its extra part after a '-'; lowercase hex
// only; neither id all zeros. Surrounding spaces and tabs are ignored. nullopt when invalid.
std::optional<TraceContext> ParseTraceparent(std::string_view value);

// True when `value` is a valid `tracestate`: 1 to 32 list members "key=value" (empty members
// allowed), keys unique, each key and value by the specification's grammar, at most 512
// characters in all.
bool ValidTracestate(std::string_view value);

// "00-<trace id>-<span id>-<flags>", lowercase hex.
std::string FormatTraceparent(const TraceId& trace_id, const SpanId& span_id, uint8_t flags);

// The trace context of a message's headers (any letter case; the last of a repeated name wins):
// its traceparent, and its tracestate when valid. nullopt when there is no valid traceparent.
std::optional<TraceContext> FromHeaders(
    const std::vector<std::pair<std::string, std::string>>& headers);

// The trace context of a JSON object text of string values (an outbox or inbox row's headers).
// Cheap when the text has no "traceparent" name: no parse.
std::optional<TraceContext> FromHeadersJson(std::string_view headers_json);

// True when `name` is traceparent or tracestate in any letter case.
bool IsTraceHeader(std::string_view name);

// A new random non-zero id.
TraceId NewTraceId();
SpanId NewSpanId();

// Lowercase hex of an id (OTLP JSON, logs, tests).
std::string Hex(const uint8_t* bytes, size_t n);
template <size_t N>
std::string Hex(const std::array<uint8_t, N>& id) {
  return Hex(id.data(), N);
}

}  // namespace queuebox::telemetry
