// span.h: a span as the relay records it, in the OpenTelemetry data model (the fields OTLP's Span
// message carries): `Begin` opens it (its ids and start time), and the recorder hands its end
// (name, kind, attributes, status) to Tracer::Record, which encodes it at once. Nothing of a span
// is copied or allocated per span beyond the encoding itself.
//
// Thread-safety: plain values. Ownership: a SpanEnd and its Attributes are views of the
// recorder's values, valid for the Record call only (Record keeps no pointer into them).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "telemetry/trace_context.h"

namespace queuebox::telemetry {

// OTLP SpanKind values.
enum class SpanKind : int { kInternal = 1, kServer = 2, kClient = 3, kProducer = 4, kConsumer = 5 };

// A string (a view: valid for the Record call only), an integer or a bool.
using AttributeValue = std::variant<std::string_view, int64_t, bool>;
// Keys are the conventions' names.
struct Attribute {
  std::string_view key;
  AttributeValue value;
};

// Nanoseconds since the Unix epoch now (the system clock).
uint64_t UnixNanoNow();

// The span `Begin` opens: its own context (for the traceparent it hands on) and its parent.
struct SpanStart {
  TraceContext context;  // trace id, this span's id, flags, tracestate
  SpanId parent{};       // all zeros: a root span
  uint64_t start_unix_nano = 0;

  // This span's traceparent value: the parent of what it hands on.
  std::string traceparent() const {
    return FormatTraceparent(context.trace_id, context.span_id, context.flags);
  }
};

// A child of `parent`, or the root of a new trace when `parent` is unset; starts now.
SpanStart Begin(const std::optional<TraceContext>& parent);

// The end of a span: what the recorder knows when it is done. The span's name is
// `name_prefix` followed by `name` ("publish " and the destination's name: no string built).
// Views, valid for the Record call only.
struct SpanEnd {
  std::string_view name_prefix;
  std::string_view name;
  SpanKind kind = SpanKind::kInternal;
  std::span<const Attribute> attributes;
  // Attributes the recorder encoded once (EncodeSpanAttributes, otlp.h): the same for many
  // spans, say a destination's; written before `attributes`.
  std::string_view encoded_attributes;
  bool error = false;  // OTLP status ERROR (else UNSET)
  std::string_view status_message;
};

}  // namespace queuebox::telemetry
