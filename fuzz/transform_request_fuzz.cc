// transform_request_fuzz: the request body of POST /admin/transform/test
// (queuebox/transform/transform_test_request.h), read as the admin server hands it to the
// tester: after admin.maxPayloadBytes and admin.auth (webhook_auth covers those). The engine that
// evaluates the expression is not in the fuzz build; the parse is one file without it.
// Properties: nothing throws; a body is accepted only when it is a JSON object with a string
// `expression` and a `payload`, optional string `mockTopic`/`mockSource` and a positive integer
// `timeoutMs`, and the request holds exactly those values (the payload as JSON text that reads
// back as the same value); a refusal is one of the documented reasons.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "queuebox/transform/transform_test_request.h"

using queuebox::fuzz::Require;
using Json = nlohmann::ordered_json;

namespace {

bool Documented(const std::string& reason) {
  for (const char* r :
       {"the body is not a JSON document", "the body must be a JSON object",
        "field 'expression' is required", "field 'expression' must be a string",
        "field 'payload' is required", "field 'mockTopic' must be a string",
        "field 'mockSource' must be a string", "field 'timeoutMs' must be an integer",
        "field 'timeoutMs' must be greater than 0"}) {
    if (reason == r) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  queuebox::transform::TransformTestRequest r;
  std::optional<std::string> invalid = queuebox::transform::ParseTransformTestRequest(body, r);
  Json j = Json::parse(body, nullptr, false);
  if (invalid) {
    Require(Documented(*invalid), "a refusal is a documented reason");
    Require((*invalid == "the body is not a JSON document") == j.is_discarded(),
            "only text that is not JSON is called not JSON");
    return 0;
  }
  Require(j.is_object(), "an accepted body is a JSON object");
  Require(j.contains("expression") && j["expression"].is_string() &&
              r.expression == j["expression"].get<std::string>(),
          "the expression is the body's string");
  Require(j.contains("payload"), "an accepted body has a payload");
  Json payload = Json::parse(r.payload, nullptr, false);
  Require(!payload.is_discarded() && payload == j["payload"],
          "the payload text reads back as the body's payload");
  const Json topic = j.contains("mockTopic") ? j["mockTopic"] : Json();
  Require(topic.is_null() ? r.topic == "test.topic" : r.topic == topic.get<std::string>(),
          "the topic is mockTopic or test.topic");
  const Json source = j.contains("mockSource") ? j["mockSource"] : Json();
  Require(source.is_null() ? !r.source : r.source == source.get<std::string>(),
          "the source is mockSource when given");
  Require(r.timeout_ms > 0, "an accepted timeout is positive");
  const Json timeout = j.contains("timeoutMs") ? j["timeoutMs"] : Json();
  if (timeout.is_null()) {
    Require(r.timeout_ms == 100, "the default timeout is 100 ms");
  } else {
    Require(timeout.is_number_integer(), "an accepted timeout is an integer");
    if (timeout.is_number_unsigned()) {
      const uint64_t t = timeout.get<uint64_t>();
      Require(static_cast<uint64_t>(r.timeout_ms) == (t > INT64_MAX ? INT64_MAX : t),
              "a timeout past int64 is clamped, never wrapped");
    } else {
      Require(r.timeout_ms == timeout.get<int64_t>(), "the timeout is the body's");
    }
  }
  return 0;
}
