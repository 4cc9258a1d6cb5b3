// `--help` works on every shell tool (ari-node, ari-cli, ari-soak, ari-ddsbench, ari-sim,
// ari-tune, ari-bench): usage on stdout, exit 0. The runtime tools have the same check in
// tests/runtime/packed_scorer_test.cc. ari-bench refuses bad values before it loads a model.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>

namespace {

std::filesystem::path BinaryDir() {
  const char* bin = std::getenv("ARI_BINARY_DIR");
  return std::filesystem::path(bin ? bin : ".");
}

// Runs the command (stderr into the output); its output and exit status.
std::pair<std::string, int> RunCommand(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return {"popen failed", -1};
  std::string out;
  std::array<char, 512> buf{};
  for (size_t n = 0; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) out.append(buf.data(), n);
  return {out, ::pclose(p)};
}

TEST(ToolsHelp, AriBenchRefusesBadValuesWithAClearLine) {
  const auto bench = BinaryDir() / "sim/ari-bench";
  ASSERT_TRUE(std::filesystem::exists(bench)) << bench << " not built";
  const std::pair<const char*, const char*> cases[] = {
      {"-r abc", "ari-bench: -r needs a number, got 'abc'"},
      {"-r 3x", "ari-bench: -r needs a number, got '3x'"},
      {"-p 64,,128", "ari-bench: -p needs a number, got ''"},
      {"--celsius hot", "ari-bench: --celsius needs a number, got 'hot'"},
      {"-r 0", "ari-bench: -r must be >= 1"},
      {"--busy-slots -1", "--busy-slots and -t >= 0"},
      {"--scenario nope", "ari-bench: unknown scenario nope (preempt, thermal)"},
      {"--frobnicate 1", "ari-bench: unknown flag --frobnicate"},
  };
  for (const auto& [args, want] : cases) {
    // The model does not exist: every case must fail on its argument first.
    const auto [out, status] =
        RunCommand(bench.string() + " -m /nonexistent.gguf " + args + " 2>&1");
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << args << ": " << out;
    EXPECT_NE(out.find(want), std::string::npos) << args << ": " << out;
  }
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
