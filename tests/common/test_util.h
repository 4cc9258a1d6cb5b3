// Shared helpers for tests: where the real models live, which DDS domain a test owns.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ari::testing {

// When a test executable is run by hand (not through ctest, which sets the environment),
// find its build tree's CMakeCache.txt above /proc/self/exe and read a value from it.
inline std::string CMakeCacheValue(const std::string& prefix) {
  std::error_code ec;
  auto dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  for (int up = 0; up < 6 && !ec && !dir.empty(); ++up, dir = dir.parent_path()) {
    std::ifstream cache(dir / "CMakeCache.txt");
    if (!cache) continue;
    for (std::string line; std::getline(cache, line);) {
      if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
    }
    return "";
  }
  return "";
}

// ARI_MODELS_DIR (environment) wins; otherwise the CMake default (../shared/models).
inline std::filesystem::path ModelsDir() {
  if (const char* env = std::getenv("ARI_MODELS_DIR"); env && *env) return env;
  if (const char* def = std::getenv("ARI_MODELS_DIR_DEFAULT"); def && *def) return def;
  if (auto v = CMakeCacheValue("ARI_MODELS_DIR:PATH="); !v.empty()) return v;
  return std::filesystem::path("../shared/models");
}

// Full path of a file under the models folder, or empty when absent.
inline std::filesystem::path ModelFile(const std::string& rel) {
  auto p = ModelsDir() / rel;
  std::error_code ec;
  return std::filesystem::exists(p, ec) ? p : std::filesystem::path();
}

// The DDS domain id this test executable owns (ctest sets ARI_TEST_DOMAIN uniquely per test).
inline int TestDomainId() {
  if (const char* env = std::getenv("ARI_TEST_DOMAIN"); env && *env) return std::atoi(env);
  return 100 + static_cast<int>(getpid() % 100);  // run by hand: unlikely to collide
}

inline std::filesystem::path SourceDir() {
  if (const char* env = std::getenv("ARI_SOURCE_DIR"); env && *env) return env;
  if (auto v = CMakeCacheValue("CMAKE_HOME_DIRECTORY:INTERNAL="); !v.empty()) return v;
  return std::filesystem::current_path();
}

// The scratch directories TempDir made in this process, removed when it exits normally
// (a failed test included; a crash leaves them). A forked child that exits does not remove
// its parent's. ARI_KEEP_TEMP=1 keeps them for a look afterwards.
class TempDirRegistry {
 public:
  static TempDirRegistry& Get() {
    static TempDirRegistry r;
    return r;
  }
  void Add(const std::filesystem::path& dir) {
    for (const auto& d : dirs_) {
      if (d == dir) return;
    }
    dirs_.push_back(dir);
  }
  ~TempDirRegistry() {
    const char* keep = std::getenv("ARI_KEEP_TEMP");
    if (getpid() != owner_ || (keep && std::string(keep) == "1")) return;
    std::error_code ec;  // best effort: a directory already gone is fine
    for (const auto& d : dirs_) std::filesystem::remove_all(d, ec);
  }
  TempDirRegistry(const TempDirRegistry&) = delete;
  TempDirRegistry& operator=(const TempDirRegistry&) = delete;

 private:
  TempDirRegistry() = default;
  pid_t owner_ = getpid();
  std::vector<std::filesystem::path> dirs_;
};

// A fresh scratch directory for this test process, removed when the process exits
// (TempDirRegistry).
inline std::filesystem::path TempDir(const std::string& tag) {
  auto dir =
      std::filesystem::temp_directory_path() / ("ari_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  TempDirRegistry::Get().Add(dir);
  return dir;
}

}  // namespace ari::testing

// Skip the current test with a clear message when a model file is absent.
#define ARI_REQUIRE_MODEL(var, rel)                                                   \
  const std::filesystem::path var = ::ari::testing::ModelFile(rel);                   \
  if ((var).empty()) {                                                                \
    GTEST_SKIP() << "model data not found: " << (::ari::testing::ModelsDir() / (rel)) \
                 << " (set ARI_MODELS_DIR to the shared/models folder)";              \
  }
