#include "engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "engine_module.h"
#include "queuebox/transform/jsonata.h"
#include "testing/broker_testing.h"

namespace queuebox::transform {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Output = TransformResult<std::optional<std::string>>;

// A timeout that a loaded CI machine cannot reach by accident: tests that are not about the
// timeout must not depend on the scheduler (the limit is wall-clock time).
Limits Generous() {
  Limits limits;
  limits.timeout = std::chrono::milliseconds(10000);
  return limits;
}

Expression MustCompile(const std::string& text, Limits limits = Generous()) {
  auto expr = Expression::Compile(text, limits);
  EXPECT_TRUE(expr.ok()) << expr.error().ToString();
  return std::move(expr).value();
}

// The engine answers a plain evaluation: proof that it is usable after an abort.
void ExpectEngineUsable() {
  Output out = MustCompile("$sum(a) & '/' & $topic")
                   .Evaluate(R"({"a":[1,2,3]})", Bindings().SetString("topic", "order.created"));
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(out.value(), std::optional<std::string>(R"("6/order.created")"));
}

Limits LongTimeout() {
  Limits limits;
  limits.timeout = std::chrono::milliseconds(120000);
  return limits;
}

TEST(Jsonata, EvaluatesAPathOnTheInput) {
  Output out = MustCompile("order.amount * 2").Evaluate(R"({"order":{"amount":21}})");
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(out.value(), std::optional<std::string>("42"));
}

TEST(Jsonata, BindsStageVariables) {
  Bindings bindings;
  bindings.SetString("messageId", "0b6c1a7e-0000-4000-8000-000000000001")
      .SetString("topic", "order.created")
      .SetInt("attempt", 3)
      .SetString("timestamp", "2024-05-01T10:00:00Z")
      .SetJson("headers", R"({"x-tenant":"acme"})")
      .SetNull("eventType");
  Output out = MustCompile(
                   R"({"id": $messageId, "t": $topic, "n": $attempt + 1, "at": $timestamp,
                       "tenant": $headers."x-tenant", "et": $eventType, "body": $})")
                   .Evaluate(R"({"k":"v \"quoted\" é"})", bindings);
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(
      *out.value(),
      R"({"id":"0b6c1a7e-0000-4000-8000-000000000001","t":"order.created","n":4,)"
      R"("at":"2024-05-01T10:00:00Z","tenant":"acme","et":null,"body":{"k":"v \"quoted\" é"}})");
}

TEST(Jsonata, BindingsEscapeNamesAndValues) {
  Bindings b;
  b.SetString("s", "line\nbreak\t\"q\"\\ \x01");
  EXPECT_EQ(b.json(), "{\"s\":\"line\\nbreak\\t\\\"q\\\"\\\\ \\u0001\"}");
  Output out = MustCompile("$s").Evaluate("", b);
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(*out.value(), "\"line\\nbreak\\t\\\"q\\\"\\\\ \\u0001\"");
}

TEST(Jsonata, NoValueIsNotAnError) {
  Output missing = MustCompile("order.missing").Evaluate(R"({"order":{}})");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing.value().has_value());
  Output function = MustCompile("function($x){$x}").Evaluate("{}");
  ASSERT_TRUE(function.ok());
  EXPECT_FALSE(function.value().has_value());
  Output no_input = MustCompile("$").Evaluate("");
  ASSERT_TRUE(no_input.ok());
  EXPECT_FALSE(no_input.value().has_value());
}

TEST(Jsonata, SyntaxErrorGivesCodePositionAndMessage) {
  auto expr = Expression::Compile("Account.Order[0");
  ASSERT_FALSE(expr.ok());
  EXPECT_EQ(expr.error().kind, ErrorKind::kSyntax);
  EXPECT_EQ(expr.error().code, "S0203");
  EXPECT_EQ(expr.error().position, 15);
  EXPECT_EQ(expr.error().ToString(),
            "S0203 at position 15: Expected \"]\" before end of expression");
  EXPECT_EQ(expr.status().code(), StatusCode::kInvalidArgument);

  auto unary = Expression::Compile("{\"a\": }");
  ASSERT_FALSE(unary.ok());
  EXPECT_EQ(unary.error().code, "S0211");
  EXPECT_EQ(unary.error().token, "}");
}

