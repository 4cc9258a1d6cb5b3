#include "sim/error.h"

namespace ari::sim {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kIo: return "io";
    case ErrorCode::kFormat: return "format";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kParse: return "parse";
    case ErrorCode::kInvalidLog: return "invalid_log";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Error::ToString() const { return std::string(ErrorCodeName(code)) + ": " + message; }

}  // namespace ari::sim
