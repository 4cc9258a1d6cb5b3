// What the thermal layer tells the governor: one temperature reading and its health.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ari::thermal {

// Faults are states, not crashes. Anything but kOk makes the governor run its
// documented conservative mode.
enum class SensorState : uint8_t {
  kOk = 0,
  kNoSensor,  // nothing found at start-up (e.g. libsensors in a VM)
  kVanished,  // a sensor that used to answer no longer does
  kStale,     // last good value older than the configured max age
  kInvalid,   // NaN, below -40 C / above 150 C (e.g. -273 C, 200 C), unreadable text
};

std::string_view SensorStateName(SensorState s);

struct Reading {
  double celsius = 0.0;  // meaningful only when state == kOk (last good otherwise,
                         // NaN when there never was one)
  SensorState state = SensorState::kNoSensor;
  int64_t time_ns = 0;  // clock time the value was taken (steady or virtual)
  std::string source;   // e.g. "sysfs:thermal_zone0(x86_pkg_temp)", "rc-model"

  bool ok() const { return state == SensorState::kOk; }
};

}  // namespace ari::thermal
