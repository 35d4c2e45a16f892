// env.h: where the test servers are. scripts/test.sh exports them after scripts/services.sh start.
//
// A test that needs a server calls RequirePostgresUrl() (or the broker variants). Outside CI a
// missing server skips the test with a clear message; in CI (CI=true) it fails: a test that needs
// a server gets it in CI, it does not skip there.
#pragma once

#include <string>

namespace queuebox::testing {

// True when the variable CI is set to a non-empty value other than "false" / "0".
bool InCi();
// The value of env var `name`, or "" when unset.
std::string Env(const char* name);

}  // namespace queuebox::testing

// Evaluates to the env var's value; skips (outside CI) or fails (in CI) the test when unset.
#define QB_REQUIRE_SERVER_ENV(var_name, out)                                              \
  do {                                                                                    \
    out = ::queuebox::testing::Env(var_name);                                             \
    if (out.empty()) {                                                                    \
      if (::queuebox::testing::InCi()) {                                                  \
        FAIL() << var_name << " is not set: CI must start the server (scripts/test.sh)";  \
      } else {                                                                            \
        GTEST_SKIP() << var_name << " is not set; run through scripts/test.sh";           \
      }                                                                                   \
    }                                                                                     \
  } while (0)
