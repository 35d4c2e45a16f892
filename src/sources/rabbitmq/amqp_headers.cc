#include "sources/rabbitmq/amqp_headers.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string_view>

#include "sources/broker_intake.h"

namespace queuebox::sources {
namespace {

using Json = nlohmann::ordered_json;

std::string_view View(amqp_bytes_t b) {
  return b.len == 0 ? std::string_view()
                    : std::string_view(static_cast<const char*>(b.bytes), b.len);
}

// Shortest text that reads back as the same value ("0.1", "1e+300").
template <typename F>
std::string FloatText(F f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(f);
}

// value × 10^-decimals as decimal text: (2, 12345) -> "123.45", (3, -5) -> "-0.005".
std::string DecimalText(amqp_decimal_t d) {
  const int32_t signed_value = static_cast<int32_t>(d.value);
  std::string digits = std::to_string(signed_value < 0 ? -static_cast<int64_t>(signed_value)
                                                       : static_cast<int64_t>(signed_value));
  const std::string sign = signed_value < 0 ? "-" : "";
  if (d.decimals == 0) return sign + digits;
  const size_t scale = d.decimals;
  // Built by appending (string::insert trips g++ 12's -Wrestrict false positive at -O2).
  if (digits.size() <= scale) digits = std::string(scale - digits.size() + 1, '0') + digits;
  const size_t point = digits.size() - scale;
  return sign + digits.substr(0, point) + "." + digits.substr(point);
}

// Seconds since the epoch as "YYYY-MM-DDTHH:MM:SSZ"; the number when it is no calendar time.
std::string TimestampText(uint64_t seconds) {
  if (seconds > static_cast<uint64_t>(253402300799)) return std::to_string(seconds);  // > 9999
  std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return std::to_string(seconds);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Json FieldJson(const amqp_field_value_t& v);

Json TableJson(const amqp_table_t& table) {
  Json out = Json::object();
  for (int i = 0; i < table.num_entries; ++i) {
    out[HeaderText(View(table.entries[i].key))] = FieldJson(table.entries[i].value);
  }
  return out;
}

Json FieldJson(const amqp_field_value_t& v) {
  switch (v.kind) {
    case AMQP_FIELD_KIND_BOOLEAN:
      return v.value.boolean != 0;
    case AMQP_FIELD_KIND_I8:
      return v.value.i8;
    case AMQP_FIELD_KIND_U8:
      return v.value.u8;
    case AMQP_FIELD_KIND_I16:
      return v.value.i16;
    case AMQP_FIELD_KIND_U16:
      return v.value.u16;
    case AMQP_FIELD_KIND_I32:
      return v.value.i32;
    case AMQP_FIELD_KIND_U32:
      return v.value.u32;
    case AMQP_FIELD_KIND_I64:
      return v.value.i64;
    case AMQP_FIELD_KIND_U64:
      return v.value.u64;
    case AMQP_FIELD_KIND_F32:
      if (!std::isfinite(v.value.f32)) return FloatText(v.value.f32);
      return v.value.f32;
    case AMQP_FIELD_KIND_F64:
      if (!std::isfinite(v.value.f64)) return FloatText(v.value.f64);
      return v.value.f64;
    case AMQP_FIELD_KIND_DECIMAL:
      // JSON number text, exactly as the decimal reads.
      return Json::parse(DecimalText(v.value.decimal), nullptr, false);
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES:
      return HeaderText(View(v.value.bytes));
    case AMQP_FIELD_KIND_TIMESTAMP:
      return TimestampText(v.value.u64);
    case AMQP_FIELD_KIND_TABLE:
      return TableJson(v.value.table);
    case AMQP_FIELD_KIND_ARRAY: {
      Json out = Json::array();
      for (int i = 0; i < v.value.array.num_entries; ++i) {
        out.push_back(FieldJson(v.value.array.entries[i]));
      }
      return out;
    }
    default:  // AMQP_FIELD_KIND_VOID
      return nullptr;
  }
}

}  // namespace

std::optional<std::string> AmqpFieldText(const amqp_field_value_t& v) {
  switch (v.kind) {
    case AMQP_FIELD_KIND_BOOLEAN:
      return v.value.boolean != 0 ? "true" : "false";
    case AMQP_FIELD_KIND_I8:
      return std::to_string(v.value.i8);
    case AMQP_FIELD_KIND_U8:
      return std::to_string(v.value.u8);
    case AMQP_FIELD_KIND_I16:
      return std::to_string(v.value.i16);
    case AMQP_FIELD_KIND_U16:
      return std::to_string(v.value.u16);
    case AMQP_FIELD_KIND_I32:
      return std::to_string(v.value.i32);
    case AMQP_FIELD_KIND_U32:
      return std::to_string(v.value.u32);
    case AMQP_FIELD_KIND_I64:
      return std::to_string(v.value.i64);
    case AMQP_FIELD_KIND_U64:
      return std::to_string(v.value.u64);
    case AMQP_FIELD_KIND_F32:
      return FloatText(v.value.f32);
    case AMQP_FIELD_KIND_F64:
      return FloatText(v.value.f64);
    case AMQP_FIELD_KIND_DECIMAL:
      return DecimalText(v.value.decimal);
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES:
      return HeaderText(View(v.value.bytes));
    case AMQP_FIELD_KIND_TIMESTAMP:
      return TimestampText(v.value.u64);
    case AMQP_FIELD_KIND_TABLE:
    case AMQP_FIELD_KIND_ARRAY:
      // Every string inside is UTF-8 (HeaderText); `replace` is the last guard against a throw.
      return FieldJson(v).dump(-1, ' ', false, Json::error_handler_t::replace);
    default:  // AMQP_FIELD_KIND_VOID
      return std::nullopt;
  }
}

std::vector<std::pair<std::string, std::string>> AmqpHeaderStrings(const amqp_table_t& table) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(static_cast<size_t>(table.num_entries));
  for (int i = 0; i < table.num_entries; ++i) {
    std::optional<std::string> text = AmqpFieldText(table.entries[i].value);
    if (text) out.emplace_back(HeaderText(View(table.entries[i].key)), std::move(*text));
  }
  return out;
}

}  // namespace queuebox::sources
