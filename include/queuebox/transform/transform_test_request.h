// transform_test_request.h: the request body of POST /admin/transform/test (transform_tester.h),
// read apart from evaluation so it builds and is fuzzed without the engine
// (fuzz/transform_request_fuzz.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace queuebox::transform {

struct TransformTestRequest {
  std::string expression;
  std::string payload;  // JSON text
  std::string topic = "test.topic";
  std::optional<std::string> source;
  int64_t timeout_ms = 100;  // QueueBox's DEFAULT_TRANSFORM_TIMEOUT_MS; unclamped
};

// Fills `r` from `body`; nullopt when it is a valid request, else the <reason> of
// "Invalid request: <reason>".
std::optional<std::string> ParseTransformTestRequest(std::string_view body,
                                                     TransformTestRequest& r);

}  // namespace queuebox::transform
