//===- Status.cpp - Names of status codes ---------------------------------===//
//
// Kept out of the header so the switch is compiled once; used in test
// failure output and debug logs.
//
//===----------------------------------------------------------------------===//

#include "runtime/Status.h"

namespace kiln::rt {

const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::kOk:
    return "OK";
  case StatusCode::kInvalidArgument:
    return "INVALID_ARGUMENT";
  case StatusCode::kNotFound:
    return "NOT_FOUND";
  case StatusCode::kDataLoss:
    return "DATA_LOSS";
  case StatusCode::kFailedPrecondition:
    return "FAILED_PRECONDITION";
  case StatusCode::kUnavailable:
    return "UNAVAILABLE";
  case StatusCode::kInternal:
    return "INTERNAL";
  }
  return "UNKNOWN";
}

} // namespace kiln::rt
