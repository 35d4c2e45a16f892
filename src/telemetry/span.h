// span.h: one finished span as the relay records it, in the OpenTelemetry data model (the
// fields OTLP's Span message carries).
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "telemetry/trace_context.h"

namespace queuebox::telemetry {

// OTLP SpanKind values.
enum class SpanKind : int { kInternal = 1, kServer = 2, kClient = 3, kProducer = 4, kConsumer = 5 };

using AttributeValue = std::variant<std::string, int64_t, bool>;
// Keys are the conventions' names, string literals: a key must outlive the span (static storage).
using Attributes = std::vector<std::pair<std::string_view, AttributeValue>>;

struct Span {
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent_span_id{};  // all zeros: a root span
  uint8_t flags = kSampled;
  std::string tracestate;
  std::string name;
  SpanKind kind = SpanKind::kInternal;
  uint64_t start_unix_nano = 0;
  uint64_t end_unix_nano = 0;
  Attributes attributes;
  bool error = false;  // OTLP status ERROR (else UNSET)
  std::string status_message;
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

// The finished span of `start`, ending now.
Span Finish(const SpanStart& start, std::string name, SpanKind kind, Attributes attributes,
            bool error = false, std::string status_message = {});

}  // namespace queuebox::telemetry
