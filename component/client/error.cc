#include "component/client/error.h"

#include <dds/dds.h>

namespace ari::component {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kDds: return "dds";
    case ErrorCode::kConfig: return "config";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kNodeAbsent: return "node_absent";
    case ErrorCode::kNodeLost: return "node_lost";
    case ErrorCode::kRejected: return "rejected";
    case ErrorCode::kDeadlineMissed: return "deadline_missed";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kFailed: return "failed";
    case ErrorCode::kClosed: return "closed";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Error::ToString() const {
  std::string s(ErrorCodeName(code));
  s += ": ";
  s += message;
  return s;
}

std::unexpected<Error> DdsError(int32_t rc, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += dds_strretcode(rc);
  return std::unexpected<Error>(Error{ErrorCode::kDds, std::move(msg), rc, -1});
}

}  // namespace ari::component