// transform_engine_fuzz (at 7,086 executions): jsonata builds a regular expression literal with
// RegExp, which throws a JavaScript SyntaxError without a JSONata code. Compile called that an
// engine failure (kEngine), so the admin route answered 503 and a start-up check said the engine
// could not load.
TEST(Jsonata, ARegularExpressionJavaScriptRefusesIsASyntaxError) {
  for (const char* text : {"$replace('a b', /\\s?+/, '_')", "$match('a', /a{2,1}/)"}) {
    auto e = Expression::Compile(text, Generous());
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().kind, ErrorKind::kSyntax) << text;
    EXPECT_EQ(e.error().code, "") << text;
    EXPECT_THAT(e.error().message, ::testing::StartsWith("SyntaxError: ")) << text;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument) << text;
  }
  ExpectEngineUsable();
}

TEST(Jsonata, UnknownFunctionCompilesAndFailsWhenEvaluated) {
  Expression expr = MustCompile("$foo()");
  Output out = expr.Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kEvaluation);
  EXPECT_EQ(out.error().ToString(), "T1006 at position 5: Attempted to invoke a non-function");
}

TEST(Jsonata, EvaluationErrorCarriesJsonataCode) {
  Output out = MustCompile("\"abc\" + 1").Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code, "T2001");
  EXPECT_EQ(out.error().position, 7);
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
}

TEST(Jsonata, InputThatIsNotJsonIsRefused) {
  Output out = MustCompile("a").Evaluate("{not json");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_THAT(out.error().message, HasSubstr("not JSON"));
  Output bad_binding = MustCompile("$h").Evaluate("{}", Bindings().SetJson("h", "{oops"));
  ASSERT_FALSE(bad_binding.ok());
  EXPECT_EQ(bad_binding.error().kind, ErrorKind::kInvalidArgument);
  ExpectEngineUsable();
}

