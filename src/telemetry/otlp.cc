#include "telemetry/otlp.h"

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace queuebox::telemetry {
namespace {

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2;

// Writes into a buffer already sized to the exact length (the sizes are computed first): a
// pointer that moves, no capacity check or call per field (std::string::append per varint was
// the encoder's largest cost).
struct Writer {
  char* p;
};

void Varint(Writer& out, uint64_t v) {
  while (v >= 0x80) {
    *out.p++ = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  *out.p++ = static_cast<char>(v);
}

void Raw(Writer& out, std::string_view bytes) {
  if (bytes.empty()) return;
  std::memcpy(out.p, bytes.data(), bytes.size());
  out.p += bytes.size();
}

void Tag(Writer& out, int field, int wire) {
  Varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire));
}

void Bytes(Writer& out, int field, std::string_view bytes) {
  Tag(out, field, kLengthDelimited);
  Varint(out, bytes.size());
  Raw(out, bytes);
}

void Fixed64(Writer& out, int field, uint64_t v) {
  Tag(out, field, kFixed64);
  for (int i = 0; i < 8; ++i) *out.p++ = static_cast<char>((v >> (8 * i)) & 0xff);
}

void VarintField(Writer& out, int field, uint64_t v) {
  Tag(out, field, kVarint);
  Varint(out, v);
}

// Grows `out` by `n` bytes and returns a writer at the start of them.
Writer Extend(std::string& out, size_t n) {
  const size_t at = out.size();
  out.resize(at + n);
  return Writer{out.data() + at};
}

template <size_t N>
std::string_view IdBytes(const std::array<uint8_t, N>& id) {
  return {reinterpret_cast<const char*>(id.data()), N};
}

// Sizes first, then one pass of writes into a buffer reserved to the exact size: no temporary
// string per attribute, span or enclosing message (each used to be built and then copied into its
// parent).
size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
size_t TagSize(int field) { return VarintSize(static_cast<uint64_t>(field) << 3); }
// A length-delimited field of `len` bytes, its tag and length included.
size_t LenField(int field, size_t len) { return TagSize(field) + VarintSize(len) + len; }

void OpenMessage(Writer& out, int field, size_t len) {
  Tag(out, field, kLengthDelimited);
  Varint(out, len);
}

// AnyValue { string string_value = 1; bool bool_value = 2; int64 int_value = 3; }
size_t AnyValueSize(const AttributeValue& value) {
  if (const auto* s = std::get_if<std::string_view>(&value)) return LenField(1, s->size());
  if (std::holds_alternative<bool>(value)) return TagSize(2) + 1;
  return TagSize(3) + VarintSize(static_cast<uint64_t>(std::get<int64_t>(value)));
}

// KeyValue { string key = 1; AnyValue value = 2; }
size_t KeyValueSize(std::string_view key, const AttributeValue& value) {
  return LenField(1, key.size()) + LenField(2, AnyValueSize(value));
}

void WriteKeyValue(Writer& out, int field, std::string_view key, const AttributeValue& value) {
  OpenMessage(out, field, KeyValueSize(key, value));
  Bytes(out, 1, key);
  OpenMessage(out, 2, AnyValueSize(value));
  if (const auto* s = std::get_if<std::string_view>(&value)) {
    Bytes(out, 1, *s);
  } else if (const auto* b = std::get_if<bool>(&value)) {
    VarintField(out, 2, *b ? 1 : 0);
  } else {
    VarintField(out, 3, static_cast<uint64_t>(std::get<int64_t>(value)));
  }
}

bool AllZero(const SpanId& id) {
  for (uint8_t b : id) {
    if (b != 0) return false;
  }
  return true;
}

// Status { string message = 2; StatusCode code = 3; }
size_t StatusSize(const SpanEnd& e) {
  return (e.status_message.empty() ? 0 : LenField(2, e.status_message.size())) + TagSize(3) + 1;
}

// Span { bytes trace_id = 1; bytes span_id = 2; string trace_state = 3; bytes parent_span_id = 4;
//        string name = 5; SpanKind kind = 6; fixed64 start_time_unix_nano = 7;
//        fixed64 end_time_unix_nano = 8; repeated KeyValue attributes = 9; Status status = 15; }
size_t SpanSize(const SpanStart& s, const SpanEnd& e) {
  const TraceContext& c = s.context;
  size_t n = LenField(1, c.trace_id.size()) + LenField(2, c.span_id.size());
  if (!c.tracestate.empty()) n += LenField(3, c.tracestate.size());
  if (!AllZero(s.parent)) n += LenField(4, s.parent.size());
  n += LenField(5, e.name_prefix.size() + e.name.size());
  n += TagSize(6) + VarintSize(static_cast<uint64_t>(e.kind));
  n += 2 * (TagSize(7) + 8);
  n += e.encoded_attributes.size();
  for (const Attribute& a : e.attributes) n += LenField(9, KeyValueSize(a.key, a.value));
  if (e.error) n += LenField(15, StatusSize(e));
  return n;
}

}  // namespace

