// otlp.h: spans as an OTLP ExportTraceServiceRequest in protobuf binary
// (opentelemetry/proto/collector/trace/v1/trace_service.proto), the body of a POST to a
// collector's /v1/traces with Content-Type application/x-protobuf.
//
// Thread-safety: a pure function.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "telemetry/span.h"

namespace queuebox::telemetry {

// One ResourceSpans (resource: service.name, service.version) with one ScopeSpans (scope
// "queuebox") holding `spans`.
std::string EncodeExportRequest(std::span<const Span> spans, std::string_view service_name,
                                std::string_view service_version);
// The same into `out` (its previous content replaced, its capacity kept: an exporter reuses one
// buffer).
void EncodeExportRequest(std::span<const Span> spans, std::string_view service_name,
                         std::string_view service_version, std::string& out);

}  // namespace queuebox::telemetry