// transform_engine_fuzz's first findings. A store may hold bytes that are not UTF-8 (SQLite
// TEXT) in a row's payload, topic or id: SpiderMonkey refused them with an exception that was
// reported as running out of memory ("ran out of the engine's heap (128 MiB)", kMemory), with the
// exception still pending on the engine.
TEST(Jsonata, TextThatIsNotUtf8IsNamedNotTakenForALackOfMemory) {
  Output payload = MustCompile("$").Evaluate("{\"a\":\"\xff\"}");
  ASSERT_FALSE(payload.ok());
  EXPECT_EQ(payload.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(payload.error().message,
            "The input or a binding is not JSON: the input is not UTF-8 (byte 6)");
  Output topic = MustCompile("$topic").Evaluate("{}", Bindings().SetString("topic", "order.\xc3"));
  ASSERT_FALSE(topic.ok());
  EXPECT_EQ(topic.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(topic.error().message, "The input or a binding is not JSON: a binding is not UTF-8");
  auto expression = Expression::Compile("$sort([3, \x80 1])", Generous());
  ASSERT_FALSE(expression.ok());
  EXPECT_EQ(expression.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(expression.error().message, "The expression is not UTF-8 (byte 10)");
  ExpectEngineUsable();
}

// The relay's JSON checks (nlohmann) skip a UTF-8 byte order mark before a payload and deliver it;
// JSON.parse refused it, so the same row failed its transform as "not JSON".
TEST(Jsonata, AByteOrderMarkBeforeTheInputIsSkipped) {
  Output out = MustCompile("a").Evaluate("\xEF\xBB\xBF{\"a\":1}");
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(out.value(), std::optional<std::string>("1"));
  // Only before the document: inside a string it is a character like any other.
  out = MustCompile("a").Evaluate("{\"a\":\"\xEF\xBB\xBF\"}");
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(out.value(), std::optional<std::string>("\"\xEF\xBB\xBF\""));
}

// A string cut inside a UTF-16 surrogate pair holds half a character, which JSON.stringify
// writes as an escape (\ud83d) that nlohmann, simdjson and PostgreSQL refuse: the destinations
// refused the delivery as not JSON. The half becomes U+FFFD; backslashes of the text stay.
TEST(Jsonata, HalfASurrogatePairBecomesTheReplacementCharacter) {
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600, a pair in UTF-16
  Output split = MustCompile("$split(s, '')").Evaluate("{\"s\":\"" + emoji + "!\"}");
  ASSERT_TRUE(split.ok()) << split.error().ToString();
  EXPECT_EQ(split.value(), std::optional<std::string>(R"(["\ufffd","\ufffd","!"])"));
  Output key =
      MustCompile("{$split(s, '')[0]: $match(s, /./).match}").Evaluate("{\"s\":\"" + emoji + "\"}");
  ASSERT_TRUE(key.ok()) << key.error().ToString();
  EXPECT_EQ(key.value(), std::optional<std::string>(R"({"\ufffd":["\ufffd","\ufffd"]})"));
  // A backslash of the text before the half: an escaped backslash, then the escape.
  Output text = MustCompile(R"("\\" & $substringBefore(s, "\uDE00") & "\\ud83d")")
                    .Evaluate("{\"s\":\"" + emoji + "\"}");
  ASSERT_TRUE(text.ok()) << text.error().ToString();
  EXPECT_EQ(text.value(), std::optional<std::string>(R"("\\\ufffd\\ud83d")"));
  // A whole pair is written as it is.
  Output whole = MustCompile("s").Evaluate("{\"s\":\"" + emoji + "\"}");
  ASSERT_TRUE(whole.ok()) << whole.error().ToString();
  EXPECT_EQ(whole.value(), std::optional<std::string>("\"" + emoji + "\""));
}

TEST(Jsonata, LimitsMustBePositive) {
  Limits zero_timeout;
  zero_timeout.timeout = std::chrono::milliseconds(0);
  auto a = Expression::Compile("1", zero_timeout);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().kind, ErrorKind::kInvalidArgument);
  Limits zero_depth;
  zero_depth.max_depth = 0;
  auto b = Expression::Compile("1", zero_depth);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().kind, ErrorKind::kInvalidArgument);
}

TEST(Jsonata, InputIsNotChangedBetweenEvaluations) {
  // The transform operator copies; a second evaluation sees the original input again.
  Expression expr = MustCompile("$ ~> |order|{'amount': amount * 10}|");
  for (int i = 0; i < 3; ++i) {
    Output out = expr.Evaluate(R"({"order":{"amount":2}})");
    ASSERT_TRUE(out.ok()) << out.error().ToString();
    EXPECT_EQ(*out.value(), R"({"order":{"amount":20}})");
  }
}

// --- Runaway evaluations: each ends at its limit, and the engine then evaluates normally. ---

TEST(JsonataLimits, InfiniteRecursionEndsAtTheDepthLimit) {
  Output out = MustCompile("($f := function($x){ $f($x + 1) + 1 }; $f(0))").Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kDepth);
  EXPECT_EQ(out.error().code, "D1011");
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  ExpectEngineUsable();
}

