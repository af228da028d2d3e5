//===- Status.h - Errors as values for the Kiln runtime -------------------===//
//
// The runtime never throws and never aborts on bad input: every fallible
// function returns a `Status` (or a `StatusOr<T>` carrying either a value or
// the error), and callers propagate with KILN_RETURN_IF_ERROR /
// KILN_ASSIGN_OR_RETURN. This keeps a truncated artifact or a missing data
// file a one-line message for the user instead of a crash, and makes every
// error path visible at the call site (modelled on IREE's base/status.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_STATUS_H
#define KILN_RUNTIME_STATUS_H

#include <cassert>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace kiln::rt {

// Coarse error classes; the message carries the detail. The class decides the
// process exit code of kiln-run (all user-facing errors exit 1) and lets tests
// assert on the kind of failure without matching message text.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad user input: flags, data file contents
  kNotFound,           // a file or symbol that does not exist
  kDataLoss,           // a corrupt or truncated file
  kFailedPrecondition, // well-formed input that this runtime cannot run
  kUnavailable,        // an external tool (the host compiler) failed
  kInternal,           // a runtime bug or an OS call that should not fail
};

const char *statusCodeName(StatusCode code);

class [[nodiscard]] Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string &message() const { return message_; }

  // Returns a copy with `prefix` prepended to the message ("model.kart: " +
  // message), so low-level errors gain context as they propagate up.
  Status withPrefix(const std::string &prefix) const {
    if (ok())
      return *this;
    return Status(code_, prefix + message_);
  }

private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status okStatus() { return Status(); }

namespace detail {
template <typename... Args> std::string concat(const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
} // namespace detail

// Error constructors that stream their arguments, so call sites read like the
// message they produce: invalidArgument(path, ": has ", n, " tokens").
template <typename... Args> Status invalidArgument(const Args &...args) {
  return Status(StatusCode::kInvalidArgument, detail::concat(args...));
}
template <typename... Args> Status notFound(const Args &...args) {
  return Status(StatusCode::kNotFound, detail::concat(args...));
}
template <typename... Args> Status dataLoss(const Args &...args) {
  return Status(StatusCode::kDataLoss, detail::concat(args...));
}
template <typename... Args> Status failedPrecondition(const Args &...args) {
  return Status(StatusCode::kFailedPrecondition, detail::concat(args...));
}
template <typename... Args> Status unavailable(const Args &...args) {
  return Status(StatusCode::kUnavailable, detail::concat(args...));
}
template <typename... Args> Status internalError(const Args &...args) {
  return Status(StatusCode::kInternal, detail::concat(args...));
}

// Either a T or a non-OK Status. Accessing the value of an error is a
// programming bug and asserts; callers check ok() or use KILN_ASSIGN_OR_RETURN.
template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(Status status) : status_(std::move(status)) {
    assert(!status_.ok() && "StatusOr built from an OK status needs a value");
    if (status_.ok())
      status_ = internalError("StatusOr constructed from OK status");
  }
  StatusOr(T value) : value_(std::move(value)) {}

  bool ok() const { return status_.ok(); }
  const Status &status() const { return status_; }

  T &value() & {
    assert(ok());
    return *value_;
  }
  const T &value() const & {
    assert(ok());
    return *value_;
  }
  T &&value() && {
    assert(ok());
    return std::move(*value_);
  }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T &&operator*() && { return std::move(*this).value(); }

private:
  Status status_;
  std::optional<T> value_;
};

} // namespace kiln::rt

#define KILN_STATUS_CONCAT_INNER(a, b) a##b
#define KILN_STATUS_CONCAT(a, b) KILN_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is an error.
#define KILN_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::kiln::rt::Status kiln_status_ = (expr);                                  \
    if (!kiln_status_.ok())                                                    \
      return kiln_status_;                                                     \
  } while (false)

// `KILN_ASSIGN_OR_RETURN(auto x, f());` declares/assigns `x` from the value of
// the StatusOr `f()`, or returns its error from the enclosing function.
#define KILN_ASSIGN_OR_RETURN(lhs, expr)                                       \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_STATUS_CONCAT(kiln_statusor_, __LINE__),     \
                             lhs, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                             \
  auto tmp = (expr);                                                           \
  if (!tmp.ok())                                                               \
    return tmp.status();                                                       \
  lhs = std::move(tmp).value()

#endif // KILN_RUNTIME_STATUS_H
