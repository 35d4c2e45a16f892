// transform_engine_fuzz: the JSONata engine (SpiderMonkey in libqueuebox_jsonata.so, loaded by
// qb_transform) through the three request paths that evaluate a transform, on a fuzzed
// expression, payload, topic, text (a source name, a row id, a clock reading) and headers:
//   admin   POST /admin/transform/test: a request body built from the input (the body's own
//           parse is transform_request's) through TransformTester::Handle, on its evaluation
//           thread, with admin.maxTransformTimeoutMs kMaxTimeoutMs;
//   relay   a route stage `$` then a destination stage with the fuzzed expression and onError
//           through ApplyDeliveryStages, the row as the relay claims it (payload, topic and id
//           bytes as a store may hold them, UTF-8 or not);
//   source  the fuzzed expression as a source transform through ApplySourceStage, with $headers,
//           $idempotencyKey and $eventType.
// The input: expression, payload, topic, text and header names and values as
// FuzzedDataProvider random-length strings; from the end, the path, the timeout, the depth, the
// onError strategy and the attempt (fuzz/transform_engine_seeds.py writes the seeds).
// Properties: nothing crashes or hangs; an evaluation gives JSON that the destinations accept
// (nlohmann's strict reading, which IsJsonDocument falls back to) or a documented error (a
// JSONata code S/T/D/U + 4 digits, the timeout, depth and memory texts of jsonata.h, "not JSON"
// or "not UTF-8" where the input or a binding is not, or the TypeError/RangeError that jsonata's
// own functions throw on some arguments, as under Node); a compile error is kSyntax with an S0
// code, or names text that is not UTF-8, never kEngine (the admin route answers 400 "Invalid
// expression", never 503); a timeout names its limit (the clamped one for the admin route) and
// comes no earlier than the limit, and the process spent at most the limits plus kCpuSlackMs of
// CPU; each strategy does what stages.h and source_stage.h say (Skip delivers or stores its input
// exactly); and the known-good expressions give exact values: `$` is the payload (as
// JSON.stringify(JSON.parse(payload)) reads back) wherever nlohmann reads the payload, and the
// stage variables are the row's, the request's or the message's, byte for byte.
// Leaks: LeakSanitizer checks at exit only (scripts/fuzz.sh runs this target with
// -detect_leaks=0, fuzz/transform_engine.flags): SpiderMonkey frees at garbage collections, not
// per input, so libFuzzer's per-input check would scan the heap after nearly every input.
#include <fuzzer/FuzzedDataProvider.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/log.h"
#include "fuzz_util.h"
#include "queuebox/transform/jsonata.h"
#include "queuebox/transform/source_stage.h"
#include "queuebox/transform/stages.h"
#include "queuebox/transform/transform_tester.h"

using queuebox::fuzz::Require;
using Json = nlohmann::ordered_json;
using Doc = nlohmann::json;  // for comparing: object keys sorted, as JavaScript's order may not be
namespace t = queuebox::transform;