TEST(JsonataLimits, DepthLimitAllowsBoundedRecursion) {
  // A depth of 100 frames allows a user function ~31 levels deep; 500 allows 150.
  auto factorial = [](int n) {
    return "($f := function($n){ $n <= 1 ? 1 : $n * $f($n - 1) }; $f(" + std::to_string(n) +
           ") > 0)";
  };
  Output shallow = MustCompile(factorial(25)).Evaluate("{}");
  ASSERT_TRUE(shallow.ok()) << shallow.error().ToString();
  const std::string text = factorial(150);
  Output deep = MustCompile(text).Evaluate("{}");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().code, "D1011");
  Limits limits = Generous();
  limits.max_depth = 500;
  Output allowed = MustCompile(text, limits).Evaluate("{}");
  ASSERT_TRUE(allowed.ok()) << allowed.error().ToString();
}

TEST(JsonataLimits, RecursionPastTheNativeStackIsADepthError) {
  // maxDepth so large that SpiderMonkey's own stack quota is reached first.
  Limits limits = Generous();
  limits.max_depth = 100000000;
  Output out = MustCompile("($f := function($x){ $f($x + 1) + 1 }; $f(0))", limits).Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kDepth);
  EXPECT_EQ(out.error().code, "D1011");
  EXPECT_THAT(out.error().message, HasSubstr("stack"));
  ExpectEngineUsable();
}

TEST(JsonataLimits, TailRecursiveLoopEndsAtTheTimeout) {
  // jsonata trampolines tail calls, so no depth limit is reached: only the timeout stops it.
  Limits limits;
  limits.timeout = std::chrono::milliseconds(1000);  // binds the compile too: room for ASan
  Output out = MustCompile("($f := function($x){ $f($x + 1) }; $f(0))", limits).Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kTimeout);
  EXPECT_EQ(out.error().code, "D1012");
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(out.error().ToString(),
            "D1012: The evaluation ran longer than 1000 ms and was stopped");
  ExpectEngineUsable();
}

TEST(JsonataLimits, CatastrophicRegexEndsAtTheTimeout) {
  // ^(a+)+$ on "aaa…ab" backtracks 2^40 times; the interrupt reaches into the regex engine.
  Output out =
      MustCompile(R"($match($pad("", 40, "a") & "b", /^(a+)+$/))", Limits{}).Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kTimeout) << out.error().ToString();
  EXPECT_EQ(out.error().code, "D1012");
  ExpectEngineUsable();
}

TEST(JsonataLimits, FiveMillionElementRangeEndsAtTheMemoryLimit) {
  // With a timeout long enough for the range to be built, the memory limit ends it.
  Output out = MustCompile("[1..5000000]", LongTimeout()).Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kMemory) << out.error().ToString();
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted);
  ExpectEngineUsable();
}

TEST(JsonataLimits, FiveMillionElementRangeEndsAtTheDefaultLimits) {
  // With the default 100 ms, whichever limit comes first on this machine: never a result.
  Output out = MustCompile("$sum([1..5000000].($ * 2))", Limits{}).Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.error().kind, ::testing::AnyOf(ErrorKind::kTimeout, ErrorKind::kMemory));
  ExpectEngineUsable();
}

TEST(JsonataLimits, FiftyMegabyteResultEndsAtTheMemoryLimit) {
  // 25 characters doubled 21 times: a 50 MiB string.
  Output out = MustCompile(
                   R"(($d := function($s, $n){ $n = 0 ? $s : $d($s & $s, $n - 1) };
                       $d("abcdefghijklmnopqrstuvwxy", 21)))",
                   LongTimeout())
                   .Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kMemory) << out.error().ToString();
  ExpectEngineUsable();
}

