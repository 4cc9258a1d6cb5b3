#include "thermal/source.h"

#include <cmath>
#include <limits>

namespace ari::thermal {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

bool ReadingValidator::InRange(double c) const {
  return std::isfinite(c) && c >= limits_.min_celsius && c <= limits_.max_celsius;
}

Validated ReadingValidator::Held(SensorState state, int64_t now_ns) const {
  if (has_good_) return Validated{last_good_celsius_, state, last_good_ns_};
  return Validated{kNaN, state, now_ns};
}

Validated ReadingValidator::Observe(RawStatus status, double celsius, int64_t sample_ns,
                                    int64_t now_ns) {
  switch (status) {
    case RawStatus::kValue:
      answered_ = true;
      if (!InRange(celsius)) return Held(SensorState::kInvalid, now_ns);
      if (sample_ns > now_ns) sample_ns = now_ns;
      // A good value never replaces a newer one (replay can hand back old samples).
      if (!has_good_ || sample_ns >= last_good_ns_) {
        has_good_ = true;
        last_good_celsius_ = celsius;
        last_good_ns_ = sample_ns;
      }
      if (now_ns - sample_ns > limits_.max_age_ns) {
        return Validated{celsius, SensorState::kStale, sample_ns};
      }
      return Validated{celsius, SensorState::kOk, sample_ns};
    case RawStatus::kNoNewValue:
      answered_ = true;
      if (has_good_ && now_ns - last_good_ns_ <= limits_.max_age_ns) {
        return Held(SensorState::kOk, now_ns);
      }
      return Held(SensorState::kStale, now_ns);
    case RawStatus::kUnreadable: answered_ = true; return Held(SensorState::kInvalid, now_ns);
    case RawStatus::kMissing:
      return Held(answered_ ? SensorState::kVanished : SensorState::kNoSensor, now_ns);
  }
  return Held(SensorState::kInvalid, now_ns);
}

int SeverityRank(SensorState s) {
  switch (s) {
    case SensorState::kOk: return 0;
    case SensorState::kStale: return 1;
    case SensorState::kNoSensor: return 2;
    case SensorState::kInvalid: return 3;
    case SensorState::kVanished: return 4;
  }
  return 5;
}

int CombineHottest(const Validated* items, int n, int64_t now_ns, Validated& out) {
  if (n <= 0) {
    out = Validated{kNaN, SensorState::kNoSensor, now_ns};
    return -1;
  }
  int worst = 0;
  int hottest = -1;
  for (int i = 0; i < n; ++i) {
    if (SeverityRank(items[i].state) > SeverityRank(items[worst].state)) worst = i;
    if (std::isfinite(items[i].celsius) &&
        (hottest < 0 || items[i].celsius > items[hottest].celsius)) {
      hottest = i;
    }
  }
  if (items[worst].state == SensorState::kOk) {
    out = items[hottest];  // all ok -> all finite, hottest >= 0
    return hottest;
  }
  out.state = items[worst].state;
  if (hottest >= 0) {
    out.celsius = items[hottest].celsius;
    out.time_ns = items[hottest].time_ns;
  } else {
    out.celsius = kNaN;
    out.time_ns = now_ns;
  }
  return worst;
}

}  // namespace ari::thermal
