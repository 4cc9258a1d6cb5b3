#include "thermal/sensors_source.h"

#include <sensors/error.h>
#include <sensors/sensors.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace ari::thermal {
namespace {

struct LibState {
  std::mutex mu;
  int refs = 0;
  std::string config;        // config path in use ("" = default)
  std::string parse_errors;  // collected during sensors_init
};

LibState& State() {
  static LibState state;
  return state;
}

// Called by libsensors during sensors_init (State().mu is held by the caller).
void CollectParseError(const char* err, const char* filename, int lineno) {
  std::string& out = State().parse_errors;
  if (!out.empty()) out += "; ";
  if (filename) {
    out += std::string(filename) + ":" + std::to_string(lineno) + ": ";
  } else {
    out += "line " + std::to_string(lineno) + ": ";
  }
  out += err ? err : "parse error";
}

void CollectParseErrorNoFile(const char* err, int lineno) {
  CollectParseError(err, nullptr, lineno);
}

std::string ChipName(const sensors_chip_name* chip) {
  char buf[256];
  if (sensors_snprintf_chip_name(buf, sizeof(buf), chip) < 0) {
    return chip->prefix ? chip->prefix : "?";
  }
  return buf;
}

}  // namespace

Result<SensorsLibraryRef> SensorsLibraryRef::Acquire(const std::filesystem::path& config) {
  LibState& st = State();
  std::lock_guard lock(st.mu);
  const std::string wanted = config.string();
  if (st.refs > 0) {
    if (wanted != st.config) {
      return MakeError(ErrorCode::kUnavailable, "libsensors already initialised with config '" +
                                                    st.config + "', cannot use '" + wanted +
                                                    "' at the same time");
    }
    ++st.refs;
    SensorsLibraryRef ref;
    ref.held_ = true;
    return ref;
  }
  FILE* file = nullptr;
  if (!wanted.empty()) {
    file = std::fopen(wanted.c_str(), "r");
    if (!file) return MakeError(ErrorCode::kIo, "cannot open libsensors config " + wanted);
  }
  st.parse_errors.clear();
  auto* old_wfn = sensors_parse_error_wfn;
  auto* old_fn = sensors_parse_error;
  sensors_parse_error_wfn = &CollectParseError;
  sensors_parse_error = &CollectParseErrorNoFile;
  const int rc = sensors_init(file);
  sensors_parse_error_wfn = old_wfn;
  sensors_parse_error = old_fn;
  if (file) std::fclose(file);
  if (rc != 0) {
    sensors_cleanup();
    std::string msg = "sensors_init failed: " + std::string(sensors_strerror(rc));
    if (!st.parse_errors.empty()) msg += " (" + st.parse_errors + ")";
    return MakeError(rc == SENSORS_ERR_PARSE || rc == -SENSORS_ERR_PARSE ? ErrorCode::kFormat
                                                                         : ErrorCode::kUnavailable,
                     msg);
  }
  if (!st.parse_errors.empty()) {
    // libsensors recovers from syntax errors and returns 0: treat them as errors.
    sensors_cleanup();
    return MakeError(ErrorCode::kFormat, "libsensors config " +
                                             (wanted.empty() ? std::string("(default)") : wanted) +
                                             ": " + st.parse_errors);
  }
  st.config = wanted;
  st.refs = 1;
  SensorsLibraryRef ref;
  ref.held_ = true;
  return ref;
}

SensorsLibraryRef& SensorsLibraryRef::operator=(SensorsLibraryRef&& other) noexcept {
  if (this != &other) {
    Release();
    held_ = other.held_;
    other.held_ = false;
  }
  return *this;
}

SensorsLibraryRef::~SensorsLibraryRef() { Release(); }

void SensorsLibraryRef::Release() {
  if (!held_) return;
  held_ = false;
  LibState& st = State();
  std::lock_guard lock(st.mu);
  if (--st.refs == 0) {
    sensors_cleanup();
    st.config.clear();
  }
}

int SensorsLibraryRef::ActiveRefs() {
  LibState& st = State();
  std::lock_guard lock(st.mu);
  return st.refs;
}