TEST(JsonataLimits, AnotherEvaluationsMemoryDoesNotStopThisOne) {
  // B, a loop that keeps nothing, runs on its own engine while A, on this thread, builds a
  // 5,000,000-element range: the process grows past B's limit too, but the memory is A's.
  std::atomic<bool> b_running{false};
  std::optional<Output> b_out;
  std::thread b([&] {
    Limits limits;
    limits.timeout = std::chrono::milliseconds(3000);
    Expression loop = MustCompile("($f := function($x){ $f($x + 1) }; $f(0))", limits);
    b_running = true;
    b_out.emplace(loop.Evaluate("{}"));
  });
  // A grows only once the watchdog has read B's baseline (B's slot the one armed).
  TransformResult<const internal::ModuleEntry*> module = internal::LoadModule();
  ASSERT_TRUE(module.ok());
  const bool b_baselined = ::queuebox::testing::WaitUntil(
      [&] { return b_running && module.value()->baselined_evaluations() == 1; },
      std::chrono::seconds(2));
  Output a = MustCompile("[1..5000000]", LongTimeout()).Evaluate("{}");
  b.join();
  ASSERT_TRUE(b_baselined) << "the watchdog never read B's memory baseline";
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().kind, ErrorKind::kMemory) << a.error().ToString();
  ASSERT_TRUE(b_out.has_value());
  ASSERT_FALSE(b_out->ok());
  EXPECT_EQ(b_out->error().kind, ErrorKind::kTimeout) << b_out->error().ToString();
  ExpectEngineUsable();
}

TEST(JsonataLimits, ResultOverTheResultCapIsAMemoryError) {
  // 20 MiB of text: under the evaluation's memory limit, over the 16 MiB result cap.
  Output out = MustCompile(
                   R"(($d := function($s, $n){ $n = 0 ? $s : $d($s & $s, $n - 1) };
                       $d("abcdefghijklmnopqrst", 20)))",
                   LongTimeout())
                   .Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kMemory);
  EXPECT_EQ(out.error().message,
            "The result is 20971522 characters, over the limit of 16777216 bytes");
  ExpectEngineUsable();
}

TEST(JsonataLimits, ALateInterruptDoesNotStopTheNextEvaluation) {
  // Many short evaluations right after a timeout: none is stopped by a stale request.
  Limits limits;
  limits.timeout = std::chrono::milliseconds(500);  // binds the compile too: room for ASan
  Output out = MustCompile("($f := function($x){ $f($x) }; $f(0))", limits).Evaluate("{}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::kTimeout);
  Expression quick = MustCompile("$count([1..1000])");
  for (int i = 0; i < 2000; ++i) {
    Output ok = quick.Evaluate("{}");
    ASSERT_TRUE(ok.ok()) << i << ": " << ok.error().ToString();
    ASSERT_EQ(*ok.value(), "1000");
  }
}

// --- Engines and threads ---

TEST(JsonataEngines, OneEnginePerThreadEvaluatingConcurrently) {
  constexpr int kThreads = 4;
  constexpr int kEvaluations = 300;
  Expression expr = MustCompile(R"({"id": $messageId, "total": $sum(items.(price * qty))})");
  std::vector<const void*> engines(kThreads);
  std::vector<std::string> failures(kThreads);
  std::atomic<int> ok_count{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto engine = internal::Engine::ForThisThread();
      if (!engine.ok()) {
        failures[t] = engine.error().ToString();
        return;
      }
      engines[t] = engine.value();
      for (int i = 0; i < kEvaluations; ++i) {
        const std::string id = std::to_string(t) + "-" + std::to_string(i);
        std::ostringstream input;
        input << R"({"items":[{"price":)" << i << R"(,"qty":2},{"price":1,"qty":)" << t << "}]}";
        Output out = expr.Evaluate(input.str(), Bindings().SetString("messageId", id));
        const std::string want =
            R"({"id":")" + id + R"(","total":)" + std::to_string(2 * i + t) + "}";
        if (!out.ok() || !out.value() || *out.value() != want) {
          failures[t] = "evaluation " + id + ": " +
                        (out.ok() ? out.value().value_or("undefined") : out.error().ToString());
          return;
        }
        ok_count.fetch_add(1);
      }
      if (internal::Engine::ForThisThread().value() != engines[t]) failures[t] = "engine changed";
    });
  }
  // Meanwhile, a runaway on this thread's engine does not disturb the others.
  Limits limits;
  limits.timeout = std::chrono::milliseconds(500);  // binds the compile too: room for ASan
  Output runaway = MustCompile("($f := function($x){ $f($x) }; $f(0))", limits).Evaluate("{}");
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_EQ(ok_count.load(), kThreads * kEvaluations);
  ASSERT_FALSE(runaway.ok());
  EXPECT_EQ(runaway.error().kind, ErrorKind::kTimeout);
  std::set<const void*> distinct(engines.begin(), engines.end());
  distinct.insert(internal::Engine::ForThisThread().value());
  EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kThreads + 1));
}

