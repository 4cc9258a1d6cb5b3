// TemperatureSource: the one interface the governor reads temperatures through,
// plus the validation rules every source shares (ReadingValidator).
//
// Fault rules (the same for sysfs, libsensors, replay and the RC model):
//   value NaN, < min_celsius (-40 C) or > max_celsius (150 C)  -> kInvalid
//   text that is not a number                                  -> kInvalid
//     (kInvalid keeps celsius = last good value, time_ns = its time)
//   no new value (read failed transiently, trace gap/end) and the last good value
//     is older than max_age_ns                                  -> kStale
//     (younger: kOk with the last good value and its old time_ns)
//   a sensor that was found/answered before and is now gone     -> kVanished
//   nothing found at start (and never answered)                 -> kNoSensor
// States are per read, not latched: a sensor that comes back reads kOk again
// (hysteresis is the governor's business). When no good value was ever seen,
// celsius is NaN in every non-ok state.
#pragma once

#include <cstdint>
#include <string_view>

#include "thermal/clock.h"
#include "thermal/reading.h"

namespace ari::thermal {

inline constexpr double kMinValidCelsius = -40.0;
inline constexpr double kMaxValidCelsius = 150.0;
inline constexpr int64_t kDefaultMaxAgeNs = 2 * kNsPerSecond;

struct ValidationLimits {
  double min_celsius = kMinValidCelsius;
  double max_celsius = kMaxValidCelsius;
  int64_t max_age_ns = kDefaultMaxAgeNs;  // older last-good value -> kStale
};

class TemperatureSource {
 public:
  virtual ~TemperatureSource() = default;

  // Fills `out` (reusing its string capacity: no heap allocation after the first
  // call for a given sensor). Never throws; faults are states. One reader at a
  // time per source (sources keep per-sensor validation state).
  virtual void ReadInto(Reading& out) = 0;
  // Short stable description, e.g. "sysfs:/sys/class/thermal", "rc-model".
  virtual std::string_view name() const = 0;

  // Convenience: a fresh Reading (allocates the source string).
  Reading Read() {
    Reading r;
    ReadInto(r);
    return r;
  }
};

// What a source observed on one read attempt, before validation.
enum class RawStatus : uint8_t {
  kValue,       // a number was obtained (may still be NaN / out of range)
  kNoNewValue,  // the sensor is there but gave nothing new (EAGAIN, empty, trace gap)
  kUnreadable,  // the sensor answered with something that is not a number
  kMissing,     // the sensor is not there (file gone, chip gone, nothing found)
};

// Result of validating one observation (no strings: cheap to keep per sensor).
struct Validated {
  double celsius = 0.0;  // value (kOk) or last good (otherwise; NaN when none)
  SensorState state = SensorState::kNoSensor;
  int64_t time_ns = 0;  // when `celsius` was measured (now when nothing known)
};

// Per-sensor validation state machine. Not thread-safe (one per sensor).
class ReadingValidator {
 public:
  explicit ReadingValidator(ValidationLimits limits = {}) : limits_(limits) {}

  // The sensor was found at start-up: a later kMissing means kVanished.
  void MarkPresent() { answered_ = true; }

  // Validates one observation made at now_ns. For kValue, sample_ns is when the
  // value was actually measured (== now_ns for live sensors; replay/model may pass
  // older times, and a value older than max_age reads kStale).
  Validated Observe(RawStatus status, double celsius, int64_t sample_ns, int64_t now_ns);

  bool has_good() const { return has_good_; }
  double last_good_celsius() const { return last_good_celsius_; }
  int64_t last_good_ns() const { return last_good_ns_; }
  const ValidationLimits& limits() const { return limits_; }
  bool InRange(double c) const;

 private:
  Validated Held(SensorState state, int64_t now_ns) const;

  ValidationLimits limits_;
  bool answered_ = false;
  bool has_good_ = false;
  double last_good_celsius_ = 0.0;
  int64_t last_good_ns_ = 0;
};

// Severity order used when several sensors are combined (higher = worse):
// kOk < kStale < kNoSensor < kInvalid < kVanished.
int SeverityRank(SensorState s);

// Combines per-sensor results into the "hottest" reading: all ok -> the hottest
// value; any fault -> the worst state (SeverityRank), with celsius the hottest
// value known (ok or last good, NaN if none). Conservative on purpose: a missing
// zone might be the hottest one. Returns the index of the sensor to name in the
// reading: the hottest when all are ok, else the worst one (-1 when n == 0; then
// out = {NaN, kNoSensor}).
int CombineHottest(const Validated* items, int n, int64_t now_ns, Validated& out);

}  // namespace ari::thermal
