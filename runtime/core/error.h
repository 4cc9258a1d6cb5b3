// Error type of the runtime module: recoverable failures return
// std::expected<T, Error>; no exceptions on the hot path, no abort/exit.
#pragma once

#include <expected>
#include <string>
#include <string_view>

namespace ari::runtime {

enum class ErrorCode {
  kIo,               // open/stat/mmap/read/write failed
  kFormat,           // malformed file content (bad magic, truncated, bad count...)
  kUnsupported,      // valid but not supported (tensor type, architecture...)
  kNotFound,         // missing key, tensor, token...
  kInvalidArgument,  // caller passed something out of range
  kOutOfMemory,      // arena or pool exhausted
  kInternal,
};

std::string_view ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // human readable context: file, offset, what was wrong

  std::string ToString() const;
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> MakeError(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message)});
}

}  // namespace ari::runtime
