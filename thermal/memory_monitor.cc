#include "thermal/memory_monitor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>

namespace ari::thermal {
namespace {

constexpr uint64_t kUnlimitedV1 = uint64_t{1} << 60;  // v1 reports ~2^63 rounded to pages

// Reads a small file into buf (NUL-terminated). Returns bytes read or -errno.
ssize_t ReadSmallFile(const std::string& path, char* buf, size_t cap) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t used = 0;
  while (used + 1 < cap) {
    ssize_t n = ::read(fd, buf + used, cap - 1 - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return -e;
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  ::close(fd);
  buf[used] = '\0';
  return static_cast<ssize_t>(used);
}

std::optional<uint64_t> ParseU64(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return std::nullopt;
  return v;
}

// Value of "Key:   123 kB" in meminfo-style text, in bytes.
std::optional<uint64_t> MeminfoField(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      auto v = ParseU64(line.substr(key.size() + 1));
      if (!v) return std::nullopt;
      bool kb = line.find("kB") != std::string_view::npos;
      return kb ? *v * 1024 : *v;
    }
    pos = eol + 1;
  }
  return std::nullopt;
}

// Value of "key 123" in memory.stat-style text.
std::optional<uint64_t> StatField(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return ParseU64(line.substr(key.size() + 1));
    }
    pos = eol + 1;
  }
  return std::nullopt;
}

// "some avg10=1.23 avg60=..." -> 1.23 for the line starting with `kind`.
std::optional<double> PsiAvg10(std::string_view text, std::string_view kind) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (line.substr(0, kind.size()) == kind) {
      size_t a = line.find("avg10=");
      if (a == std::string_view::npos) return std::nullopt;
      std::string_view num = line.substr(a + 6);
      double v = 0;
      auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
      if (ec != std::errc() || p == num.data()) return std::nullopt;
      return v;
    }
    pos = eol + 1;
  }
  return std::nullopt;
}

bool Exists(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::exists(p, ec);
}

}  // namespace

CgroupMembership ParseProcSelfCgroup(std::string_view text) {
  CgroupMembership m;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    // hierarchy-id:controller-list:path
    size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view id = line.substr(0, c1);
    std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    std::string_view path = line.substr(c2 + 1);
    if (id == "0" && controllers.empty()) {
      m.v2_path = std::string(path);
      continue;
    }
    // controllers is a comma-separated list
    size_t cpos = 0;
    while (cpos <= controllers.size()) {
      size_t comma = controllers.find(',', cpos);
      if (comma == std::string_view::npos) comma = controllers.size();
      if (controllers.substr(cpos, comma - cpos) == "memory") m.v1_memory_path = std::string(path);
      cpos = comma + 1;
    }
  }
  return m;
}

Result<MemoryMonitor> MemoryMonitor::Create(const MemoryMonitorOptions& opts) {
  MemoryMonitor mon;
  const auto& root = opts.root;
  mon.meminfo_path_ = (root / "proc/meminfo").string();
  if (!Exists(mon.meminfo_path_)) {
    return MakeError(ErrorCode::kIo, mon.meminfo_path_ + ": not found (no /proc/meminfo)");
  }
  if (Exists(root / "proc/pressure/memory"))
    mon.psi_path_ = (root / "proc/pressure/memory").string();

  std::filesystem::path dir;
  CgroupVersion version = CgroupVersion::kNone;
  if (opts.cgroup_dir) {
    dir = *opts.cgroup_dir;
    version = opts.cgroup_version.value_or(Exists(dir / "memory.max") ? CgroupVersion::kV2
                                                                      : CgroupVersion::kV1);
  } else {
    char buf[4096];
    ssize_t n = ReadSmallFile((root / "proc/self/cgroup").string(), buf, sizeof buf);
    if (n > 0) {
      CgroupMembership m = ParseProcSelfCgroup(std::string_view(buf, static_cast<size_t>(n)));
      auto rel = [](const std::string& p) { return p.empty() || p[0] != '/' ? p : p.substr(1); };
      // Prefer a hierarchy that really has the memory controller files.
      if (m.v2_path) {
        auto d = root / "sys/fs/cgroup" / rel(*m.v2_path);
        if (Exists(d / "memory.max")) {
          dir = d;
          version = CgroupVersion::kV2;
        }
        auto du = root / "sys/fs/cgroup/unified" / rel(*m.v2_path);
        if (version == CgroupVersion::kNone && Exists(du / "memory.max")) {
          dir = du;
          version = CgroupVersion::kV2;
        }
      }
      if (version == CgroupVersion::kNone && m.v1_memory_path) {
        auto d = root / "sys/fs/cgroup/memory" / rel(*m.v1_memory_path);
        if (Exists(d / "memory.limit_in_bytes")) {
          dir = d;
          version = CgroupVersion::kV1;
        }
      }
    }
  }
  mon.cgroup_version_ = version;
  mon.cgroup_dir_ = dir.string();
  if (version == CgroupVersion::kV2) {
    mon.limit_path_ = (dir / "memory.max").string();
    mon.usage_path_ = (dir / "memory.current").string();
    mon.stat_path_ = (dir / "memory.stat").string();
    if (Exists(dir / "memory.pressure")) mon.cg_pressure_path_ = (dir / "memory.pressure").string();
  } else if (version == CgroupVersion::kV1) {
    mon.limit_path_ = (dir / "memory.limit_in_bytes").string();
    mon.usage_path_ = (dir / "memory.usage_in_bytes").string();
    mon.stat_path_ = (dir / "memory.stat").string();
  }
  return mon;
}

