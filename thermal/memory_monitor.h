// Memory monitor: how much memory this engine may still use, from injectable sources.
//
// Sources (all read below a root path, "/" in production, a fake tree in tests):
//  - /proc/meminfo MemAvailable (system-wide).
//  - The process's memory cgroup, found in /proc/self/cgroup:
//      v2: <cgroup2 mount>/<path>/memory.max, memory.current, memory.stat (inactive_file)
//      v1: <memory mount>/<path>/memory.limit_in_bytes, memory.usage_in_bytes, memory.stat
//    headroom = limit - (usage - inactive_file): reclaimable page cache (which includes
//    our clean, mapped weights) does not count as used, as the kernel can drop it.
//  - PSI: /proc/pressure/memory ("some"/"full" avg10), and the cgroup's memory.pressure (v2).
// available_bytes = min(MemAvailable, cgroup headroom). Read() does no heap allocation:
// files are read into a stack buffer through paths resolved at Create().
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "thermal/error.h"

namespace ari::thermal {

enum class CgroupVersion : uint8_t { kNone, kV1, kV2 };

struct MemoryReading {
  uint64_t available_bytes = 0;         // what the ladder compares against
  uint64_t system_available_bytes = 0;  // /proc/meminfo MemAvailable
  uint64_t system_total_bytes = 0;      // /proc/meminfo MemTotal
  bool has_cgroup_limit = false;        // a finite limit is set
  uint64_t cgroup_limit_bytes = 0;
  uint64_t cgroup_usage_bytes = 0;  // usage minus inactive_file
  bool has_psi = false;
  double psi_some_avg10 = 0.0;  // % of time some task stalled on memory (10 s)
  double psi_full_avg10 = 0.0;
};

struct MemoryMonitorOptions {
  std::filesystem::path root = "/";  // prefix for /proc and /sys (fake trees in tests)
  // Cgroup directory to watch, absolute (under root) — overrides /proc/self/cgroup discovery.
  std::optional<std::filesystem::path> cgroup_dir;
  std::optional<CgroupVersion> cgroup_version;  // with cgroup_dir
};

class MemoryMonitor {
 public:
  static Result<MemoryMonitor> Create(const MemoryMonitorOptions& opts = {});

  Result<MemoryReading> Read() const;

  CgroupVersion cgroup_version() const { return cgroup_version_; }
  const std::string& cgroup_dir() const { return cgroup_dir_; }
  std::string Describe() const;  // e.g. "meminfo + cgroup v1 /sys/fs/cgroup/memory/x + psi"

 private:
  MemoryMonitor() = default;
  std::string meminfo_path_;
  std::string psi_path_;
  CgroupVersion cgroup_version_ = CgroupVersion::kNone;
  std::string cgroup_dir_;
  std::string limit_path_, usage_path_, stat_path_, cg_pressure_path_;
};

// Parses "/proc/self/cgroup" text: the memory cgroup path and version (v1 "memory"
// controller line wins over the v2 "0::" line only when the v1 hierarchy is mounted).
struct CgroupMembership {
  std::optional<std::string> v1_memory_path;
  std::optional<std::string> v2_path;
};
CgroupMembership ParseProcSelfCgroup(std::string_view text);

}  // namespace ari::thermal
