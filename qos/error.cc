#include "qos/error.h"

namespace ari::qos {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kIo: return "io";
    case ErrorCode::kParse: return "parse";
    case ErrorCode::kInvalidPolicy: return "invalid_policy";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Error::ToString() const { return std::string(ErrorCodeName(code)) + ": " + message; }

}  // namespace ari::qos
