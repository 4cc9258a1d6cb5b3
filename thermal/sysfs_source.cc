#include "thermal/sysfs_source.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "thermal/sysfs_text.h"

namespace ari::thermal {
namespace {

bool IsZoneDir(std::string_view n) {
  constexpr std::string_view kPrefix = "thermal_zone";
  if (!n.starts_with(kPrefix) || n.size() == kPrefix.size()) return false;
  return std::all_of(n.begin() + kPrefix.size(), n.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

int ZoneNumber(std::string_view n) {
  return std::atoi(std::string(n.substr(std::string_view("thermal_zone").size())).c_str());
}

}  // namespace

SysfsSource::SysfsSource(SysfsOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock), name_("sysfs:" + options_.root.string()) {
  Rescan();
}

void SysfsSource::Rescan() {
  std::vector<Zone> found;
  std::error_code ec;
  std::filesystem::directory_iterator it(options_.root, ec);
  if (!ec) {
    for (const auto& entry : it) {
      std::string dir = entry.path().filename().string();
      if (!IsZoneDir(dir)) continue;
      if (!options_.zones.empty() &&
          std::find(options_.zones.begin(), options_.zones.end(), dir) == options_.zones.end()) {
        continue;
      }
      std::string type(TrimWs(ReadTextFile((entry.path() / "type").string()).value_or("")));
      if (!options_.types.empty() &&
          std::find(options_.types.begin(), options_.types.end(), type) == options_.types.end()) {
        continue;
      }
      std::string temp_path = (entry.path() / "temp").string();
      if (!std::filesystem::exists(temp_path, ec)) continue;
      std::string zone_label = "sysfs:";
      zone_label.append(dir).append("(").append(type).append(")");
      Zone z{dir, temp_path, std::move(zone_label), ReadingValidator(options_.limits)};
      // Keep the history of a zone we already watched.
      for (auto& old : zones_) {
        if (old.temp_path == z.temp_path) z.validator = old.validator;
      }
      z.validator.MarkPresent();
      found.push_back(std::move(z));
    }
  }
  std::sort(found.begin(), found.end(), [](const Zone& a, const Zone& b) {
    return ZoneNumber(a.dir_name) < ZoneNumber(b.dir_name);
  });
  zones_ = std::move(found);
  scratch_.assign(zones_.size(), Validated{});
}

std::vector<std::string> SysfsSource::zone_names() const {
  std::vector<std::string> names;
  names.reserve(zones_.size());
  for (const auto& z : zones_) names.push_back(z.dir_name);
  return names;
}

void SysfsSource::ReadInto(Reading& out) {
  const int64_t now = clock_.NowNs();
  char buf[64];
  for (size_t i = 0; i < zones_.size(); ++i) {
    Zone& z = zones_[i];
    int len = 0;
    FileReadStatus st = ReadSmallFile(z.temp_path.c_str(), buf, sizeof(buf), &len);
    Validated v;
    if (st == FileReadStatus::kMissing) {
      v = z.validator.Observe(RawStatus::kMissing, 0.0, now, now);
    } else if (st == FileReadStatus::kNoData || TrimWs(std::string_view(buf, len)).empty()) {
      v = z.validator.Observe(RawStatus::kNoNewValue, 0.0, now, now);
    } else if (auto milli = ParseInt64(std::string_view(buf, len))) {
      v = z.validator.Observe(RawStatus::kValue, static_cast<double>(*milli) / 1000.0, now, now);
    } else {
      v = z.validator.Observe(RawStatus::kUnreadable, 0.0, now, now);
    }
    scratch_[i] = v;
  }
  Validated combined;
  int idx = CombineHottest(scratch_.data(), static_cast<int>(scratch_.size()), now, combined);
  out.celsius = combined.celsius;
  out.state = combined.state;
  out.time_ns = combined.time_ns;
  if (idx >= 0) {
    out.source.assign(zones_[static_cast<size_t>(idx)].label);
  } else {
    out.source.assign(name_);
  }
}

}  // namespace ari::thermal
