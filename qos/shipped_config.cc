#include "qos/shipped_config.h"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <string>
#include <system_error>
#include <vector>

namespace ari::qos {
namespace {

namespace fs = std::filesystem;

// The running executable's folder (readlink /proc/self/exe); empty when unknown.
fs::path ExecutableDir() {
  std::array<char, 4096> buf{};
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return {};
  return fs::path(std::string(buf.data(), static_cast<size_t>(n))).parent_path();
}

}  // namespace

Result<fs::path> FindShippedConfig(std::string_view name) {
  std::vector<fs::path> candidates;
  if (const char* d = std::getenv("ARI_CONFIG_DIR"); d != nullptr && d[0] != '\0') {
    candidates.push_back(fs::path(d) / name);
  }
  if (const fs::path exe = ExecutableDir(); !exe.empty()) {
    candidates.push_back(exe.parent_path() / "share" / "ari" / name);
  }
  candidates.push_back(fs::path(ARI_INSTALL_DATA_DIR) / name);
  candidates.push_back(fs::path(ARI_SOURCE_CONFIG_DIR) / name);
  candidates.push_back(fs::path("config") / name);
  std::string tried;
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
    tried += (tried.empty() ? "" : ", ") + p.string();
  }
  return MakeError(ErrorCode::kIo, std::string(name) + " not found (tried " + tried +
                                       "; set ARI_CONFIG_DIR or give the path)");
}

}  // namespace ari::qos
