// Error type of the thermal module: recoverable failures (bad configuration,
// unreadable trace files, bad options) return std::expected<T, Error>.
// Sensor faults at run time are NOT errors: they are SensorState values in a
// Reading (see reading.h, source.h).
#pragma once

#include <expected>
#include <string>
#include <string_view>

namespace ari::thermal {

enum class ErrorCode {
  kIo,               // open/read failed
  kFormat,           // malformed content (CSV trace line, sysfs text, libsensors config)
  kNotFound,         // a named chip/feature/zone/CPU does not exist
  kInvalidArgument,  // caller passed something out of range (negative dt, bad params)
  kUnavailable,      // a library or resource cannot be used now (libsensors state)
  kInternal,
};

std::string_view ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // human readable context: file, line, field, what was wrong

  std::string ToString() const;
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> MakeError(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message)});
}

}  // namespace ari::thermal