namespace {

constexpr int64_t kMaxTimeoutMs = 100;  // the tester's admin.maxTransformTimeoutMs
constexpr std::chrono::milliseconds kKnownTimeout{2000};  // known-good expressions
constexpr int64_t kCpuSlackMs = 3000;  // compile, the garbage collection after an abort, helpers
const char* const kMessageId = "0b8f1c9e-4c43-4d2e-9a57-5f0e4f6a1b2c";

// Require, printing what was seen first when the property is broken.
void Expect(bool holds, const char* property, const std::string& seen) {
  if (!holds) std::fprintf(stderr, "seen: %s\n", seen.c_str());
  Require(holds, property);
}

// Coverage of outcomes the JavaScript side decides (its branches are not instrumented): each
// distinct outcome (path, error code or result type and size class) is a counter libFuzzer keeps.
__attribute__((section("__libfuzzer_extra_counters"))) uint8_t outcome_counters[4096];

void Saw(std::string_view path, std::string_view what, size_t size = 0) {
  size_t log2 = 0;
  for (; size > 1; size >>= 1) ++log2;
  const size_t h = std::hash<std::string>()(std::string(path) + "/" + std::string(what) + "/" +
                                            std::to_string(log2));
  uint8_t& c = outcome_counters[h % sizeof outcome_counters];
  if (c < 255) ++c;
}

struct Input {
  std::string expression, payload, topic, text;
  std::vector<std::pair<std::string, std::string>> headers;
  uint8_t path = 0, timeout = 0, depth = 0, strategy = 0;
  int attempt = 0;
};

Input Read(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Input i;
  i.path = in.ConsumeIntegral<uint8_t>();
  i.timeout = in.ConsumeIntegral<uint8_t>();
  i.depth = in.ConsumeIntegral<uint8_t>();
  i.strategy = in.ConsumeIntegral<uint8_t>();
  i.attempt = in.ConsumeIntegralInRange<int>(0, 1000);
  i.expression = in.ConsumeRandomLengthString(2048);
  i.payload = in.ConsumeRandomLengthString(2048);
  i.topic = in.ConsumeRandomLengthString(256);
  i.text = in.ConsumeRandomLengthString(256);
  while (in.remaining_bytes() > 0 && i.headers.size() < 8) {
    std::string name = in.ConsumeRandomLengthString(64);
    i.headers.emplace_back(std::move(name), in.ConsumeRandomLengthString(256));
  }
  return i;
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// `s` as valid UTF-8 (bytes that are not become U+FFFD, as nlohmann writes them).
std::string Utf8(const std::string& s) { return Json::parse(Dump(Json(s))).get<std::string>(); }

// A JSON value for comparing with the engine's: numbers as doubles (JavaScript's), a number out
// of range as null (JSON.stringify of Infinity).
Doc Normal(const Doc& j) {
  if (j.is_number()) {
    const double d = j.get<double>();
    return std::isfinite(d) ? Doc(d) : Doc();
  }
  Doc out = j;
  if (j.is_array() || j.is_object()) {
    for (auto& [k, v] : j.items()) {
      if (j.is_array()) {
        out[std::stoul(k)] = Normal(v);
      } else {
        out[k] = Normal(v);
      }
    }
  }
  return out;
}

std::optional<Doc> Parsed(std::string_view text) {
  // nlohmann's lexer ends at a NUL; the relay's JSON checks refuse one (IsJsonDocument).
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  Doc d = Doc::parse(text, nullptr, false);
  if (d.is_discarded()) return std::nullopt;
  return Normal(d);
}

bool HasCode(std::string_view s, char family) {
  if (s.size() < 7 || s[0] != family) return false;
  for (size_t i = 1; i < 5; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return s.compare(5, 2, ": ") == 0 || s.compare(5, 13, " at position ") == 0;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// An evaluation error's text as jsonata.h documents it; `timeout_ms` is the limit in force.
bool Documented(std::string_view e, int64_t timeout_ms) {
  if (StartsWith(e, "D1012")) {
    return e == "D1012: The evaluation ran longer than " + std::to_string(timeout_ms) +
                    " ms and was stopped";
  }
  for (char family : {'S', 'T', 'D', 'U'}) {
    if (HasCode(e, family)) return true;
  }
  // jsonata's own functions throw plain JavaScript errors on some arguments (as under Node:
  // `$formatInteger(1, undefined)` is "TypeError: ...", `$pad("x", 1e10)` "RangeError: ..."):
  // kEngine, "failed in a way JSONata does not describe", with the error's text.
  return StartsWith(e, "TypeError: ") || StartsWith(e, "RangeError: ") ||
         StartsWith(e, "The evaluation ran out of the engine's heap (") ||
         StartsWith(e, "The evaluation used more than ") ||
         (StartsWith(e, "The result is ") &&
          e.find(" characters, over the limit of ") != std::string_view::npos);
}

int64_t CpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Times one call: wall and process CPU milliseconds.
struct Timer {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  int64_t cpu = CpuMs();
  int64_t WallMs() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 wall)
        .count();
  }
  int64_t UsedCpuMs() const { return CpuMs() - cpu; }
};

// The checks every failed evaluation passes: documented, and a timeout only after its limit.
void CheckError(std::string_view path, const std::string& e, int64_t timeout_ms,
                const Timer& timer) {
  Saw(path, e.substr(0, 5));
  Expect(Documented(e, timeout_ms), "an evaluation error is documented", e);
  if (StartsWith(e, "D1012")) Require(timer.WallMs() >= timeout_ms, "no timeout before the limit");
}

void CheckCpu(const Timer& timer, int64_t limits_ms) {
  Require(timer.UsedCpuMs() <= limits_ms + kCpuSlackMs, "the timeouts bound the CPU spent");
}

// A result: JSON the destinations accept.
void CheckResult(std::string_view path, const std::string& text) {
  const bool json = Doc::accept(text);
  Saw(path, text.empty() ? "empty" : text.substr(0, 1), text.size());
  Require(json, "a result is one JSON document as the destinations read it");
}

// ---- the admin route -------------------------------------------------------------------------

std::string iso_now;  // the tester's clock: the input's text

// The tester; LLVMFuzzerInitialize creates it, and the process's exit joins its evaluation thread
// (its engine with it) before the engine module's exit handler, which shuts SpiderMonkey down
// only when no engine is left (libmozjs's own destructors crash otherwise).
t::TransformTester* tester = nullptr;

const t::TransformTester& Tester() { return *tester; }

// Sends `request`; the parsed answer (the checks of every answer done).
Json Ask(const Json& request, int64_t timeout_ms, Timer* timer = nullptr) {
  Timer local;
  t::TransformTestAnswer a = Tester().Handle(Dump(request));
  if (timer != nullptr) *timer = local;
  Require(a.status == 200 || a.status == 400, "the admin route answers 200 or 400, never 503");
  Json body = Json::parse(a.body, nullptr, false);
  Require(body.is_object() && body.contains("success") && body["success"].is_boolean() &&
              body["success"].get<bool>() == (a.status == 200),
          "the answer is a JSON object whose success is its status");
  if (a.status == 200) {
    Json context = {{"messageId", kMessageId},
                    {"topic", request["mockTopic"]},
                    {"attempt", 0},
                    {"timestamp", t::InstantText(iso_now)}};
    Require(body.size() == 3 && body.contains("result") && body["context"] == context,
            "a success holds the result and the request's context");
  } else {
    Require(body.size() == 2 && body.contains("error") && body["error"].is_string(),
            "a failure holds an error text");
    const std::string e = body["error"].get<std::string>();
    Require(!StartsWith(e, "Invalid request:"), "a valid request is never refused as invalid");
    if (StartsWith(e, "Invalid expression: ")) {
      const std::string why = e.substr(20);
      Expect(HasCode(why, 'S') || StartsWith(why, "SyntaxError: ") ||
                 StartsWith(why, "D1011: The engine's stack ran out (") ||
                 why == "D1012: The evaluation ran longer than " + std::to_string(timeout_ms) +
                            " ms and was stopped",
             "an expression that does not compile is a syntax error", e);
    } else {
      CheckError("admin", e, timeout_ms, local);
    }
  }
  return body;
}

void Admin(const Input& in) {
  iso_now = Utf8(in.text);
  Json request = {{"expression", in.expression}, {"mockTopic", in.topic}};
  Json payload = Json::parse(in.payload, nullptr, false);
  request["payload"] = payload.is_discarded() ? Json(in.payload) : payload;
  if (in.strategy & 1) request["mockSource"] = in.text;
  // Up to 2.5 times the maximum: the tester clamps it.
  const int64_t asked = 1 + (in.timeout * kMaxTimeoutMs) / 100;
  request["timeoutMs"] = asked;
  request = Json::parse(Dump(request));  // what the tester reads (bad UTF-8 replaced)
  const int64_t timeout_ms = std::min(asked, kMaxTimeoutMs);
  Timer timer;
  Json answer = Ask(request, timeout_ms, &timer);
  CheckCpu(timer, 2 * timeout_ms);
  if (answer["success"].get<bool>()) CheckResult("admin", Dump(answer["result"]));

  // Known good: `$` is the payload, and the variables are the request's.
  request["timeoutMs"] = kKnownTimeout.count();
  request["expression"] = "$";
  answer = Ask(request, kMaxTimeoutMs);
  if (answer["success"].get<bool>()) {
    Require(Parsed(Dump(answer["result"])) == Parsed(Dump(request["payload"])),
            "`$` gives the request's payload");
  } else {
    Require(StartsWith(answer["error"].get<std::string>(), "D1012"), "`$` evaluates");
  }
  request["expression"] = "[$topic, $attempt, $messageId, $timestamp, $source]";
  answer = Ask(request, kMaxTimeoutMs);
  if (answer["success"].get<bool>()) {
    Json expected = {request["mockTopic"], 0, kMessageId, t::InstantText(iso_now)};
    if (request.contains("mockSource")) expected.push_back(request["mockSource"]);
    Require(answer["result"] == expected, "the variables are the request's");
  } else {
    Require(StartsWith(answer["error"].get<std::string>(), "D1012"), "the variables evaluate");
  }
}

// ---- the relay's stages ----------------------------------------------------------------------

const t::OnError kStrategies[] = {t::OnError::kFail, t::OnError::kSkip, t::OnError::kDead};

t::Limits FuzzedLimits(const Input& in) {
  return t::Limits{std::chrono::milliseconds(1 + in.timeout % 64), 1 + in.depth % 160};
}

// A compile that failed: a syntax error (or a timeout), never the engine's.
void CheckCompileError(std::string_view path, const std::string& text, const t::TransformError& e,
                       const t::Limits& limits) {
  Saw(path, "compile/" + e.code);
  if (!queuebox::fuzz::ValidUtf8(text)) {
    Require(e.kind == t::ErrorKind::kInvalidArgument &&
                StartsWith(e.message, "The expression is not UTF-8 (byte "),
            "an expression that is not UTF-8 is named so");
    return;
  }
  Expect(e.kind != t::ErrorKind::kEngine, "a compile error is never the engine's", e.ToString());
  if (e.kind == t::ErrorKind::kTimeout) {
    Require(e.ToString() == "D1012: The evaluation ran longer than " +
                                std::to_string(limits.timeout.count()) + " ms and was stopped",
            "a compile timeout names its limit");
    return;
  }
  if (e.kind == t::ErrorKind::kDepth) {
    Require(StartsWith(e.ToString(), "D1011: The engine's stack ran out ("),
            "a compile that runs out of stack says so");
    return;
  }
  Expect(e.kind == t::ErrorKind::kSyntax &&
             ((HasCode(e.ToString(), 'S') && StartsWith(e.code, "S0")) ||
              (e.code.empty() && StartsWith(e.message, "SyntaxError: "))),
         "a compile error is an S0 syntax error or a regular expression's SyntaxError",
         std::string(t::ErrorKindName(e.kind)) + " " + e.ToString());
}

// `$` on `payload` with `bindings`, on this thread's engine: nlohmann's reading of the payload
// when it has one (or a timeout), else an error saying it is not JSON. Gives the result.
std::optional<std::string> CheckDollar(std::string_view path, const t::Expression& dollar,
                                       const std::string& payload, const t::Bindings& bindings,
                                       bool bindings_utf8, bool* timed_out = nullptr) {
  auto out = dollar.Evaluate(payload, bindings);
  if (!bindings_utf8 || !queuebox::fuzz::ValidUtf8(payload)) {
    Expect(!out.ok() && out.error().kind == t::ErrorKind::kInvalidArgument &&
               StartsWith(out.error().message, "The input or a binding is not JSON: ") &&
               out.error().message.find(" is not UTF-8") != std::string::npos,
           "text that is not UTF-8 is named so",
           out.ok() ? out.value().value_or("(no value)") : out.error().ToString());
    return std::nullopt;
  }
  // No input (a byte order mark before it is skipped): no value, which the relay delivers as null.
  if (payload.empty() || payload == "\xEF\xBB\xBF") {
    Require(out.ok() ? !out.value().has_value() : out.error().kind == t::ErrorKind::kTimeout,
            "`$` without a payload has no value");
    return std::string("null");
  }
  const std::optional<Doc> model = Parsed(payload);
  if (out.ok()) {
    Require(out.value().has_value(), "`$` has a value");
    CheckResult(path, *out.value());
    Require(!model || Parsed(*out.value()) == model, "`$` gives the payload");
    return out.value();
  }
  const t::TransformError& e = out.error();
  Saw(path, "dollar/" + std::string(t::ErrorKindName(e.kind)));
  if (e.kind == t::ErrorKind::kTimeout) {
    if (timed_out != nullptr) *timed_out = true;
    return std::nullopt;
  }
  Expect(!model, "`$` evaluates wherever nlohmann reads the payload", e.ToString());
  Expect(e.kind == t::ErrorKind::kInvalidArgument &&
             StartsWith(e.message, "The input or a binding is not JSON"),
         "a payload that is not JSON is named so",
         std::string(t::ErrorKindName(e.kind)) + " " + e.ToString());
  return std::nullopt;
}

queuebox::OutboxRow Row(const Input& in) {
  queuebox::OutboxRow row;
  row.id = in.text;
  row.topic = in.topic;
  row.payload = in.payload;
  row.attempt = in.attempt;
  row.created_at = in.headers.empty() ? "2026-12-06T02:00:00.120000Z" : in.headers[0].second;
  return row;
}

// What ApplyDeliveryStages gives for a route `$` (Skip) and a destination stage `stage`, when
// `$` gave `route_out` (nullopt: it failed, so the route's Skip delivers the payload as is;
// `route_timed_out`: it ran out of time, which may not happen again).
void CheckStages(const queuebox::OutboxRow& row, const t::Stage& route, const t::Stage& stage,
                 const std::optional<std::string>& route_out, bool route_timed_out) {
  Timer timer;
  t::StageResult r = t::ApplyDeliveryStages(&route, &stage, row);
  CheckCpu(timer, kKnownTimeout.count() + stage.expression.limits().timeout.count());
  using Kind = t::StageResult::Kind;
  if (r.failed_strategy.empty()) {
    Require(r.kind == Kind::kDeliver && r.body.has_value(), "a stage's success delivers a body");
    Require(route_out || route_timed_out, "a payload `$` fails on fails the route");
    CheckResult("relay", *r.body);
    return;
  }
  if (r.failed_strategy == "skip" && !r.body) {
    // The route's Skip (`$` did not evaluate; it is known to fail only on such a payload, or by
    // running out of time under load).
    Require(r.kind == Kind::kDeliver, "the route's Skip delivers the payload as it is");
    return;
  }
  Require(route_out || route_timed_out, "the destination stage runs only after the route's");
  const std::string label(t::StrategyLabel(stage.on_error));
  Require(r.failed_strategy == label, "the failed stage's strategy is named");
  const int64_t limit = stage.expression.limits().timeout.count();
  if (stage.on_error == t::OnError::kSkip) {
    Require(r.kind == Kind::kDeliver && r.body == route_out, "Skip delivers the route's output");
  } else if (stage.on_error == t::OnError::kFail) {
    Require(r.kind == Kind::kRetry && StartsWith(r.error, "Transform failed: "), "Fail retries");
    CheckError("relay", r.error.substr(18), limit, timer);
  } else {
    const std::string_view prefix = "Transform dead-lettered the message: ";
    Require(r.kind == Kind::kDead && StartsWith(r.error, prefix), "Dead is dead");
    CheckError("relay", r.error.substr(prefix.size()), limit, timer);
  }
}

const t::Expression& Known(const std::string& text) {
  static std::vector<std::pair<std::string, t::Expression>> known;
  for (const auto& [k, e] : known) {
    if (k == text) return e;
  }
  auto e = t::Expression::Compile(text, t::Limits{kKnownTimeout, 100});
  Require(e.ok(), "a known-good expression compiles");
  known.emplace_back(text, std::move(e).value());
  return known.back().second;
}

void Relay(const Input& in) {
  const queuebox::OutboxRow row = Row(in);
  const t::Bindings bindings = t::DeliveryBindings(row);
  const bool utf8 = queuebox::fuzz::ValidUtf8(row.id) && queuebox::fuzz::ValidUtf8(row.topic) &&
                    queuebox::fuzz::ValidUtf8(row.created_at);
  bool route_timed_out = false;
  const std::optional<std::string> route_out =
      CheckDollar("relay", Known("$"), row.payload, bindings, utf8, &route_timed_out);
  auto vars = Known("[$topic, $attempt, $messageId, $timestamp]").Evaluate("", bindings);
  if (utf8 && (vars.ok() || vars.error().kind != t::ErrorKind::kTimeout)) {
    Require(vars.ok() && vars.value() &&
                Json::parse(*vars.value()) ==
                    Json({row.topic, row.attempt, row.id, t::InstantText(row.created_at)}),
            "the variables are the row's");
  }
  const t::Limits limits = FuzzedLimits(in);
  Timer timer;
  auto compiled = t::Expression::Compile(in.expression, limits);
  if (!compiled.ok()) {
    CheckCompileError("relay", in.expression, compiled.error(), limits);
    return;
  }
  CheckCpu(timer, limits.timeout.count());
  const t::Stage route{Known("$"), t::OnError::kSkip, "routes[0].transform"};
  const t::Stage stage{std::move(compiled).value(), kStrategies[in.strategy % 3],
                       "destinations.d.transform"};
  CheckStages(row, route, stage, route_out, route_timed_out);
}

// ---- the source stage ------------------------------------------------------------------------

t::SourceMessage Message(const Input& in) {
  t::SourceMessage m;
  m.source = Utf8(in.text);
  m.message_id = kMessageId;
  m.received_at = "2026-12-06T02:00:00.000001Z";
  if (in.strategy & 4) m.idempotency_key = Utf8(in.topic);
  if (in.strategy & 8) m.event_type = Utf8(in.topic);
  for (const auto& [name, value] : in.headers) m.headers.emplace_back(name, value);
  return m;
}

void CheckSourceVariables(const t::SourceMessage& m) {
  auto vars = Known(
                  "[$source, $topic, $attempt, $messageId, $timestamp, $idempotencyKey, "
                  "$eventType, $headers]")
                  .Evaluate("", t::SourceBindings(m));
  if (!vars.ok() && vars.error().kind == t::ErrorKind::kTimeout) return;
  Doc headers = Doc::object();
  for (const auto& [name, value] : m.headers) headers[Utf8(name)] = Utf8(value);
  auto nullable = [](const std::optional<std::string>& s) { return s ? Doc(*s) : Doc(); };
  const Doc expected = {m.source,
                        m.event_type.value_or(""),
                        0,
                        kMessageId,
                        "2026-12-06T02:00:00.000001Z",
                        nullable(m.idempotency_key),
                        nullable(m.event_type),
                        headers};
  Require(vars.ok() && vars.value() && Doc::parse(*vars.value()) == expected,
          "the source stage's variables are the message's");
}

void Source(const Input& in) {
  const t::SourceMessage m = Message(in);
  CheckSourceVariables(m);
  const bool utf8 = queuebox::fuzz::ValidUtf8(in.payload);
  CheckDollar("source", Known("$"), in.payload, t::SourceBindings(m), true);
  const t::Limits limits = FuzzedLimits(in);
  auto compiled = t::Expression::Compile(in.expression, limits);
  if (!compiled.ok()) {
    CheckCompileError("source", in.expression, compiled.error(), limits);
    return;
  }
  const t::Stage stage{std::move(compiled).value(), kStrategies[in.strategy % 3],
                       "sources.s.transform"};
  Timer timer;
  t::SourceStageResult r = t::ApplySourceStage(stage, in.payload, m);
  CheckCpu(timer, limits.timeout.count());
  using Kind = t::SourceStageResult::Kind;
  if (!r.failed) {
    Require(r.kind == Kind::kStore, "a source stage's success stores");
    CheckResult("source", r.payload);
  } else if (stage.on_error == t::OnError::kSkip) {
    Require(r.kind == Kind::kStore && r.payload == in.payload, "Skip stores the body as received");
  } else {
    Require(r.kind == Kind::kRejected, "Fail and Dead reject");
    // A body that is not JSON fails as such (a source has checked it is JSON before).
    if (!utf8 || !Parsed(in.payload)) return;
    CheckError("source", r.reason, limits.timeout.count(), timer);
    Require(Json::parse(t::RejectionBody(r.reason)) ==
                Json({{"error", "Transform failed: " + r.reason}}),
            "the rejection body names the reason");
  }
}

}  // namespace

// SpiderMonkey keeps malloc'd memory that only its garbage-collected heap points to, and that heap
// is mmap'd, which LeakSanitizer does not scan: while an engine lives, every such block looks
// leaked. Only allocations made inside libmozjs are exempt; a leak of ours still fails the run.
extern "C" const char* __lsan_default_suppressions() { return "leak:libmozjs-102.so\n"; }

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  queuebox::log::SetSinkForTesting([](std::string_view) {});
  tester = new t::TransformTester(
      {kMaxTimeoutMs, [] { return std::string(kMessageId); }, [] { return iso_now; }});
  // Both engines load now (the tester's and this thread's), so the engine module's exit handler
  // is registered before the one below, which therefore runs first.
  Require(Tester().Handle(R"({"expression":"1","payload":null})").status == 200,
          "the tester's engine loads");
  Known("$");
  std::atexit([] {
    delete tester;
    tester = nullptr;
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Input in = Read(data, size);
  switch (in.path % 3) {
    case 0:
      Admin(in);
      break;
    case 1:
      Relay(in);
      break;
    default:
      Source(in);
      break;
  }
  return 0;
}