Result<MemoryReading> MemoryMonitor::Read() const {
  MemoryReading r;
  char buf[8192];
  ssize_t n = ReadSmallFile(meminfo_path_, buf, sizeof buf);
  if (n <= 0) return MakeError(ErrorCode::kIo, meminfo_path_ + ": unreadable");
  std::string_view text(buf, static_cast<size_t>(n));
  auto avail = MeminfoField(text, "MemAvailable");
  auto total = MeminfoField(text, "MemTotal");
  if (!avail) return MakeError(ErrorCode::kFormat, meminfo_path_ + ": no MemAvailable line");
  r.system_available_bytes = *avail;
  r.system_total_bytes = total.value_or(0);
  r.available_bytes = *avail;

  if (cgroup_version_ != CgroupVersion::kNone) {
    n = ReadSmallFile(limit_path_, buf, sizeof buf);
    std::optional<uint64_t> limit;
    if (n > 0 && std::string_view(buf, 3) != "max") limit = ParseU64(std::string_view(buf, n));
    n = ReadSmallFile(usage_path_, buf, sizeof buf);
    std::optional<uint64_t> usage = n > 0 ? ParseU64(std::string_view(buf, n)) : std::nullopt;
    if (limit && *limit < kUnlimitedV1 && usage) {
      n = ReadSmallFile(stat_path_, buf, sizeof buf);
      uint64_t inactive_file = 0;
      if (n > 0) {
        // v1 uses "total_inactive_file" for the hierarchy; fall back to "inactive_file".
        auto v = StatField(std::string_view(buf, n), cgroup_version_ == CgroupVersion::kV1
                                                         ? "total_inactive_file"
                                                         : "inactive_file");
        if (!v) v = StatField(std::string_view(buf, n), "inactive_file");
        inactive_file = v.value_or(0);
      }
      uint64_t used = *usage > inactive_file ? *usage - inactive_file : 0;
      r.has_cgroup_limit = true;
      r.cgroup_limit_bytes = *limit;
      r.cgroup_usage_bytes = used;
      uint64_t headroom = *limit > used ? *limit - used : 0;
      if (headroom < r.available_bytes) r.available_bytes = headroom;
    }
  }

  const std::string& psi = !cg_pressure_path_.empty() ? cg_pressure_path_ : psi_path_;
  if (!psi.empty()) {
    n = ReadSmallFile(psi, buf, sizeof buf);
    if (n > 0) {
      std::string_view t(buf, static_cast<size_t>(n));
      auto some = PsiAvg10(t, "some");
      auto full = PsiAvg10(t, "full");
      if (some) {
        r.has_psi = true;
        r.psi_some_avg10 = *some;
        r.psi_full_avg10 = full.value_or(0.0);
      }
    }
  }
  return r;
}

std::string MemoryMonitor::Describe() const {
  std::string s = "meminfo";
  if (cgroup_version_ == CgroupVersion::kV1) s += " + cgroup v1 " + cgroup_dir_;
  if (cgroup_version_ == CgroupVersion::kV2) s += " + cgroup v2 " + cgroup_dir_;
  if (!cg_pressure_path_.empty() || !psi_path_.empty()) s += " + psi";
  return s;
}

}  // namespace ari::thermal
