// Temperature from libsensors (lm-sensors, <sensors/sensors.h>): what a car uses.
//
// Selection (SensorsOptions):
// - chip: a libsensors chip name or pattern ("coretemp-isa-0000", "k10temp-*");
//   empty: every chip that looks CPU-related (prefix coretemp, k10temp, k8temp,
//   zenpower, via_cputemp, cpu_thermal, cpu-thermal, soc_thermal, soc-thermal,
//   x86_pkg_temp, scpi_sensors, or a prefix containing "cpu" or "soc").
// - feature: a feature name ("temp1") or its label ("Package id 0"); empty: all
//   temperature inputs (SENSORS_SUBFEATURE_TEMP_INPUT) of the selected chips.
// Every selected input is read and the hottest is reported; any selected input
// in a fault state makes the reading that fault (CombineHottest, source.h).
// Nothing selected at start (e.g. libsensors in a VM finds no chips): every read
// is kNoSensor and detail() says why. An input that fails to read later: kVanished.
//
// libsensors is one global library: SensorsLibraryRef counts users (under a
// mutex) and calls sensors_init on the first and sensors_cleanup after the
// last; all users must share the same configuration file. libsensors calls are
// serialised by the same mutex. Note: libsensors reads sysfs with stdio, so a
// read allocates inside libc.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "thermal/clock.h"
#include "thermal/error.h"
#include "thermal/source.h"

struct sensors_chip_name;  // <sensors/sensors.h>

namespace ari::thermal {

// RAII reference on the global libsensors state (move-only).
class SensorsLibraryRef {
 public:
  // config empty: the library default (/etc/sensors3.conf + /etc/sensors.d).
  // Errors: kIo (config unreadable), kFormat (config parse errors, with line),
  // kUnavailable (sensors_init failed, or already initialised with another config).
  static Result<SensorsLibraryRef> Acquire(const std::filesystem::path& config = {});

  SensorsLibraryRef(SensorsLibraryRef&& other) noexcept : held_(other.held_) {
    other.held_ = false;
  }
  SensorsLibraryRef& operator=(SensorsLibraryRef&& other) noexcept;
  SensorsLibraryRef(const SensorsLibraryRef&) = delete;
  SensorsLibraryRef& operator=(const SensorsLibraryRef&) = delete;
  ~SensorsLibraryRef();

  // Number of live references (0: libsensors is not initialised). For tests.
  static int ActiveRefs();

 private:
  SensorsLibraryRef() = default;
  void Release();
  bool held_ = false;
};

struct SensorsOptions {
  std::filesystem::path config_file;  // libsensors configuration; empty: default
  std::string chip;                   // chip name/pattern; empty: CPU-related chips
  std::string feature;                // feature name or label; empty: all temp inputs
  ValidationLimits limits;
};

// True for chip prefixes the default selection treats as CPU-related.
bool IsCpuChipPrefix(std::string_view prefix);

class SensorsSource final : public TemperatureSource {
 public:
  // Errors are configuration errors (see SensorsLibraryRef::Acquire; a chip
  // pattern libsensors cannot parse -> kInvalidArgument). Finding nothing is not
  // an error: the source then reads kNoSensor.
  static Result<std::unique_ptr<SensorsSource>> Open(const SensorsOptions& options,
                                                     const Clock& clock);
  SensorsSource(const SensorsSource&) = delete;
  SensorsSource& operator=(const SensorsSource&) = delete;
  ~SensorsSource() override;

  void ReadInto(Reading& out) override;
  std::string_view name() const override { return "libsensors"; }

  // Selected inputs, e.g. "libsensors:coretemp-isa-0000/temp1(Package id 0)".
  std::vector<std::string> input_names() const;
  // Why nothing was selected (empty when inputs were found).
  const std::string& detail() const { return detail_; }

 private:
  struct Input {
    const sensors_chip_name* chip = nullptr;  // owned by libsensors (valid while lib_ held)
    int subfeature = 0;                       // SENSORS_SUBFEATURE_TEMP_INPUT number
    std::string label;
    ReadingValidator validator;
  };
  SensorsSource(SensorsLibraryRef lib, const Clock& clock);

  SensorsLibraryRef lib_;
  const Clock& clock_;
  std::vector<Input> inputs_;
  std::vector<Validated> scratch_;
  std::string detail_;
};

}  // namespace ari::thermal
