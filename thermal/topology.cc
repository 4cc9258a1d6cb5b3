#include "thermal/topology.h"

#include <algorithm>
#include <charconv>
#include <set>
#include <system_error>

#include "thermal/sysfs_text.h"

namespace ari::thermal {
namespace {

constexpr int kMaxCpuId = 1 << 16;

std::optional<int> ParseCpuId(std::string_view s) {
  if (s.empty()) return std::nullopt;
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v < 0 || v > kMaxCpuId) {
    return std::nullopt;
  }
  return v;
}

Result<std::vector<int>> OnlineCpus(const std::filesystem::path& root) {
  if (auto text = ReadTextFile((root / "online").string())) {
    auto list = ParseCpuList(*text);
    if (!list) {
      return MakeError(ErrorCode::kFormat,
                       (root / "online").string() + ": " + list.error().message);
    }
    return list;
  }
  std::error_code ec;
  std::filesystem::directory_iterator it(root, ec);
  if (ec) return MakeError(ErrorCode::kNotFound, "cannot list CPUs in " + root.string());
  std::vector<int> cpus;
  for (const auto& entry : it) {
    std::string n = entry.path().filename().string();
    if (n.size() > 3 && n.starts_with("cpu")) {
      if (auto id = ParseCpuId(std::string_view(n).substr(3))) cpus.push_back(*id);
    }
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

Result<std::vector<int>> CheckedList(const std::vector<int>& list, const std::set<int>& online,
                                     std::string_view what) {
  std::vector<int> out(list);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  for (int id : out) {
    if (!online.contains(id)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string(what) + " CPU " + std::to_string(id) + " is not online");
    }
  }
  return out;
}

}  // namespace

std::string_view CoreClassName(CoreClass c) {
  return c == CoreClass::kPerformance ? "performance" : "efficiency";
}

std::string_view TopologyBasisName(TopologyBasis b) {
  switch (b) {
    case TopologyBasis::kConfig: return "config";
    case TopologyBasis::kCapacity: return "cpu_capacity";
    case TopologyBasis::kMaxFreq: return "cpuinfo_max_freq";
    case TopologyBasis::kUniform: return "uniform";
  }
  return "unknown";
}

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  text = TrimWs(text);
  std::vector<int> out;
  if (text.empty()) return out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view part = TrimWs(text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    start = (comma == std::string_view::npos) ? text.size() + 1 : comma + 1;
    size_t dash = part.find('-');
    auto lo = ParseCpuId(TrimWs(part.substr(0, dash)));
    auto hi = dash == std::string_view::npos ? lo : ParseCpuId(TrimWs(part.substr(dash + 1)));
    if (!lo || !hi || *hi < *lo) {
      return MakeError(ErrorCode::kFormat, "bad CPU list element '" + std::string(part) + "' in '" +
                                               std::string(text) + "'");
    }
    for (int id = *lo; id <= *hi; ++id) out.push_back(id);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<int> s(cpus);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    while (j + 1 < s.size() && s[j + 1] == s[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(s[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(s[j]);
    }
    i = j + 1;
  }
  return out;
}

namespace {

// Capacity and maximum frequency of each online CPU (0 where the file is absent).
struct CpuScan {
  std::vector<CpuInfo> cpus;
  bool all_capacity = true;  // every CPU has a cpu_capacity
  bool all_freq = true;      // every CPU has a cpuinfo_max_freq
};

CpuScan ScanCpus(const std::filesystem::path& root, const std::vector<int>& online) {
  CpuScan scan;
  for (int id : online) {
    CpuInfo info;
    info.id = id;
    const auto dir = root / ("cpu" + std::to_string(id));
    info.capacity = ReadIntFile((dir / "cpu_capacity").string()).value_or(0);
    info.max_freq_khz = ReadIntFile((dir / "cpufreq" / "cpuinfo_max_freq").string()).value_or(0);
    scan.all_capacity = scan.all_capacity && info.capacity > 0;
    scan.all_freq = scan.all_freq && info.max_freq_khz > 0;
    scan.cpus.push_back(info);
  }
  return scan;
}

// The classes from the configured lists (performance_cpus / efficiency_cpus): a CPU in
// one list only; the CPUs of an absent list are the online ones not in the other.
Result<void> ClassifyFromConfig(const TopologyOptions& options, const std::vector<int>& online,
                                CpuTopology& topo) {
  const std::set<int> online_set(online.begin(), online.end());
  std::vector<int> perf, eff;
  if (options.performance_cpus) {
    auto p = CheckedList(*options.performance_cpus, online_set, "performance");
    if (!p) return std::unexpected(p.error());
    perf = *p;
  }
  if (options.efficiency_cpus) {
    auto e = CheckedList(*options.efficiency_cpus, online_set, "efficiency");
    if (!e) return std::unexpected(e.error());
    eff = *e;
  }
  for (int id : perf) {
    if (std::binary_search(eff.begin(), eff.end(), id)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "CPU " + std::to_string(id) + " is listed as performance and efficiency");
    }
  }
  auto in = [](const std::vector<int>& v, int id) {
    return std::binary_search(v.begin(), v.end(), id);
  };
  if (!options.performance_cpus) {
    for (int id : online)
      if (!in(eff, id)) perf.push_back(id);
  }
  if (!options.efficiency_cpus) {
    for (int id : online)
      if (!in(perf, id)) eff.push_back(id);
  }
  if (perf.empty() && eff.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "CPU override lists are both empty");
  }
  // Both lists given: online CPUs in neither list are not ARI's to use.
  std::erase_if(topo.cpus, [&](const CpuInfo& c) { return !in(perf, c.id) && !in(eff, c.id); });
  for (auto& c : topo.cpus) {
    c.core_class = in(perf, c.id) ? CoreClass::kPerformance : CoreClass::kEfficiency;
  }
  topo.performance = perf;
  topo.efficiency = eff;
  topo.basis = TopologyBasis::kConfig;
  return {};
}

// The classes from cpu_capacity (or else cpuinfo_max_freq): split at the largest ratio
// between consecutive distinct values; all performance when neither is known everywhere.
void ClassifyByMetric(bool all_capacity, bool all_freq, CpuTopology& topo) {
  topo.basis = all_capacity ? TopologyBasis::kCapacity
               : all_freq   ? TopologyBasis::kMaxFreq
                            : TopologyBasis::kUniform;
  auto metric = [&](const CpuInfo& c) {
    return topo.basis == TopologyBasis::kCapacity ? c.capacity : c.max_freq_khz;
  };
  int64_t split = 0;  // CPUs with metric > split are performance
  if (topo.basis != TopologyBasis::kUniform) {
    std::vector<int64_t> values;
    values.reserve(topo.cpus.size());
    for (const auto& c : topo.cpus) values.push_back(metric(c));
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    if (values.size() > 1) {
      double best_ratio = 0.0;
      for (size_t i = 0; i + 1 < values.size(); ++i) {
        double ratio = static_cast<double>(values[i + 1]) / static_cast<double>(values[i]);
        if (ratio > best_ratio) {
          best_ratio = ratio;
          split = values[i];
        }
      }
    }
  }
  for (auto& c : topo.cpus) {
    const bool perf = topo.basis == TopologyBasis::kUniform || metric(c) > split;
    c.core_class = perf ? CoreClass::kPerformance : CoreClass::kEfficiency;
    (perf ? topo.performance : topo.efficiency).push_back(c.id);
  }
}

}  // namespace

Result<CpuTopology> DetectTopology(const TopologyOptions& options) {
  auto online = OnlineCpus(options.root);
  if (!online) return std::unexpected(online.error());
  if (online->empty()) {
    return MakeError(ErrorCode::kNotFound, "no online CPUs under " + options.root.string());
  }
  CpuScan scan = ScanCpus(options.root, *online);
  CpuTopology topo;
  topo.cpus = std::move(scan.cpus);
  if (options.performance_cpus || options.efficiency_cpus) {
    if (auto r = ClassifyFromConfig(options, *online, topo); !r) return std::unexpected(r.error());
    return topo;
  }
  ClassifyByMetric(scan.all_capacity, scan.all_freq, topo);
  return topo;
}

}  // namespace ari::thermal