void AppendSpan(std::string& buffer, const SpanStart& s, const SpanEnd& e, uint64_t end_unix_nano) {
  const TraceContext& c = s.context;
  const size_t size = SpanSize(s, e);
  Writer out = Extend(buffer, LenField(2, size));
  OpenMessage(out, 2, size);  // ScopeSpans.spans
  Bytes(out, 1, IdBytes(c.trace_id));
  Bytes(out, 2, IdBytes(c.span_id));
  if (!c.tracestate.empty()) Bytes(out, 3, c.tracestate);
  if (!AllZero(s.parent)) Bytes(out, 4, IdBytes(s.parent));
  OpenMessage(out, 5, e.name_prefix.size() + e.name.size());
  Raw(out, e.name_prefix);
  Raw(out, e.name);
  VarintField(out, 6, static_cast<uint64_t>(e.kind));
  Fixed64(out, 7, s.start_unix_nano);
  Fixed64(out, 8, end_unix_nano);
  Raw(out, e.encoded_attributes);
  for (const Attribute& a : e.attributes) WriteKeyValue(out, 9, a.key, a.value);
  if (e.error) {
    OpenMessage(out, 15, StatusSize(e));
    if (!e.status_message.empty()) Bytes(out, 2, e.status_message);
    VarintField(out, 3, 2);  // STATUS_CODE_ERROR
  }
  if (out.p != buffer.data() + buffer.size()) std::abort();  // a size computed wrong
}

std::string EncodeSpanAttributes(std::span<const Attribute> attributes) {
  size_t size = 0;
  for (const Attribute& a : attributes) size += LenField(9, KeyValueSize(a.key, a.value));
  std::string buffer;
  Writer out = Extend(buffer, size);
  for (const Attribute& a : attributes) WriteKeyValue(out, 9, a.key, a.value);
  return buffer;
}

// ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
// ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
// Resource { repeated KeyValue attributes = 1; }
// ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2; }
// InstrumentationScope { string name = 1; string version = 2; }
void EncodeExportRequest(std::string_view spans, std::string_view service_name,
                         std::string_view service_version, std::string& buffer) {
  constexpr std::string_view kScope = "queuebox";
  const AttributeValue name{service_name};
  const AttributeValue version{service_version};
  const bool versioned = !service_version.empty();
  const size_t resource = LenField(1, KeyValueSize("service.name", name)) +
                          (versioned ? LenField(1, KeyValueSize("service.version", version)) : 0);
  const size_t scope =
      LenField(1, kScope.size()) + (versioned ? LenField(2, service_version.size()) : 0);
  const size_t scope_spans = LenField(1, scope) + spans.size();
  const size_t resource_spans = LenField(1, resource) + LenField(2, scope_spans);

  buffer.clear();
  Writer out = Extend(buffer, LenField(1, resource_spans));
  OpenMessage(out, 1, resource_spans);
  OpenMessage(out, 1, resource);
  WriteKeyValue(out, 1, "service.name", name);
  if (versioned) WriteKeyValue(out, 1, "service.version", version);
  OpenMessage(out, 2, scope_spans);
  OpenMessage(out, 1, scope);
  Bytes(out, 1, kScope);
  if (versioned) Bytes(out, 2, service_version);
  Raw(out, spans);
}

}  // namespace queuebox::telemetry
