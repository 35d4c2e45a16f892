// The path a sanitizer finding in the binary under test takes to a failed e2e test
// (tests/testing/process.h, issue 39 item 3). A shell stands in for a sanitized queuebox: it
// writes a report where the runtime would (`<log_path>.<pid>`, log_path read from the
// ASAN_OPTIONS the test hands it) or prints a UBSan line, and reaping it must fail the test.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "testing/process.h"

namespace queuebox {
namespace {

using testing::ChildProcess;
using testing::TempDir;
using namespace std::chrono_literals;

// As scripts/sanitizers.sh runs the Release e2e tests against the asan binary.
class SanitizerReportsTest : public ::testing::Test {
 protected:
  void SetUp() override { setenv("QB_SANITIZED_CHILDREN", "1", 1); }
  void TearDown() override { unsetenv("QB_SANITIZED_CHILDREN"); }

  // Runs `script` under /bin/sh as a ChildProcess and reaps it.
  void RunToExit(const std::string& script) {
    ChildProcess child("/bin/sh", {"-c", script}, {{"ASAN_OPTIONS", "detect_leaks=1"}},
                       dir_.File("child.log"));
    ASSERT_EQ(child.Wait(10s), 0);
  }

  TempDir dir_;
};

// What ASan's runtime does with log_path: the report goes to `<log_path>.<pid>`.
constexpr const char* kWritesAReportFile =
    R"(p=$(printf %s "$ASAN_OPTIONS" | tr ':' '\n' | sed -n 's/^log_path=//p');
       [ -n "$p" ] || exit 3;
       echo "ERROR: AddressSanitizer: heap-use-after-free on address 0x1" > "$p.$$")";

TEST_F(SanitizerReportsTest, AReportFileOfTheChildFailsTheTest) {
  EXPECT_NONFATAL_FAILURE(RunToExit(kWritesAReportFile), "AddressSanitizer: heap-use-after-free");
}

TEST_F(SanitizerReportsTest, AUbsanLineInTheChildsOutputFailsTheTest) {
  EXPECT_NONFATAL_FAILURE(
      RunToExit("echo 'relay.cc:10:5: runtime error: signed integer overflow'; echo '    #0 0x1 "
                "in f relay.cc:10'"),
      "runtime error: signed integer overflow");
}

TEST_F(SanitizerReportsTest, AChildWithoutAReportPasses) {
  RunToExit("echo 'relay up'; exit 0");
  EXPECT_FALSE(HasFailure());
}

}  // namespace
}  // namespace queuebox
