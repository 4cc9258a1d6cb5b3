#include "thermal/error.h"

#include "thermal/reading.h"

namespace ari::thermal {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kIo: return "io";
    case ErrorCode::kFormat: return "format";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Error::ToString() const { return std::string(ErrorCodeName(code)) + ": " + message; }

std::string_view SensorStateName(SensorState s) {
  switch (s) {
    case SensorState::kOk: return "ok";
    case SensorState::kNoSensor: return "no_sensor";
    case SensorState::kVanished: return "vanished";
    case SensorState::kStale: return "stale";
    case SensorState::kInvalid: return "invalid";
  }
  return "unknown";
}

}  // namespace ari::thermal
