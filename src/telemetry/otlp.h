// otlp.h: spans as an OTLP ExportTraceServiceRequest in protobuf binary
// (opentelemetry/proto/collector/trace/v1/trace_service.proto), the body of a POST to a
// collector's /v1/traces with Content-Type application/x-protobuf. A span is encoded once, when
// it is recorded (AppendSpan); an export request wraps the encoded spans of a batch.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "telemetry/span.h"

namespace queuebox::telemetry {

// Appends the span `start` opened and `end` closed at `end_unix_nano` to `out` as one
// ScopeSpans.spans field (its tag, length and Span message).
void AppendSpan(std::string& out, const SpanStart& start, const SpanEnd& end,
                uint64_t end_unix_nano);

// `attributes` encoded as a Span's attributes fields (repeated KeyValue, field 9), for
// SpanEnd::encoded_attributes: attributes shared by many spans are encoded once.
std::string EncodeSpanAttributes(std::span<const Attribute> attributes);

// One ResourceSpans (resource: service.name, service.version) with one ScopeSpans (scope
// "queuebox") holding `spans` (AppendSpan's output, one or more spans end to end), into `out`
// (its previous content replaced, its capacity kept: an exporter reuses one buffer).
void EncodeExportRequest(std::string_view spans, std::string_view service_name,
                         std::string_view service_version, std::string& out);

}  // namespace queuebox::telemetry