bool IsCpuChipPrefix(std::string_view prefix) {
  static constexpr std::string_view kKnown[] = {
      "coretemp",    "k10temp",     "k8temp",      "zenpower",     "via_cputemp", "cpu_thermal",
      "cpu-thermal", "soc_thermal", "soc-thermal", "x86_pkg_temp", "scpi_sensors"};
  for (auto k : kKnown) {
    if (prefix == k) return true;
  }
  std::string lower(prefix);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("cpu") != std::string::npos || lower.find("soc") != std::string::npos;
}

SensorsSource::SensorsSource(SensorsLibraryRef lib, const Clock& clock)
    : lib_(std::move(lib)), clock_(clock) {}

SensorsSource::~SensorsSource() {
  inputs_.clear();  // chip pointers die with the library reference released below
}

Result<std::unique_ptr<SensorsSource>> SensorsSource::Open(const SensorsOptions& options,
                                                           const Clock& clock) {
  auto lib = SensorsLibraryRef::Acquire(options.config_file);
  if (!lib) return std::unexpected(lib.error());
  std::unique_ptr<SensorsSource> src(new SensorsSource(std::move(*lib), clock));

  LibState& st = State();
  std::lock_guard lock(st.mu);
  sensors_chip_name match{};
  const bool have_match = !options.chip.empty();
  if (have_match && sensors_parse_chip_name(options.chip.c_str(), &match) != 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "libsensors cannot parse chip name '" + options.chip + "'");
  }
  int chips_seen = 0;
  int chip_nr = 0;
  while (const sensors_chip_name* chip =
             sensors_get_detected_chips(have_match ? &match : nullptr, &chip_nr)) {
    ++chips_seen;
    if (!have_match && !IsCpuChipPrefix(chip->prefix ? chip->prefix : "")) continue;
    const std::string chip_name = ChipName(chip);
    int feat_nr = 0;
    while (const sensors_feature* feat = sensors_get_features(chip, &feat_nr)) {
      if (feat->type != SENSORS_FEATURE_TEMP) continue;
      char* raw_label = sensors_get_label(chip, feat);
      const std::string label = raw_label ? raw_label : feat->name;
      std::free(raw_label);
      if (!options.feature.empty() && options.feature != feat->name && options.feature != label) {
        continue;
      }
      const sensors_subfeature* sub =
          sensors_get_subfeature(chip, feat, SENSORS_SUBFEATURE_TEMP_INPUT);
      if (!sub) continue;
      std::string input_label = "libsensors:";
      input_label.append(chip_name).append("/").append(feat->name).append("(").append(label);
      input_label.append(")");
      Input in{chip, sub->number, std::move(input_label), ReadingValidator(options.limits)};
      in.validator.MarkPresent();
      src->inputs_.push_back(std::move(in));
    }
  }
  if (have_match) sensors_free_chip_name(&match);
  if (src->inputs_.empty()) {
    std::string what = options.chip.empty() ? std::string("CPU-related chip")
                                            : "chip matching '" + options.chip + "'";
    if (!options.feature.empty()) what += " with temperature feature '" + options.feature + "'";
    src->detail_ = "libsensors found " + std::to_string(chips_seen) +
                   " chip(s), no temperature input on a " + what;
  }
  src->scratch_.assign(src->inputs_.size(), Validated{});
  return src;
}

std::vector<std::string> SensorsSource::input_names() const {
  std::vector<std::string> names;
  names.reserve(inputs_.size());
  for (const auto& in : inputs_) names.push_back(in.label);
  return names;
}

void SensorsSource::ReadInto(Reading& out) {
  const int64_t now = clock_.NowNs();
  {
    std::lock_guard lock(State().mu);
    for (size_t i = 0; i < inputs_.size(); ++i) {
      Input& in = inputs_[i];
      double value = 0.0;
      const int rc = sensors_get_value(in.chip, in.subfeature, &value);
      scratch_[i] = rc < 0 ? in.validator.Observe(RawStatus::kMissing, 0.0, now, now)
                           : in.validator.Observe(RawStatus::kValue, value, now, now);
    }
  }
  Validated combined;
  const int idx = CombineHottest(scratch_.data(), static_cast<int>(scratch_.size()), now, combined);
  out.celsius = combined.celsius;
  out.state = combined.state;
  out.time_ns = combined.time_ns;
  out.source.assign(idx >= 0 ? std::string_view(inputs_[static_cast<size_t>(idx)].label)
                             : std::string_view("libsensors"));
}

}  // namespace ari::thermal
