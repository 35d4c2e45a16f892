// header_filter_fuzz: a source's header filter (core/header_filter.h). The input is a JSON
// filter block, a NUL byte, then the message's headers as "Name: value" lines.
// Properties: Parse succeeds exactly when Problems is empty; FirstFailure never throws and
// names a rule, not a value; an empty filter passes every message.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/header_filter.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool SameName(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t nul = input.find('\0');
  std::string_view block_text = input.substr(0, nul);
  std::string_view header_text = nul == std::string_view::npos ? "" : input.substr(nul + 1);

  nlohmann::json block = nlohmann::json::parse(block_text, nullptr, false);
  if (block.is_discarded()) return 0;
  std::vector<std::pair<std::string, std::string>> headers;
  while (!header_text.empty()) {
    size_t end = header_text.find('\n');
    std::string_view line = header_text.substr(0, end);
    header_text = end == std::string_view::npos ? "" : header_text.substr(end + 1);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  }

  queuebox::Result<queuebox::HeaderFilter> filter = queuebox::HeaderFilter::Parse(block);
  std::vector<std::string> problems = queuebox::HeaderFilter::Problems(block);
  Require(filter.ok() == problems.empty(), "Parse succeeds exactly when Problems is empty");
  if (!filter.ok()) return 0;
  queuebox::HeaderFilter::Lookup lookup =
      [&headers](std::string_view name) -> std::optional<std::string> {
    for (const auto& [n, v] : headers) {
      if (SameName(n, name)) return v;
    }
    return std::nullopt;
  };
  std::optional<std::string> failure = filter->FirstFailure(lookup);
  if (filter->empty()) Require(!failure.has_value(), "an empty filter passes every message");
  if (failure) {
    Require(failure->starts_with("require[") || failure->starts_with("exclude["),
            "a failure names its rule");
  }
  return 0;
}
