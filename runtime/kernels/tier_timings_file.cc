#include "runtime/kernels/tier_timings_file.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

namespace ari::runtime::kernels {
namespace {

// Bumped whenever a timed kernel changes, so files measured on the old kernels are measured
// over (v2: W8A16 on int16 activations; v3: the AVX-512 W8A16 GEMV on 512-bit vectors;
// v4: every x86 GEMV on several weight streams per thread; v5: the AVX-512 GEMMs on pairs
// of row blocks; v6: the AMX tier's GEMMs, GEMMs timed at 64 tokens instead of 16).
constexpr const char* kHeader = "ari kernel tier timings v6";

// "model name" (x86) or "CPU part" (ARM) lines of /proc/cpuinfo, first of each.
std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model;
  while (std::getline(in, line)) {
    if (line.starts_with("model name") || line.starts_with("CPU part")) {
      if (model.find(line) == std::string::npos) model += line + "\n";
    }
  }
  return model;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string FamilyToken(MatmulFamily f) {
  std::string s(MatmulFamilyName(f));  // "GEMV W8A16" -> "gemv_w8a16"
  for (char& c : s) c = c == ' ' ? '_' : static_cast<char>(std::tolower(c));
  return s;
}

}  // namespace

std::filesystem::path TierTimingsPath() {
  if (const char* env = std::getenv("ARI_KERNEL_TIMINGS_FILE"); env && *env) return env;
  std::string key = CpuModel();
  for (int i = 0; i < kNumIsaTiers; ++i) {
    const auto t = static_cast<IsaTier>(i);
    if (IsaTierSupported(t) && IsaTierCompiled(t)) key += std::string(IsaTierName(t)) + ",";
  }
  char name[64];
  std::snprintf(name, sizeof name, "kernel-timings-%016llx.txt",
                static_cast<unsigned long long>(Fnv1a(key)));
  std::filesystem::path dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::filesystem::path(x) / "ari";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::filesystem::path(h) / ".cache" / "ari";
  } else {
    dir = std::filesystem::temp_directory_path() / "ari";
  }
  return dir / name;
}

std::string FormatTierTimings(const TierTimings& t) {
  std::string s = std::string(kHeader) + "\n";
  for (int fi = 0; fi < kNumMatmulFamilies; ++fi) {
    for (int ti = 0; ti < kNumIsaTiers; ++ti) {
      const double us = t.us[static_cast<size_t>(fi)][static_cast<size_t>(ti)];
      if (us < 0) continue;
      char b[128];
      std::snprintf(b, sizeof b, "%s %s %.3f\n", FamilyToken(static_cast<MatmulFamily>(fi)).c_str(),
                    std::string(IsaTierName(static_cast<IsaTier>(ti))).c_str(), us);
      s += b;
    }
  }
  return s;
}

std::optional<TierTimings> ParseTierTimings(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return std::nullopt;
  TierTimings t;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream f(line);
    std::string family, tier, extra;
    double us = -1;
    if (!(f >> family >> tier >> us) || (f >> extra) || !std::isfinite(us) || us < 0) {
      return std::nullopt;
    }
    int fi = -1;
    for (int i = 0; i < kNumMatmulFamilies; ++i) {
      if (FamilyToken(static_cast<MatmulFamily>(i)) == family) fi = i;
    }
    auto ti = ParseIsaTier(tier);
    if (fi < 0 || !ti) return std::nullopt;
    t.us[static_cast<size_t>(fi)][static_cast<size_t>(*ti)] = us;
  }
  return t;
}

std::optional<TierTimings> LoadTierTimings(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseTierTimings(ss.str());
}

bool SaveTierTimings(const std::filesystem::path& path, const TierTimings& t) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return false;
  const std::filesystem::path tmp =
      path.string() + ".tmp." + std::to_string(static_cast<long long>(getpid()));
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << FormatTierTimings(t);
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, path, ec);  // atomic: readers see old or new, never half
  if (ec) std::filesystem::remove(tmp, ec);
  return !ec;
}

}  // namespace ari::runtime::kernels
