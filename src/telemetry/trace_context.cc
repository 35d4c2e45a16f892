#include "telemetry/trace_context.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

namespace queuebox::telemetry {
namespace {

constexpr size_t kTraceparentLength = 55;  // 2 + 1 + 32 + 1 + 16 + 1 + 2
constexpr size_t kMaxTracestateMembers = 32;
constexpr size_t kMaxTracestateLength = 512;

int LowerHexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is invalid (the specification's HEXDIGLC)
}

// Lowercase hex of 2 * n characters into `out`; false on any other character.
bool ReadHex(std::string_view text, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const int hi = LowerHexDigit(text[2 * i]), lo = LowerHexDigit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& id) {
  return std::all_of(id.begin(), id.end(), [](uint8_t b) { return b == 0; });
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsLcAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsKeyChar(char c) {
  return IsLcAlpha(c) || IsDigit(c) || c == '_' || c == '-' || c == '*' || c == '/';
}

// simple-key = lcalpha 0*255(keychar); multi-tenant-key = tenant-id "@" system-id with
// tenant-id = (lcalpha / DIGIT) 0*240(keychar), system-id = lcalpha 0*13(keychar).
bool ValidKey(std::string_view key) {
  const size_t at = key.find('@');
  if (at == std::string_view::npos) {
    if (key.empty() || key.size() > 256 || !IsLcAlpha(key[0])) return false;
    return std::all_of(key.begin(), key.end(), IsKeyChar);
  }
  std::string_view tenant = key.substr(0, at), system = key.substr(at + 1);
  if (tenant.empty() || tenant.size() > 241 || system.empty() || system.size() > 14) return false;
  if (!IsLcAlpha(tenant[0]) && !IsDigit(tenant[0])) return false;
  if (!IsLcAlpha(system[0])) return false;
  return std::all_of(tenant.begin(), tenant.end(), IsKeyChar) &&
         std::all_of(system.begin(), system.end(), IsKeyChar);
}

// value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = %x21-2B / %x2D-3C / %x3E-7E
bool ValidValue(std::string_view value) {
  if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
  return std::all_of(value.begin(), value.end(),
                     [](char c) { return c >= 0x20 && c <= 0x7e && c != ',' && c != '='; });
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::mt19937_64& Generator() {
  thread_local std::mt19937_64 generator{[] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }()};
  return generator;
}

template <size_t N>
std::array<uint8_t, N> RandomId() {
  std::array<uint8_t, N> id{};
  do {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t r = Generator()();
      for (size_t j = i; j < std::min(N, i + 8); ++j, r >>= 8) id[j] = static_cast<uint8_t>(r);
    }
  } while (AllZero(id));
  return id;
}

}  // namespace

std::optional<TraceContext> ParseTraceparent(std::string_view value) {
  value = TrimOws(value);
  if (value.size() < kTraceparentLength) return std::nullopt;
  uint8_t version = 0;
  if (!ReadHex(value, &version, 1) || version == 0xff) return std::nullopt;
  if (version == 0 && value.size() != kTraceparentLength) return std::nullopt;
  if (value.size() > kTraceparentLength && value[kTraceparentLength] != '-') return std::nullopt;
  if (value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
  TraceContext out;
  if (!ReadHex(value.substr(3), out.trace_id.data(), 16) ||
      !ReadHex(value.substr(36), out.span_id.data(), 8) ||
      !ReadHex(value.substr(53), &out.flags, 1)) {
    return std::nullopt;
  }
  if (AllZero(out.trace_id) || AllZero(out.span_id)) return std::nullopt;
  // Version 00 defines only the sampled bit; a later version's other bits are not ours to pass.
  out.flags &= kSampled;
  return out;
}

bool ValidTracestate(std::string_view value) {
  if (value.size() > kMaxTracestateLength) return false;
  std::vector<std::string_view> keys;
  size_t members = 0;
  while (true) {
    const size_t comma = value.find(',');
    std::string_view member = TrimOws(value.substr(0, comma));
    if (!member.empty()) {
      const size_t eq = member.find('=');
      if (eq == std::string_view::npos) return false;
      std::string_view key = member.substr(0, eq);
      if (!ValidKey(key) || !ValidValue(member.substr(eq + 1))) return false;
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) return false;
      keys.push_back(key);
      if (++members > kMaxTracestateMembers) return false;
    }
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return members > 0;
}

std::string Hex(const uint8_t* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0x0f];
  }
  return out;
}

std::string FormatTraceparent(const TraceId& trace_id, const SpanId& span_id, uint8_t flags) {
  // Written in place: one allocation, no temporary per id (this runs once per traced delivery).
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(kTraceparentLength, '-');
  char* p = out.data();
  auto hex = [&p](const uint8_t* bytes, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      *p++ = kDigits[bytes[i] >> 4];
      *p++ = kDigits[bytes[i] & 0x0f];
    }
  };
  *p++ = '0';
  *p++ = '0';
  ++p;  // '-'
  hex(trace_id.data(), trace_id.size());
  ++p;
  hex(span_id.data(), span_id.size());
  ++p;
  hex(&flags, 1);
  return out;
}

bool IsTraceHeader(std::string_view name) {
  return EqualsIgnoreCase(name, kTraceparent) || EqualsIgnoreCase(name, kTracestate);
}

std::optional<TraceContext> FromHeaders(
    const std::vector<std::pair<std::string, std::string>>& headers) {
  const std::string* parent = nullptr;
  const std::string* state = nullptr;
  for (const auto& [name, value] : headers) {
    if (EqualsIgnoreCase(name, kTraceparent)) parent = &value;
    if (EqualsIgnoreCase(name, kTracestate)) state = &value;
  }
  if (parent == nullptr) return std::nullopt;
  std::optional<TraceContext> out = ParseTraceparent(*parent);
  // The specification: no tracestate without a valid traceparent; an invalid one is dropped.
  if (out && state != nullptr && ValidTracestate(*state)) out->tracestate = std::string(*state);
  return out;
}

std::optional<TraceContext> FromHeadersJson(std::string_view headers_json) {
  // Most rows carry no trace context: find the name before parsing anything.
  auto it = std::search(
      headers_json.begin(), headers_json.end(), kTraceparent.begin(), kTraceparent.end(),
      [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  if (it == headers_json.end()) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(headers_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& [name, value] : j.items()) {
    if (value.is_string() && IsTraceHeader(name))
      pairs.emplace_back(name, value.get<std::string>());
  }
  return FromHeaders(pairs);
}

TraceId NewTraceId() { return RandomId<16>(); }
SpanId NewSpanId() { return RandomId<8>(); }

}  // namespace queuebox::telemetry
