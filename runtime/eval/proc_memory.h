// What this process holds in RAM, read from /proc (tests and benchmark programs: the
// memory yield and spill measurements, docs/memory.md). Header only; allocates (streams),
// so never on the real-time path (ari-node reads /proc/self/statm itself).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace ari::runtime::eval {

// A "Key:" line of /proc/self/status given in kB (VmRSS:, RssAnon:, VmHWM:...), in bytes;
// 0 when absent.
inline uint64_t ProcStatusBytes(std::string_view key) {
  std::ifstream in("/proc/self/status");
  std::string k;
  while (in >> k) {
    if (k == key) {
      uint64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

// Sum of the "Rss:" lines of this process's mappings of `path` (/proc/self/smaps), bytes.
inline uint64_t MappingRssBytes(const std::filesystem::path& path) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  const std::string name = std::filesystem::canonical(path).string();
  bool ours = false;
  uint64_t kb = 0;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    if (sp != std::string::npos && line.find('-') < sp) {  // a mapping's header line
      ours = line.size() >= name.size() &&
             line.compare(line.size() - name.size(), name.size(), name) == 0;
    } else if (ours && line.rfind("Rss:", 0) == 0) {
      kb += std::stoull(line.substr(4));
    }
  }
  return kb * 1024;
}

}  // namespace ari::runtime::eval
