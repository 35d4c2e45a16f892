// log::Init's stream: stderr by default, stdout when asked (the container image's
// QUEUEBOX_CPP_LOG_STREAM=stdout), and back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/log.h"

namespace queuebox::log {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(LogStream, StderrByDefaultStdoutWhenAsked) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Init("json", "info", Stream::kStdout);
  Info("first line");
  std::string out = ::testing::internal::GetCapturedStdout();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, HasSubstr(R"("message":"first line")"));
  EXPECT_THAT(err, Not(HasSubstr("first line")));

  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  Init("json", "info");
  Info("second line");
  out = ::testing::internal::GetCapturedStdout();
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr(R"("message":"second line")"));
  EXPECT_THAT(out, Not(HasSubstr("second line")));
}

}  // namespace
}  // namespace queuebox::log
