// CPU topology: which online CPUs are performance cores and which are efficiency
// cores.
//
// Rules (DetectTopology):
// 1. Online CPUs come from <root>/online (ranges like "0-3,6"); when that file is
//    missing, every <root>/cpuN directory counts as online.
// 2. Config override: if performance_cpus and/or efficiency_cpus are given they
//    win. One list given: the other online CPUs form the other class. Listed CPUs
//    must be online and the lists must not overlap (else kInvalidArgument). Both
//    lists given: online CPUs in neither list are left out (not ARI's to use).
// 3. Otherwise the metric is <root>/cpuN/cpu_capacity when every online CPU has
//    it, else <root>/cpuN/cpufreq/cpuinfo_max_freq when every online CPU has it,
//    else none.
// 4. All metric values equal (or no metric at all): one class, all "performance"
//    (basis still names the metric read; kUniform means none was readable).
//    Otherwise the sorted distinct values are split at the largest ratio between
//    neighbours: CPUs above the split are performance, the rest efficiency (so
//    prime+big vs LITTLE on three-cluster phones).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "thermal/error.h"

namespace ari::thermal {

enum class CoreClass : uint8_t { kPerformance = 0, kEfficiency = 1 };

std::string_view CoreClassName(CoreClass c);

struct CpuInfo {
  int id = 0;
  CoreClass core_class = CoreClass::kPerformance;
  int64_t capacity = 0;      // cpu_capacity, 0 when absent
  int64_t max_freq_khz = 0;  // cpufreq/cpuinfo_max_freq, 0 when absent
};

enum class TopologyBasis : uint8_t { kConfig, kCapacity, kMaxFreq, kUniform };

std::string_view TopologyBasisName(TopologyBasis b);

struct CpuTopology {
  std::vector<CpuInfo> cpus;     // online CPUs ARI may use, ascending id
  std::vector<int> performance;  // ascending ids
  std::vector<int> efficiency;   // ascending ids (empty when all cores are equal)
  TopologyBasis basis = TopologyBasis::kUniform;

  const std::vector<int>& Cpus(CoreClass c) const {
    return c == CoreClass::kPerformance ? performance : efficiency;
  }
  // True when both classes have CPUs.
  bool heterogeneous() const { return !performance.empty() && !efficiency.empty(); }
};

struct TopologyOptions {
  std::filesystem::path root = "/sys/devices/system/cpu";
  std::optional<std::vector<int>> performance_cpus;  // config override
  std::optional<std::vector<int>> efficiency_cpus;   // config override
};

Result<CpuTopology> DetectTopology(const TopologyOptions& options = {});

// Parses a kernel CPU list: "0-3,6", "0", "" (empty list), trailing newline ok.
// Result is sorted, without duplicates. Bad syntax or reversed ranges -> kFormat.
Result<std::vector<int>> ParseCpuList(std::string_view text);

// Formats ids as a kernel CPU list ("0-3,6").
std::string FormatCpuList(const std::vector<int>& cpus);

}  // namespace ari::thermal
