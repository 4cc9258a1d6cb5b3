#include "thermal/replay_source.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "thermal/sysfs_text.h"

namespace ari::thermal {
namespace {

bool ParseDouble(std::string_view s, double* out) {
  s = TrimWs(s);
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

std::vector<std::string_view> SplitCommas(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      fields.push_back(TrimWs(line.substr(start)));
      return fields;
    }
    fields.push_back(TrimWs(line.substr(start, comma - start)));
    start = comma + 1;
  }
}

std::unexpected<Error> LineError(std::string_view what, int line, const std::string& msg) {
  return MakeError(ErrorCode::kFormat, std::string(what) + ":" + std::to_string(line) + ": " + msg);
}

}  // namespace

Result<ReplayTrace> ReplayTrace::Load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return MakeError(ErrorCode::kIo, "cannot open trace " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return MakeError(ErrorCode::kIo, "cannot read trace " + path.string());
  return Parse(ss.str(), path.string());
}

Result<ReplayTrace> ReplayTrace::Parse(std::string_view text, std::string_view what) {
  std::vector<TracePoint> points;
  int columns = 0;  // 2 or 3 once known
  bool seen_content = false;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = (nl == std::string_view::npos) ? text.size() + 1 : nl + 1;
    ++line_no;
    line = TrimWs(line);
    if (line.empty() || line.front() == '#') continue;
    auto fields = SplitCommas(line);
    const bool first = !seen_content;
    seen_content = true;
    if (first && fields[0] == "time_s") {
      if (fields.size() == 2 && fields[1] == "celsius") {
        columns = 2;
      } else if (fields.size() == 3 && fields[1] == "celsius" && fields[2] == "ambient") {
        columns = 3;
      } else {
        return LineError(what, line_no,
                         "bad header '" + std::string(line) +
                             "' (expected time_s,celsius or time_s,celsius,ambient)");
      }
      continue;
    }
    if (fields.size() != 2 && fields.size() != 3) {
      return LineError(
          what, line_no,
          "expected 2 or 3 comma-separated fields, got " + std::to_string(fields.size()));
    }
    if (columns == 0) columns = static_cast<int>(fields.size());
    if (static_cast<int>(fields.size()) != columns) {
      return LineError(what, line_no,
                       "expected " + std::to_string(columns) +
                           " fields like the lines before, got " + std::to_string(fields.size()));
    }
    TracePoint p;
    if (!ParseDouble(fields[0], &p.time_s) || !std::isfinite(p.time_s) || p.time_s < 0) {
      return LineError(what, line_no,
                       "time_s '" + std::string(fields[0]) + "' is not a finite number >= 0");
    }
    if (!points.empty() && p.time_s <= points.back().time_s) {
      return LineError(what, line_no,
                       "time_s " + std::string(fields[0]) + " is not after the previous sample");
    }
    if (fields[1].empty()) {
      p.present = false;
      p.celsius = std::nan("");
    } else if (!ParseDouble(fields[1], &p.celsius)) {
      return LineError(what, line_no,
                       "celsius '" + std::string(fields[1]) + "' is not a number, nan or empty");
    }
    if (columns == 3 && (!ParseDouble(fields[2], &p.ambient) || !std::isfinite(p.ambient))) {
      return LineError(what, line_no,
                       "ambient '" + std::string(fields[2]) + "' is not a finite number");
    }
    points.push_back(p);
  }
  if (points.empty()) return MakeError(ErrorCode::kFormat, std::string(what) + ": no samples");
  ReplayTrace trace;
  trace.points_ = std::move(points);
  trace.has_ambient_ = columns == 3;
  return trace;
}

Result<ReplayTrace> ReplayTrace::FromPoints(std::vector<TracePoint> points, bool has_ambient) {
  if (points.empty()) return MakeError(ErrorCode::kInvalidArgument, "trace has no samples");
  for (size_t i = 0; i < points.size(); ++i) {
    const TracePoint& p = points[i];
    if (!std::isfinite(p.time_s) || p.time_s < 0 || (i > 0 && p.time_s <= points[i - 1].time_s)) {
      return MakeError(
          ErrorCode::kInvalidArgument,
          "sample " + std::to_string(i) + ": time_s must be finite, >= 0 and increasing");
    }
    if (has_ambient && !std::isfinite(p.ambient)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "sample " + std::to_string(i) + ": ambient must be finite");
    }
  }
  ReplayTrace trace;
  trace.points_ = std::move(points);
  trace.has_ambient_ = has_ambient;
  return trace;
}

TraceSample ReplayTrace::At(double t_s, Interpolation mode, double max_gap_s) const {
  TraceSample s;
  if (points_.empty() || !(t_s >= points_.front().time_s)) return s;  // kMissing
  auto it = std::upper_bound(points_.begin(), points_.end(), t_s,
                             [](double t, const TracePoint& p) { return t < p.time_s; });
  const size_t i = static_cast<size_t>(it - points_.begin()) - 1;
  const TracePoint& a = points_[i];
  const TracePoint* b = (i + 1 < points_.size()) ? &points_[i + 1] : nullptr;
  const double frac = b ? (t_s - a.time_s) / (b->time_s - a.time_s) : 0.0;
  s.ambient = (b && has_ambient_) ? a.ambient + frac * (b->ambient - a.ambient) : a.ambient;
  if (!a.present) return s;  // kMissing
  s.status = RawStatus::kValue;
  if (mode == Interpolation::kLinear && b && b->present && std::isfinite(a.celsius) &&
      std::isfinite(b->celsius) && b->time_s - a.time_s <= max_gap_s) {
    s.celsius = a.celsius + frac * (b->celsius - a.celsius);
    s.sample_time_s = t_s;
  } else {
    s.celsius = a.celsius;
    s.sample_time_s = a.time_s;
  }
  return s;
}

ReplaySource::ReplaySource(ReplayTrace trace, const Clock& clock, int64_t start_ns,
                           ReplayOptions options)
    : trace_(std::move(trace)),
      clock_(clock),
      start_ns_(start_ns),
      options_(std::move(options)),
      validator_(options_.limits) {}

double ReplaySource::TraceTime(int64_t now_ns) const {
  double t = NsToSeconds(now_ns - start_ns_);
  const double period = trace_.duration_s();
  if (options_.loop && period > 0 && t >= 0) t = std::fmod(t, period);
  return t;
}

double ReplaySource::AmbientNow() const {
  const double max_gap_s = NsToSeconds(options_.limits.max_age_ns);
  return trace_.At(TraceTime(clock_.NowNs()), options_.interpolation, max_gap_s).ambient;
}

void ReplaySource::ReadInto(Reading& out) {
  const int64_t now = clock_.NowNs();
  const double t = TraceTime(now);
  const TraceSample s =
      trace_.At(t, options_.interpolation, NsToSeconds(options_.limits.max_age_ns));
  const int64_t sample_ns = now - SecondsToNs(t - s.sample_time_s);
  const Validated v = validator_.Observe(s.status, s.celsius, sample_ns, now);
  out.celsius = v.celsius;
  out.state = v.state;
  out.time_ns = v.time_ns;
  out.source.assign(options_.label);
}

}  // namespace ari::thermal
