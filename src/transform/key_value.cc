// key_value.cc: reference §11.4, the value of a key expression's result.
#include <cmath>
#include <nlohmann/json.hpp>

#include "queuebox/transform/jsonata.h"

namespace queuebox::transform {
namespace {

bool IsBlank(const std::string& s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> KeyValueFromJson(std::string_view json) {
  const nlohmann::json value = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  if (value.is_string()) {
    std::string s = value.get<std::string>();
    if (IsBlank(s)) return std::nullopt;
    return s;
  }
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_integer()) return value.dump();
  if (value.is_number_float()) {
    const double d = value.get<double>();
    // Whole numbers print without a decimal point (515725.0 -> "515725").
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.2e18) {
      return std::to_string(static_cast<long long>(d));
    }
    // Otherwise as the engine printed it (1.5, 1e+21).
    const std::size_t first = json.find_first_not_of(" \t\r\n");
    const std::size_t last = json.find_last_not_of(" \t\r\n");
    return std::string(json.substr(first, last - first + 1));
  }
  return std::nullopt;  // object, array, null
}

std::optional<std::string> KeyValue(const TransformResult<std::optional<std::string>>& result) {
  if (!result.ok() || !result.value().has_value()) return std::nullopt;
  return KeyValueFromJson(*result.value());
}

}  // namespace queuebox::transform
