// Error type of the sim module (drive logs, scenarios, replay): recoverable
// failures return std::expected<T, Error>; no exceptions, no abort.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace ari::sim {

enum class ErrorCode {
  kIo,               // file missing, unreadable or unwritable
  kFormat,           // not a drive log (bad magic, unknown version)
  kCorrupt,          // a binary record failed its checks (message names the byte offset)
  kParse,            // text format syntax error (message names line:column)
  kInvalidLog,       // parsed but wrong (time going backwards, missing fields)
  kInvalidArgument,  // caller passed something out of range (unknown scenario, bad duration)
  kInternal,
};

std::string_view ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // human readable, one line where possible

  std::string ToString() const;
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> MakeError(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message)});
}

}  // namespace ari::sim
