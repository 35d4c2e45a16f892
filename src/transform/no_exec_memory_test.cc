// Its own process: it forbids itself executable memory, as systemd's MemoryDenyWriteExecute=yes
// does (an operator may add it to packaging/queuebox.service), before the engine loads.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "deny_write_execute.h"
#include "queuebox/transform/jsonata.h"

namespace queuebox::transform {
namespace {

// The engine runs on its interpreters where memory may not become executable; with the JIT on,
// its start-up (JSRuntime::createJitRuntime) crashed the process with SIGSEGV.
TEST(JsonataNoExecutableMemory, TransformsRunUnderMemoryDenyWriteExecute) {
  ASSERT_FALSE(EnginesLoaded());
  ASSERT_TRUE(DenyWriteExecute());
  // A generous timeout: without the JIT, and beside other tests on two cores, an evaluation
  // (the first loads the engine) can take longer than the default 100 ms; this test is about
  // executable memory, not speed (it failed once in a full ctest run with D1012).
  Limits limits;
  limits.timeout = std::chrono::seconds(10);
  auto expr = Expression::Compile("{\"n\": n * 2, \"t\": $topic}", limits);
  ASSERT_TRUE(expr.ok()) << expr.error().ToString();
  // Enough evaluations for SpiderMonkey to want to compile the hot functions.
  for (int n = 0; n < 2000; ++n) {
    Bindings vars;
    vars.SetString("topic", "t");
    auto out = expr.value().Evaluate("{\"n\": " + std::to_string(n) + "}", vars);
    ASSERT_TRUE(out.ok()) << out.error().ToString();
    ASSERT_EQ(out.value(), "{\"n\":" + std::to_string(2 * n) + ",\"t\":\"t\"}");
  }
}

}  // namespace
}  // namespace queuebox::transform
