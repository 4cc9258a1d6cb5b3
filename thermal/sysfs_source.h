// Temperature from Linux thermal zones: <root>/thermal_zone*/temp (millidegrees
// Celsius as decimal text) with <root>/thermal_zone*/type (e.g. "cpu_thermal",
// "x86_pkg_temp"). root defaults to /sys/class/thermal; tests point it at a fake
// tree in a temp dir.
//
// Zones are found once, at construction (Rescan() to look again). By default
// every zone matching the type filter is read and the hottest is reported; any
// matching zone in a fault state makes the whole reading that fault (see
// CombineHottest in source.h: a vanished zone might have been the hottest).
// No zone found -> every read is kNoSensor.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "thermal/clock.h"
#include "thermal/source.h"

namespace ari::thermal {

struct SysfsOptions {
  std::filesystem::path root = "/sys/class/thermal";
  // Accept zones whose `type` equals one of these; empty: every zone.
  std::vector<std::string> types;
  // Accept only these zone directory names ("thermal_zone3"); empty: any.
  std::vector<std::string> zones;
  ValidationLimits limits;
};

class SysfsSource final : public TemperatureSource {
 public:
  // `clock` must outlive the source.
  SysfsSource(SysfsOptions options, const Clock& clock);

  void ReadInto(Reading& out) override;
  std::string_view name() const override { return name_; }

  // Looks for matching zones again (keeps validators of zones still present).
  void Rescan();

  // Zone directory names currently watched, e.g. {"thermal_zone0"}.
  std::vector<std::string> zone_names() const;

 private:
  struct Zone {
    std::string dir_name;   // thermal_zone0
    std::string temp_path;  // <root>/thermal_zone0/temp
    std::string label;      // sysfs:thermal_zone0(x86_pkg_temp)
    ReadingValidator validator;
  };

  SysfsOptions options_;
  const Clock& clock_;
  std::string name_;
  std::vector<Zone> zones_;
  std::vector<Validated> scratch_;  // per-zone results, reused across reads
};

}  // namespace ari::thermal
