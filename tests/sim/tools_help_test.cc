// `--help` works on every shell tool (ari-node, ari-cli, ari-soak, ari-ddsbench, ari-sim,
// ari-tune, ari-bench): usage on stdout, exit 0. The runtime tools have the same check in
// tests/runtime/packed_scorer_test.cc.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

std::filesystem::path BinaryDir() {
  const char* bin = std::getenv("ARI_BINARY_DIR");
  return std::filesystem::path(bin ? bin : ".");
}

TEST(ToolsHelp, EveryShellToolPrintsUsageAndExitsZero) {
  const char* tools[] = {"component/ari-node",     "component/ari-cli", "component/ari-soak",
                         "component/ari-ddsbench", "sim/ari-sim",       "sim/ari-tune",
                         "sim/ari-bench"};
  for (const char* t : tools) {
    const auto path = BinaryDir() / t;
    if (!std::filesystem::exists(path)) {
      ADD_FAILURE() << path << " not built";
      continue;
    }
    const std::string cmd = path.string() + " --help 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    std::array<char, 512> buf{};
    for (size_t n = 0; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;)
      out.append(buf.data(), n);
    const int status = ::pclose(p);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << t << " status " << status;
    EXPECT_NE(out.find("usage"), std::string::npos) << t << ": " << out;
  }
}

}  // namespace
