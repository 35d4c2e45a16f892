// transform_tester.h: the logic of POST /admin/transform/test (QueueBox reference §13.2): runs an
// expression against a sample payload with mock stage variables; sends and writes nothing.
//
// Request (JSON; unknown fields ignored):
//   {"expression": string (required), "payload": any JSON (required, null allowed),
//    "mockTopic": string (default "test.topic"), "mockSource": string (optional),
//    "timeoutMs": integer (default 100, clamped to admin.maxTransformTimeoutMs)}
// Variables: $messageId a random UUID, $topic mockTopic, $attempt 0, $timestamp now (ISO-8601),
// $source mockSource (bound only when given), no $headers. Depth limit 100.
//
// Answers (QueueBox's TransformTestResponse; fields that are unset are left out):
//   200 {"success":true,"result":<json>,"context":{"messageId":"<uuid>","topic":"<topic>",
//        "attempt":0,"timestamp":"<iso-8601>"}}   (no value from the expression: "result":null)
//   400 {"success":false,"error":"Invalid request: <reason>"}
//   400 {"success":false,"error":"Invalid expression: <JSONata code at position n: message>"}
//   400 {"success":false,"error":"<JSONata code at position n: message>"}  (evaluation, timeout)
// The server adds, in the same shape (ErrorAnswer): 413 "Request body exceeds <n> bytes" (the
// body is read under admin.maxPayloadBytes before auth) and 401 "<reason>" (admin.auth).
//
// Threads: evaluation runs on the tester's one evaluation thread (its own engine, joined by the
// destructor), never on the server's threads. Thread-safety: Handle may be called from any
// number of threads at once (requests are evaluated one at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "queuebox/transform/evaluation_threads.h"

namespace queuebox::transform {

struct TransformTestAnswer {
  int status = 200;
  std::string body;  // JSON, Content-Type application/json
};

class TransformTester {
 public:
  struct Options {
    int64_t max_transform_timeout_ms = 1000;  // admin.maxTransformTimeoutMs
    // Injectable for tests; defaults: a random UUID v4, and the system clock as ISO-8601 UTC
    // with microseconds.
    std::function<std::string()> new_message_id;
    std::function<std::string()> now_iso;
  };

  // Starts the evaluation thread (its engine loads on the first request).
  explicit TransformTester(Options options);
  ~TransformTester();
  TransformTester(const TransformTester&) = delete;
  TransformTester& operator=(const TransformTester&) = delete;

  // The answer to a request body (already read under admin.maxPayloadBytes and authenticated).
  TransformTestAnswer Handle(std::string_view request_body) const;

  // {"success":false,"error":"<error>"} with `status` (401, 413 from the server).
  static TransformTestAnswer ErrorAnswer(int status, std::string_view error);

 private:
  Options options_;
  std::unique_ptr<EvaluationThreads> thread_;
};

}  // namespace queuebox::transform
