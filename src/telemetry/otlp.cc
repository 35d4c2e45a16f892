#include "telemetry/otlp.h"

#include <cstdint>

namespace queuebox::telemetry {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2;

void Varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void Tag(std::string& out, int field, int wire) {
  Varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire));
}

void Bytes(std::string& out, int field, std::string_view bytes) {
  Tag(out, field, kLengthDelimited);
  Varint(out, bytes.size());
  out.append(bytes);
}

void Fixed64(std::string& out, int field, uint64_t v) {
  Tag(out, field, kFixed64);
  for (int i = 0; i < 8; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void VarintField(std::string& out, int field, uint64_t v) {
  Tag(out, field, kVarint);
  Varint(out, v);
}

template <size_t N>
std::string_view IdBytes(const std::array<uint8_t, N>& id) {
  return {reinterpret_cast<const char*>(id.data()), N};
}

// KeyValue { string key = 1; AnyValue value = 2; }
// AnyValue { string string_value = 1; bool bool_value = 2; int64 int_value = 3; }
std::string KeyValue(const std::string& key, const AttributeValue& value) {
  std::string any;
  if (const auto* s = std::get_if<std::string>(&value)) {
    Bytes(any, 1, *s);
  } else if (const auto* b = std::get_if<bool>(&value)) {
    VarintField(any, 2, *b ? 1 : 0);
  } else {
    VarintField(any, 3, static_cast<uint64_t>(std::get<int64_t>(value)));
  }
  std::string out;
  Bytes(out, 1, key);
  Bytes(out, 2, any);
  return out;
}

bool AllZero(const SpanId& id) {
  for (uint8_t b : id) {
    if (b != 0) return false;
  }
  return true;
}

// Span { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4;
//        string name = 5; SpanKind kind = 6; fixed64 start_time_unix_nano = 7;
//        fixed64 end_time_unix_nano = 8; repeated KeyValue attributes = 9; Status status = 15;
//        fixed32 flags = 16; }   Status { string message = 2; StatusCode code = 3; }
std::string EncodeSpan(const Span& s) {
  std::string out;
  Bytes(out, 1, IdBytes(s.trace_id));
  Bytes(out, 2, IdBytes(s.span_id));
  if (!s.tracestate.empty()) Bytes(out, 3, s.tracestate);
  if (!AllZero(s.parent_span_id)) Bytes(out, 4, IdBytes(s.parent_span_id));
  Bytes(out, 5, s.name);
  VarintField(out, 6, static_cast<uint64_t>(s.kind));
  Fixed64(out, 7, s.start_unix_nano);
  Fixed64(out, 8, s.end_unix_nano);
  for (const auto& [key, value] : s.attributes) Bytes(out, 9, KeyValue(key, value));
  if (s.error) {
    std::string status;
    if (!s.status_message.empty()) Bytes(status, 2, s.status_message);
    VarintField(status, 3, 2);  // STATUS_CODE_ERROR
    Bytes(out, 15, status);
  }
  return out;
}

}  // namespace

std::string EncodeExportRequest(std::span<const Span> spans, std::string_view service_name,
                                std::string_view service_version) {
  // Resource { repeated KeyValue attributes = 1; }
  std::string resource;
  Bytes(resource, 1, KeyValue("service.name", std::string(service_name)));
  if (!service_version.empty()) {
    Bytes(resource, 1, KeyValue("service.version", std::string(service_version)));
  }
  // ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
  // InstrumentationScope { string name = 1; string version = 2; }
  std::string scope;
  Bytes(scope, 1, "queuebox");
  if (!service_version.empty()) Bytes(scope, 2, service_version);
  std::string scope_spans;
  Bytes(scope_spans, 1, scope);
  for (const Span& s : spans) Bytes(scope_spans, 2, EncodeSpan(s));
  // ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
  std::string resource_spans;
  Bytes(resource_spans, 1, resource);
  Bytes(resource_spans, 2, scope_spans);
  // ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
  std::string out;
  Bytes(out, 1, resource_spans);
  return out;
}

}  // namespace queuebox::telemetry