TEST(JsonataEngines, TimeoutsOnSeveralThreadsAtOnce) {
  constexpr int kThreads = 3;
  std::vector<ErrorKind> kinds(kThreads, ErrorKind::kEngine);
  std::vector<std::string> after(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Load this thread's engine first, and leave the compile room under a sanitizer on a busy
      // machine: the short limit binds the compile too (it took over 30 ms under ASan, load 7).
      ASSERT_TRUE(Expression::Compile("1", Generous()).ok());
      Limits limits;
      limits.timeout = std::chrono::milliseconds(1000 + 50 * t);
      auto expr = Expression::Compile("($f := function($x){ $f($x) }; $f(0))", limits);
      if (!expr.ok()) {  // say why (it failed once under load with nothing to read)
        after[t] = "compile: " + expr.error().ToString();
        return;
      }
      Output out = expr.value().Evaluate("{}");
      if (!out.ok()) kinds[t] = out.error().kind;
      Output next = Expression::Compile("1 + 1", Generous()).value().Evaluate("");
      after[t] = next.ok() ? next.value().value_or("undefined") : next.error().ToString();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(kinds[t], ErrorKind::kTimeout) << "thread " << t;
    EXPECT_EQ(after[t], "2") << "thread " << t;
  }
}

TEST(JsonataEngines, CacheKeepsTheMostRecentlyUsedExpressions) {
  auto engine = internal::Engine::ForThisThread();
  ASSERT_TRUE(engine.ok());
  const std::size_t capacity = internal::CurrentEngineOptions().cache_capacity;
  Expression first = MustCompile("'first' & $string(0)");
  for (std::size_t i = 1; i <= capacity + 5; ++i) MustCompile("$string(" + std::to_string(i) + ")");
  EXPECT_EQ(engine.value()->cache_size(), capacity);
  // The first one was dropped; evaluating it compiles it again.
  Output out = first.Evaluate("");
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(*out.value(), "\"first0\"");
  EXPECT_EQ(engine.value()->cache_size(), capacity);
}

TEST(JsonataEngines, SameTextWithAnotherDepthIsAnotherEntry) {
  Limits shallow = Generous();
  shallow.max_depth = 20;
  Limits deep = Generous();
  deep.max_depth = 400;
  const std::string text = "($f := function($n){ $n <= 1 ? 1 : $n + $f($n - 1) }; $f(40))";
  Output a = MustCompile(text, shallow).Evaluate("");
  Output b = MustCompile(text, deep).Evaluate("");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, "D1011");
  ASSERT_TRUE(b.ok()) << b.error().ToString();
  EXPECT_EQ(*b.value(), "820");
}

// --- Sandbox ---

