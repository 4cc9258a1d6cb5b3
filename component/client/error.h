// Error type of the component module (DDS transport, client library, node shell):
// recoverable failures return std::expected<T, Error>; no exceptions, no abort/exit.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace ari::component {

enum class ErrorCode {
  kDds,              // a Cyclone DDS call failed (dds_rc holds its return code)
  kConfig,           // DDS config missing/unreadable, bad domain id
  kInvalidArgument,  // caller passed something out of range (sizes, enums, ids)
  kTimeout,          // nothing happened within the caller's timeout
  kNodeAbsent,       // no ARI node discovered within the timeout
  kNodeLost,         // the node's liveliness was lost while a request was in flight
  kRejected,         // the node answered with a terminal non-DONE status at admission
  kDeadlineMissed,   // the node ended the request with DEADLINE_MISSED
  kCancelled,        // the request ended with CANCELLED
  kFailed,           // the request ended with FAILED or SHUTDOWN
  kClosed,           // the object was shut down / stream already finished
  kInternal,
};

std::string_view ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // human readable context: which call, which entity, why
  int32_t dds_rc = 0;   // DDS_RETCODE_* when code == kDds (else 0)
  int32_t status = -1;  // ari_ChunkStatus of the terminal chunk when the node answered (else -1)

  std::string ToString() const;
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> MakeError(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message), 0, -1});
}

// kDds error for a failed Cyclone call: "<what>: <dds_strretcode(rc)>".
std::unexpected<Error> DdsError(int32_t rc, std::string_view what);

}  // namespace ari::component
