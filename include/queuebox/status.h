// status.h: the error model of QueueBox C++.
//
// Fallible functions return Status or Result<T>; no exception crosses a module boundary
// (design/architecture.md §4). A code says whether the caller may retry: kUnavailable,
// kDeadlineExceeded and kResourceExhausted are transient; every other failure is permanent.
//
// Thread-safety: values; safe to copy and move between threads.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace queuebox {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad input: configuration, a row, a request. Not retried.
  kNotFound,           // the named thing does not exist. Not retried.
  kAlreadyExists,      // e.g. a migration history that is already there. Not retried.
  kFailedPrecondition, // the system is not in a state that allows the call. Not retried.
  kPermissionDenied,   // authentication or authorisation failed. Not retried.
  kUnavailable,        // a peer (database, broker, receiver) cannot be reached. Retried.
  kDeadlineExceeded,   // a bounded wait ran out. Retried.
  kResourceExhausted,  // a peer pushed back (queue full, 429). Retried.
  kAborted,            // a claim or transaction was lost to another party. Not retried.
  kInternal,           // a broken invariant in our code or a library. Not retried.
};

std::string_view StatusCodeName(StatusCode code);

// True for the codes that a caller may retry after a backoff.
constexpr bool IsTransient(StatusCode code) {
  return code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded ||
         code == StatusCode::kResourceExhausted;
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "CODE: message", for logs (the message must already be redacted by its producer).
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }

// Result<T>: a T or a non-OK Status (shaped like std::expected, which g++ 12 lacks in C++20).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) v_ = Status(StatusCode::kInternal, "Result built from OK");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  // The status: OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace queuebox

// QB_RETURN_IF_ERROR(expr): return the Status of expr when it is not OK.
#define QB_RETURN_IF_ERROR(expr)                \
  do {                                          \
    ::queuebox::Status qb_status_ = (expr);     \
    if (!qb_status_.ok()) return qb_status_;    \
  } while (0)

#define QB_CONCAT_INNER(a, b) a##b
#define QB_CONCAT(a, b) QB_CONCAT_INNER(a, b)
// QB_ASSIGN_OR_RETURN(lhs, expr): lhs = value of expr, or return its Status.
#define QB_ASSIGN_OR_RETURN(lhs, expr)                         \
  auto QB_CONCAT(qb_result_, __LINE__) = (expr);               \
  if (!QB_CONCAT(qb_result_, __LINE__).ok())                   \
    return QB_CONCAT(qb_result_, __LINE__).status();           \
  lhs = std::move(QB_CONCAT(qb_result_, __LINE__)).value()

// QB_CHECK(cond, msg): an impossible state; abort with a message (architecture §4).
#define QB_CHECK(cond, msg) ::queuebox::internal::CheckOrDie((cond), #cond, (msg), __FILE__, __LINE__)
namespace queuebox::internal {
void CheckOrDie(bool ok, const char* expr, std::string_view msg, const char* file, int line);
}
