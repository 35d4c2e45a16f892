// status_matchers.h: gMock matchers for Status and Result<T>.
//
//   EXPECT_THAT(store.Claim(0, 1000), StatusIs(StatusCode::kInvalidArgument,
//                                             HasSubstr("limit")));
//   EXPECT_THAT(LoadConfig(path), StatusIs(StatusCode::kInvalidArgument));  // any message
//
// StatusIs accepts a Status or a Result<T> (whose status() it reads; a Result holding a value is
// OK, so it never matches a failure code). On a mismatch gMock prints the actual code and message.
#pragma once

#include <gmock/gmock.h>

#include <ostream>
#include <string>

#include "queuebox/status.h"

namespace queuebox {

// How gtest prints a Status or a Result in a failure message.
inline void PrintTo(const Status& s, std::ostream* os) { *os << s.ToString(); }
template <typename T>
void PrintTo(const Result<T>& r, std::ostream* os) {
  if (r.ok()) {
    *os << "OK (a value)";
  } else {
    *os << r.status().ToString();
  }
}

}  // namespace queuebox

namespace queuebox::testing {

namespace internal {

inline Status StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}

class StatusIsMatcher {
 public:
  StatusIsMatcher(StatusCode code, ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename T>
  bool MatchAndExplain(const T& value, ::testing::MatchResultListener* listener) const {
    const Status s = StatusOf(value);
    if (s.code() != code_) {
      *listener << "whose code is " << StatusCodeName(s.code()) << " (message: \"" << s.message()
                << "\")";
      return false;
    }
    ::testing::StringMatchResultListener inner;
    if (!message_.MatchAndExplain(s.message(), &inner)) {
      *listener << "whose message \"" << s.message() << "\" does not match";
      if (!inner.str().empty()) *listener << ", " << inner.str();
      return false;
    }
    return true;
  }

  void DescribeTo(std::ostream* os) const {
    *os << "has code " << StatusCodeName(code_) << " and a message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not have code " << StatusCodeName(code_) << " or has a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  StatusCode code_;
  ::testing::Matcher<const std::string&> message_;
};

}  // namespace internal

// Matches a Status or Result<T> with `code` and a message that `message` matches.
template <typename MessageMatcher>
::testing::PolymorphicMatcher<internal::StatusIsMatcher> StatusIs(StatusCode code,
                                                                  MessageMatcher message) {
  return ::testing::MakePolymorphicMatcher(
      internal::StatusIsMatcher(code, ::testing::MatcherCast<const std::string&>(message)));
}

// Matches a Status or Result<T> with `code`, whatever the message.
inline ::testing::PolymorphicMatcher<internal::StatusIsMatcher> StatusIs(StatusCode code) {
  return StatusIs(code, ::testing::A<const std::string&>());
}

}  // namespace queuebox::testing
