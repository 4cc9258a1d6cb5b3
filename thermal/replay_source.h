// Replay of a recorded temperature trace, driven by a Clock.
//
// CSV format (one sample per line):
//   time_s,celsius[,ambient]
// - '#' starts a comment line; blank lines are skipped; fields may be padded
//   with spaces; CRLF is accepted.
// - An optional header line "time_s,celsius" or "time_s,celsius,ambient" may be
//   the first non-comment line.
// - time_s: finite, >= 0, strictly increasing.
// - celsius: a number, "nan" (replays as kInvalid; also -273, 200 -> kInvalid),
//   or empty (the sensor did not answer at that time: kVanished, or kNoSensor
//   if it never answered).
// - ambient: optional; either every data line has it or none does (a number).
// Bad lines fail Load/Parse with an Error naming the line number.
//
// Values between samples (trace time t = (clock.NowNs() - start_ns) / 1e9):
// - kLinear (default): linear interpolation between sample i (t_i <= t) and
//   sample i+1 when both are finite numbers and t_{i+1} - t_i <= max_age;
//   otherwise the step value of sample i (a longer gap is missing data).
// - kStep: always the value of sample i.
// - Before the first sample: kNoSensor. A held (non-interpolated) value is
//   measured at t_i, so it reads kStale once t - t_i > max_age, in particular
//   after the end of the trace unless `loop` is set (then t wraps modulo the
//   time of the last sample).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "thermal/clock.h"
#include "thermal/error.h"
#include "thermal/source.h"

namespace ari::thermal {

struct TracePoint {
  double time_s = 0.0;
  double celsius = 0.0;  // may be NaN or out of range (fault injection)
  bool present = true;   // false: empty celsius field (sensor silent)
  double ambient = 0.0;  // meaningful when the trace has_ambient()
};

enum class Interpolation : uint8_t { kLinear, kStep };

// What the trace says at one instant.
struct TraceSample {
  RawStatus status = RawStatus::kMissing;  // kValue or kMissing
  double celsius = 0.0;
  double sample_time_s = 0.0;  // when the value was measured (t, or t_i if held)
  double ambient = 0.0;        // interpolated ambient (when the trace has one)
};

class ReplayTrace {
 public:
  static Result<ReplayTrace> Load(const std::filesystem::path& path);
  // `what` names the text in error messages (a path, "inline").
  static Result<ReplayTrace> Parse(std::string_view text, std::string_view what = "trace");
  // From points built elsewhere (e.g. a drive log decoded by sim/). Times must be
  // finite, >= 0, strictly increasing; at least one point.
  static Result<ReplayTrace> FromPoints(std::vector<TracePoint> points, bool has_ambient);

  TraceSample At(double t_s, Interpolation mode, double max_gap_s) const;

  const std::vector<TracePoint>& points() const { return points_; }
  bool has_ambient() const { return has_ambient_; }
  double duration_s() const { return points_.empty() ? 0.0 : points_.back().time_s; }

 private:
  std::vector<TracePoint> points_;
  bool has_ambient_ = false;
};

struct ReplayOptions {
  Interpolation interpolation = Interpolation::kLinear;
  bool loop = false;
  ValidationLimits limits;
  std::string label = "replay";  // source string in readings
};

class ReplaySource final : public TemperatureSource {
 public:
  // Trace time 0 is clock time start_ns. `clock` must outlive the source.
  ReplaySource(ReplayTrace trace, const Clock& clock, int64_t start_ns, ReplayOptions options = {});

  void ReadInto(Reading& out) override;
  std::string_view name() const override { return options_.label; }

  // Trace time (seconds, after looping) for a clock time.
  double TraceTime(int64_t now_ns) const;
  // The trace's ambient at the current clock time (0 when it has none).
  double AmbientNow() const;
  const ReplayTrace& trace() const { return trace_; }

 private:
  ReplayTrace trace_;
  const Clock& clock_;
  int64_t start_ns_;
  ReplayOptions options_;
  ReadingValidator validator_;
};

}  // namespace ari::thermal