TEST(JsonataSandbox, GlobalHoldsOnlyStandardClasses) {
  auto engine = internal::Engine::ForThisThread();
  ASSERT_TRUE(engine.ok());
  const std::string names =
      engine.value()->RunScriptForTest("Object.getOwnPropertyNames(globalThis).sort().join(',')");
  std::set<std::string> present;
  std::stringstream in(names);
  for (std::string name; std::getline(in, name, ',');) present.insert(name);
  // Shell and host functions SpiderMonkey's js shell or Node would define.
  for (const char* host : {"load",
                           "print",
                           "printErr",
                           "putstr",
                           "os",
                           "read",
                           "readline",
                           "readRelativeToScript",
                           "snarf",
                           "run",
                           "quit",
                           "evaluate",
                           "require",
                           "process",
                           "module",
                           "Buffer",
                           "fetch",
                           "XMLHttpRequest",
                           "setTimeout",
                           "console",
                           "importScripts",
                           "system",
                           "File",
                           "__qbJsonata",
                           "__qbMakeDriver",
                           "__qbGlobalShim"}) {
    EXPECT_EQ(present.count(host), 0u) << host << " is defined";
  }
  // Only ECMAScript names (and SpiderMonkey's InternalError/uneval).
  const std::set<std::string> allowed = {"AggregateError",
                                         "Array",
                                         "ArrayBuffer",
                                         "Atomics",
                                         "BigInt",
                                         "BigInt64Array",
                                         "BigUint64Array",
                                         "Boolean",
                                         "DataView",
                                         "Date",
                                         "Error",
                                         "EvalError",
                                         "FinalizationRegistry",
                                         "Float32Array",
                                         "Float64Array",
                                         "Function",
                                         "Infinity",
                                         "Int16Array",
                                         "Int32Array",
                                         "Int8Array",
                                         "InternalError",
                                         "Intl",
                                         "JSON",
                                         "Map",
                                         "Math",
                                         "NaN",
                                         "Number",
                                         "Object",
                                         "Promise",
                                         "Proxy",
                                         "RangeError",
                                         "ReferenceError",
                                         "Reflect",
                                         "RegExp",
                                         "Set",
                                         "SharedArrayBuffer",
                                         "String",
                                         "Symbol",
                                         "SyntaxError",
                                         "TypeError",
                                         "URIError",
                                         "Uint16Array",
                                         "Uint32Array",
                                         "Uint8Array",
                                         "Uint8ClampedArray",
                                         "WeakMap",
                                         "WeakRef",
                                         "WeakSet",
                                         "WebAssembly",
                                         "decodeURI",
                                         "decodeURIComponent",
                                         "encodeURI",
                                         "encodeURIComponent",
                                         "escape",
                                         "eval",
                                         "globalThis",
                                         "isFinite",
                                         "isNaN",
                                         "parseFloat",
                                         "parseInt",
                                         "undefined",
                                         "unescape",
                                         "uneval"};
  for (const std::string& name : present) {
    EXPECT_EQ(allowed.count(name), 1u) << name << " is not a standard global";
  }
}

TEST(JsonataSandbox, EvalAndFunctionAreRefused) {
  auto engine = internal::Engine::ForThisThread();
  ASSERT_TRUE(engine.ok());
  EXPECT_THAT(engine.value()->RunScriptForTest("eval('1 + 1')"), HasSubstr("EvalError"));
  EXPECT_THAT(engine.value()->RunScriptForTest("Function('return 1')()"), HasSubstr("EvalError"));
  EXPECT_THAT(engine.value()->RunScriptForTest("(function(){}).constructor('return 1')()"),
              HasSubstr("EvalError"));
  // JSONata's own $eval parses JSONata, not JavaScript, and still works.
  Output out = MustCompile("$eval('1 + 1')").Evaluate("");
  ASSERT_TRUE(out.ok()) << out.error().ToString();
  EXPECT_EQ(*out.value(), "2");
}

TEST(JsonataSandbox, ExpressionsReachNoJavaScriptObjects) {
  // Only own properties of the input are visible: no prototype, constructor or function values.
  for (const char* text :
       {"constructor", "$.constructor", "__proto__", "toString", "$string.constructor",
        "a.constructor.constructor", "$keys(__proto__)"}) {
    Output out = MustCompile(text).Evaluate(R"({"a":"x"})");
    ASSERT_TRUE(out.ok()) << text << ": " << out.error().ToString();
    EXPECT_FALSE(out.value().has_value()) << text << " gave " << *out.value();
  }
  Output call = MustCompile("a.constructor('return 1')").Evaluate(R"({"a":"x"})");
  ASSERT_FALSE(call.ok());
  EXPECT_EQ(call.error().code, "T1006");
}

