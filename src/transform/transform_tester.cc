// transform_tester.cc: POST /admin/transform/test (see transform_tester.h).
#include "queuebox/transform/transform_tester.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "babelqueue/envelope.h"
#include "core/log.h"
#include "queuebox/transform/jsonata.h"
#include "queuebox/transform/stages.h"
#include "queuebox/transform/transform_test_request.h"

namespace queuebox::transform {
namespace {

using Json = nlohmann::ordered_json;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

TransformTestAnswer Failure(std::string_view error) {
  return TransformTester::ErrorAnswer(400, error);
}

std::string SystemNowIso() {
  auto now = std::chrono::system_clock::now();
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char frac[16];
  std::snprintf(frac, sizeof(frac), ".%06lldZ", static_cast<long long>(micros % 1000000));
  return std::string(buf) + frac;
}

std::string RandomMessageId() {
  Result<std::string> id = babelqueue::NewUuidV4();
  return id.ok() ? *id : std::string("00000000-0000-4000-8000-000000000000");
}

}  // namespace

TransformTester::TransformTester(Options options) : options_(std::move(options)) {
  if (!options_.new_message_id) options_.new_message_id = RandomMessageId;
  if (!options_.now_iso) options_.now_iso = SystemNowIso;
  thread_ = std::make_unique<EvaluationThreads>(1);
}

TransformTester::~TransformTester() = default;

TransformTestAnswer TransformTester::ErrorAnswer(int status, std::string_view error) {
  Json body = Json::object();
  body["success"] = false;
  body["error"] = std::string(error);
  return {status, Dump(body)};
}

TransformTestAnswer TransformTester::Handle(std::string_view request_body) const {
  TransformTestRequest r;
  if (std::optional<std::string> invalid = ParseTransformTestRequest(request_body, r)) {
    return Failure("Invalid request: " + *invalid);
  }
  // The caller cannot ask for an unbounded evaluation.
  const int64_t timeout_ms = std::min(r.timeout_ms, options_.max_transform_timeout_ms);
  const std::string message_id = options_.new_message_id();
  const std::string timestamp = InstantText(options_.now_iso());

  TransformTestAnswer answer;
  thread_->Run(1, [&](std::size_t) {
    Limits limits;
    limits.timeout = std::chrono::milliseconds(timeout_ms);
    TransformResult<Expression> compiled = Expression::Compile(r.expression, limits);
    if (!compiled.ok() && compiled.error().kind == ErrorKind::kEngine) {
      // The server's fault, not the expression's: the caller is not shown the module's paths.
      log::Error("POST /admin/transform/test: the JSONata engine is unavailable",
                 {{"error", compiled.error().message}});
      answer =
          TransformTester::ErrorAnswer(503, "The JSONata engine is unavailable on this server");
      return;
    }
    if (!compiled.ok()) {
      answer = Failure("Invalid expression: " + compiled.error().ToString());
      return;
    }
    Bindings vars;
    vars.SetString("messageId", message_id)
        .SetString("topic", r.topic)
        .SetInt("attempt", 0)
        .SetString("timestamp", timestamp);
    if (r.source) vars.SetString("source", *r.source);
    auto out = compiled.value().Evaluate(r.payload, vars);
    if (!out.ok()) {
      answer = Failure(out.error().ToString());
      return;
    }
    Json context = Json::object();
    context["messageId"] = message_id;
    context["topic"] = r.topic;
    context["attempt"] = 0;
    context["timestamp"] = timestamp;
    // The result's JSON text goes in as the engine wrote it (key order, number forms).
    answer.status = 200;
    answer.body = "{\"success\":true,\"result\":" + out.value().value_or("null") +
                  ",\"context\":" + Dump(context) + "}";
  });
  return answer;
}

}  // namespace queuebox::transform
