// transform_test_request.cc: see transform_test_request.h. Needs nlohmann_json only.
#include "queuebox/transform/transform_test_request.h"

#include <cstdint>
#include <nlohmann/json.hpp>

namespace queuebox::transform {

std::optional<std::string> ParseTransformTestRequest(std::string_view body,
                                                     TransformTestRequest& r) {
  using Json = nlohmann::ordered_json;
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "the body is not a JSON document";
  if (!j.is_object()) return "the body must be a JSON object";
  auto expression = j.find("expression");
  if (expression == j.end()) return "field 'expression' is required";
  if (!expression->is_string()) return "field 'expression' must be a string";
  r.expression = expression->get<std::string>();
  auto payload = j.find("payload");
  if (payload == j.end()) return "field 'payload' is required";
  r.payload = payload->dump(-1, ' ', false, Json::error_handler_t::replace);
  for (const char* name : {"mockTopic", "mockSource"}) {
    auto f = j.find(name);
    if (f == j.end() || f->is_null()) continue;
    if (!f->is_string()) return std::string("field '") + name + "' must be a string";
    if (std::string_view(name) == "mockTopic") {
      r.topic = f->get<std::string>();
    } else {
      r.source = f->get<std::string>();
    }
  }
  auto timeout = j.find("timeoutMs");
  if (timeout != j.end() && !timeout->is_null()) {
    if (!timeout->is_number_integer()) return "field 'timeoutMs' must be an integer";
    if (timeout->is_number_unsigned() && timeout->get<uint64_t>() > INT64_MAX) {
      r.timeout_ms = INT64_MAX;
    } else {
      r.timeout_ms = timeout->get<int64_t>();
    }
    if (r.timeout_ms <= 0) return "field 'timeoutMs' must be greater than 0";
  }
  return std::nullopt;
}

}  // namespace queuebox::transform