TEST(JsonataSandbox, AnEvaluationCannotLeaveStateForTheNext) {
  // Variables bound in one evaluation are gone in the next, on the same engine.
  Output first = MustCompile("($secret := 'tenant-a'; $secret)").Evaluate("");
  ASSERT_TRUE(first.ok());
  Output second = MustCompile("$secret").Evaluate("");
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second.value().has_value());
}

// --- Key expressions (reference §11.4) ---

TEST(KeyValue, RulesOfTheReference) {
  EXPECT_EQ(KeyValueFromJson(R"("order-1")"), std::optional<std::string>("order-1"));
  EXPECT_EQ(KeyValueFromJson(R"("  padded  ")"), std::optional<std::string>("  padded  "));
  EXPECT_EQ(KeyValueFromJson("515725.0"), std::optional<std::string>("515725"));
  EXPECT_EQ(KeyValueFromJson("515725"), std::optional<std::string>("515725"));
  EXPECT_EQ(KeyValueFromJson("-42"), std::optional<std::string>("-42"));
  EXPECT_EQ(KeyValueFromJson("1.5"), std::optional<std::string>("1.5"));
  EXPECT_EQ(KeyValueFromJson("1e+21"), std::optional<std::string>("1e+21"));
  EXPECT_EQ(KeyValueFromJson("true"), std::optional<std::string>("true"));
  EXPECT_EQ(KeyValueFromJson("false"), std::optional<std::string>("false"));
  EXPECT_EQ(KeyValueFromJson("null"), std::nullopt);
  EXPECT_EQ(KeyValueFromJson(R"("")"), std::nullopt);
  EXPECT_EQ(KeyValueFromJson(R"(" \t ")"), std::nullopt);
  EXPECT_EQ(KeyValueFromJson(R"({"a":1})"), std::nullopt);
  EXPECT_EQ(KeyValueFromJson("[1]"), std::nullopt);
  EXPECT_EQ(KeyValueFromJson(""), std::nullopt);
  EXPECT_EQ(KeyValueFromJson("{broken"), std::nullopt);
}

TEST(KeyValue, FromAnEvaluation) {
  const std::string payload = R"({"order":{"id":515725.0,"ref":"A-1","tags":["x"],"none":null}})";
  EXPECT_EQ(KeyValue(MustCompile("order.id").Evaluate(payload)),
            std::optional<std::string>("515725"));
  EXPECT_EQ(KeyValue(MustCompile("order.ref & '-' & order.id").Evaluate(payload)),
            std::optional<std::string>("A-1-515725"));
  EXPECT_EQ(KeyValue(MustCompile("order.tags").Evaluate(payload)), std::nullopt);
  EXPECT_EQ(KeyValue(MustCompile("order.none").Evaluate(payload)), std::nullopt);
  EXPECT_EQ(KeyValue(MustCompile("order.missing").Evaluate(payload)), std::nullopt);
  EXPECT_EQ(KeyValue(MustCompile("order.ref + 1").Evaluate(payload)), std::nullopt);  // T2001
}

TEST(TransformError, StatusCodes) {
  TransformError e;
  e.message = "m";
  e.kind = ErrorKind::kTimeout;
  EXPECT_EQ(e.ToStatus().code(), StatusCode::kDeadlineExceeded);
  e.kind = ErrorKind::kMemory;
  EXPECT_EQ(e.ToStatus().code(), StatusCode::kResourceExhausted);
  e.kind = ErrorKind::kEngine;
  EXPECT_EQ(e.ToStatus().code(), StatusCode::kInternal);
  e.kind = ErrorKind::kSyntax;
  e.code = "S0201";
  e.position = 3;
  EXPECT_EQ(e.ToStatus().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.ToStatus().message(), "S0201 at position 3: m");
}

}  // namespace
}  // namespace queuebox::transform
