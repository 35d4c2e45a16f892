// http_request_fuzz: the header lines the http destination builds for a row
// (HttpRequestHeaders, destinations/http/http_destination.h): the standard X-* headers from the
// row's id, topic, attempt and key, the static headers, the auth header and the row's `headers`
// JSON. No request is sent. The input is the row's headers text, a NUL, the topic, and, after a
// second NUL, the key; the attempt and whether an auth header is present follow the size.
// Properties: nothing throws; a row is refused exactly when a reference model of the rules
// refuses it, with a reason naming the field; otherwise the lines are the standard headers in
// order, then the static, auth and row headers with the later of each name (any case) winning,
// no line holds CR, LF or NUL, and each line reaches the wire under curl's rules ("Name;" for
// an empty value, never "Name:" followed only by blanks, which curl drops).
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "destinations/http/http_destination.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

namespace {

std::string LowerText(std::string_view v) {
  std::string out(v);
  for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return out;
}

bool Breaks(std::string_view s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos;
}

std::string Line(const std::string& name, const std::string& value) {
  return value.find_first_not_of(" \t\v\f") == std::string::npos ? name + ";" : name + ": " + value;
}

// The rules of http_destination.h, written out: the lines, or nullopt when the row is refused.
std::optional<std::vector<std::string>> Model(
    const queuebox::OutboxRow& row, const std::map<std::string, std::string>& statics,
    const std::optional<std::pair<std::string, std::string>>& auth) {
  if (Breaks(row.topic) || (row.key && Breaks(*row.key))) return std::nullopt;
  std::vector<std::string> lines = {"Content-Type: application/json", Line("X-Message-Id", row.id),
                                    Line("X-Topic", row.topic),
                                    Line("X-Attempt", std::to_string(row.attempt))};
  if (row.key) lines.push_back(Line("X-Message-Key", *row.key));
  auto j = nlohmann::ordered_json::parse(row.headers.empty() ? "{}" : row.headers, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> merged(statics.begin(), statics.end());
  auto put = [&merged](const std::string& name, const std::string& value) {
    std::erase_if(merged, [&](const auto& h) { return LowerText(h.first) == LowerText(name); });
    merged.emplace_back(name, value);
  };
  if (auth) put(auth->first, auth->second);
  for (const auto& [name, value] : j.items()) {
    if (!value.is_string() || queuebox::FramesTheRequest(LowerText(name))) return std::nullopt;
    put(name, value.get<std::string>());
  }
  for (const auto& [name, value] : merged) {
    if (name.empty() || Breaks(name) || name.find_first_of(":; ") != std::string::npos ||
        Breaks(value)) {
      return std::nullopt;
    }
    lines.push_back(Line(name, value));
  }
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t first = input.find('\0');
  queuebox::OutboxRow row;
  row.id = "0b6f5c1e-3d7a-4c2e-9f00-5a1d2c3b4e5f";
  row.headers = std::string(input.substr(0, first));
  row.attempt = static_cast<int>(size % 10);
  if (first != std::string_view::npos) {
    std::string_view rest = input.substr(first + 1);
    const size_t second = rest.find('\0');
    row.topic = std::string(rest.substr(0, second));
    if (second != std::string_view::npos) row.key = std::string(rest.substr(second + 1));
  } else {
    row.topic = "orders.created";
  }
  static const std::map<std::string, std::string> kStatic{{"X-Static", "1"}, {"X-Tenant", "t-1"}};
  std::optional<std::pair<std::string, std::string>> auth;
  if (size % 2 == 0) auth = std::make_pair(std::string("Authorization"), std::string("Bearer t"));

  queuebox::Result<std::vector<std::string>> lines =
      queuebox::HttpRequestHeaders(row, kStatic, auth);
  std::optional<std::vector<std::string>> expected = Model(row, kStatic, auth);
  Require(lines.ok() == expected.has_value(), "a row is refused exactly when the rules refuse it");
  if (!lines.ok()) {
    const std::string m = lines.status().message();
    Require(m.starts_with("topic") || m.starts_with("key") || m.starts_with("invalid"),
            "a refusal names its field");
    return 0;
  }
  Require(*lines == *expected, "the lines are the standard, static, auth and row headers");
  for (const std::string& line : *lines) {
    Require(!Breaks(line), "no header line holds CR, LF or NUL");
    // A name holds no ':', so the first one ends it; a line without one is "Name;".
    const size_t colon = line.find(':');
    Require(colon != std::string::npos
                ? line.find_first_not_of(" \t", colon + 1) != std::string::npos
                : line.back() == ';',
            "curl sends every line (\"Name;\", or a value that is not only blanks)");
  }
  return 0;
}
