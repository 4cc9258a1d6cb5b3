// Helpers of the DDS Security tests (security_test.cc, security_config_test.cc): run a
// process, generate a throw-away PKI with scripts/security/gen.sh, and insist on the
// tools: a machine set up by ./ari.sh setup has openssl and Cyclone's security plugins
// (libddsc0debian), so a missing tool FAILS the test. Only ARI_ALLOW_SECURITY_SKIP=1
// turns that into a skip (e.g. a developer box without openssl).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "tests/component/node_test_util.h"

namespace ari::testing {

inline std::string Hex(std::span<const uint8_t> b) {
  std::string s;
  char buf[3];
  for (uint8_t x : b) {
    std::snprintf(buf, sizeof buf, "%02x", x);
    s += buf;
  }
  return s;
}

inline std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs argv with stdout+stderr to `log`; the exit code (128+signal, -1 on exec failure).
inline int RunProcess(const std::vector<std::string>& argv, const std::filesystem::path& log) {
  std::vector<std::string> strings = argv;  // execv wants char* const[]
  std::vector<char*> args;
  args.reserve(strings.size() + 1);
  for (auto& a : strings) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline std::filesystem::path CliBinary() { return NodeBinary().parent_path() / "ari-cli"; }

// Empty when the security tools are there, else what is missing.
inline std::string MissingSecurityTools() {
  if (RunProcess({"/bin/sh", "-c", "command -v openssl"}, "/dev/null") != 0) {
    return "openssl not installed (Debian package openssl; ./ari.sh setup installs it)";
  }
  return "";
}

inline bool SecuritySkipAllowed() {
  const char* v = std::getenv("ARI_ALLOW_SECURITY_SKIP");
  return v != nullptr && std::string(v) == "1";
}

// In a test body or SetUp: fails (or, with ARI_ALLOW_SECURITY_SKIP=1, skips) when the
// security tools are missing.
#define ARI_REQUIRE_SECURITY_TOOLS()                                            \
  do {                                                                          \
    const std::string missing_ = ::ari::testing::MissingSecurityTools();        \
    if (!missing_.empty()) {                                                    \
      if (::ari::testing::SecuritySkipAllowed()) GTEST_SKIP() << missing_;      \
      FAIL() << missing_ << " (set ARI_ALLOW_SECURITY_SKIP=1 to skip instead)"; \
    }                                                                           \
  } while (0)

// gen.sh into dir with the given identities (--client/--reader/--node arguments).
inline ::testing::AssertionResult Generate(const std::filesystem::path& dir,
                                           const std::vector<std::string>& identities = {
                                               "--critical-client", "app-crit", "--client",
                                               "app-plain", "--reader", "app-reader"}) {
  const auto log = dir / "gen.log";
  std::vector<std::string> argv = {(SourceDir() / "scripts" / "security" / "gen.sh").string(),
                                   dir.string()};
  argv.insert(argv.end(), identities.begin(), identities.end());
  const int rc = RunProcess(argv, log);
  if (rc == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "gen.sh exit " << rc << ": " << ReadFile(log);
}

}  // namespace ari::testing
