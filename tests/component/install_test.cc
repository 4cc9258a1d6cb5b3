// `cmake --install` of this build tree into a temp prefix gives an integrator what
// docs/interface.md promises (binaries, ari_client + headers, CMake package config,
// default configs, policy, systemd unit), and the example app of docs/interface.md
// ("Example app (installed library)": its cmake and cpp blocks, read from the doc)
// configures and builds against the install with find_package(ari), then fails
// cleanly ("no live ARI node") on an empty domain. Runs cmake in subprocesses.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/test_util.h"

namespace ari::testing {
namespace {

namespace fs = std::filesystem;

fs::path BinaryDir() {
  if (const char* env = std::getenv("ARI_BINARY_DIR"); env && *env) return env;
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path().parent_path();
}

fs::path FindCmake() {
  for (const char* p : {"/usr/bin/cmake", "/usr/local/bin/cmake"}) {
    if (fs::exists(p)) return p;
  }
  return {};
}

// Runs a shell command; returns its exit code, output in *out (stdout + stderr).
int Shell(const std::string& cmd, std::string* out) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  out->clear();
  for (size_t n = fread(buf, 1, sizeof buf, p); n > 0; n = fread(buf, 1, sizeof buf, p)) {
    out->append(buf, n);
  }
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Quote(const fs::path& p) {
  std::string q;
  q.reserve(p.native().size() + 2);
  q.push_back('\'');
  q.append(p.native());
  q.push_back('\'');
  return q;
}

// The first ```<lang> block after `heading` in `text` (empty if none).
std::string CodeBlock(const std::string& text, const std::string& heading,
                      const std::string& lang) {
  const size_t h = text.find(heading);
  if (h == std::string::npos) return "";
  const std::string open = "```" + lang + "\n";
  const size_t b = text.find(open, h);
  if (b == std::string::npos) return "";
  const size_t e = text.find("\n```", b + open.size());
  if (e == std::string::npos) return "";
  return text.substr(b + open.size(), e - b - open.size() + 1);
}

TEST(Install, InstallTreeAndBuildDocExampleWithFindPackage) {
  const fs::path cmake = FindCmake();
  if (cmake.empty()) GTEST_SKIP() << "cmake not found: cannot test the install";
#if defined(__SANITIZE_ADDRESS__)
  // The installed static libraries would carry ASan/UBSan instrumentation that the example
  // app (built as an integrator would, without sanitizers) cannot link: the Release build
  // runs this test.
  GTEST_SKIP() << "sanitizer build: install + find_package example is tested in the Release build";
#endif
  const fs::path build = BinaryDir();
  ASSERT_TRUE(fs::exists(build / "cmake_install.cmake")) << build;
  const fs::path dir = TempDir("install");
  const fs::path prefix = dir / "prefix";

  std::string out;
  int rc = Shell(Quote(cmake) + " --install " + Quote(build) + " --prefix " + Quote(prefix), &out);
  if (rc != 0 && out.find("cannot find") != std::string::npos) {
    fs::remove_all(dir);
    GTEST_SKIP() << "build tree not fully built (cmake --build first; install needs every "
                    "installed target):\n"
                 << out.substr(0, 600);
  }
  ASSERT_EQ(rc, 0) << out;

  // What the install must contain (docs/interface.md, docs/deployment.md).
  std::string libdir = "lib";
  if (!fs::exists(prefix / "lib/cmake/ari/ariConfig.cmake")) {
    for (const auto& e : fs::recursive_directory_iterator(prefix)) {
      if (e.path().filename() == "ariConfig.cmake") {
        libdir = fs::relative(e.path().parent_path().parent_path().parent_path(), prefix).string();
      }
    }
  }
  for (const std::string& rel :
       {std::string("bin/ari-node"), std::string("bin/ari-cli"), libdir + "/libari_client.a",
        libdir + "/libari_idl_dds.a", libdir + "/cmake/ari/ariConfig.cmake",
        std::string("include/ari/ari.h"), std::string("include/ari/component/client/client.h"),
        std::string("include/ari/component/client/dds.h"),
        std::string("include/ari/component/client/error.h"),
        std::string("share/ari/node.textproto"), std::string("share/ari/policy_default.textproto"),
        std::string("share/ari/cyclonedds-lo.xml"), std::string("share/ari/cyclonedds-shm.xml"),
        std::string("share/ari/schemas/navigation_destination.json"),
        std::string("share/ari/schemas/yes_no_confirmation.json"),
        libdir + "/systemd/system/ari-node.service"}) {
    EXPECT_TRUE(fs::exists(prefix / rel)) << "not installed: " << rel;
  }
  EXPECT_FALSE(fs::exists(prefix / "bin/ari-ddsbench")) << "the benchmark is not installed";
  // The installed binaries start (their libraries resolve): --help exits 0.
  EXPECT_EQ(Shell(Quote(prefix / "bin/ari-node") + " --help", &out), 0) << out;

  // The example app, exactly as docs/interface.md shows it.
  std::ifstream doc_in(SourceDir() / "docs" / "interface.md");
  std::stringstream doc;
  doc << doc_in.rdbuf();
  const std::string heading = "### Example app (installed library)";
  const std::string cmake_block = CodeBlock(doc.str(), heading, "cmake");
  const std::string cpp_block = CodeBlock(doc.str(), heading, "cpp");
  ASSERT_NE(cmake_block.find("find_package(ari REQUIRED)"), std::string::npos) << cmake_block;
  ASSERT_NE(cpp_block.find("int main("), std::string::npos) << cpp_block;
  const fs::path app = dir / "nav_app";
  fs::create_directories(app);
  std::ofstream(app / "CMakeLists.txt") << cmake_block;
  std::ofstream(app / "main.cc") << cpp_block;
  rc = Shell(Quote(cmake) + " -S " + Quote(app) + " -B " + Quote(app / "build") +
                 " -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" + Quote(prefix),
             &out);
  ASSERT_EQ(rc, 0) << "configure of the doc example failed:\n" << out;
  rc = Shell(Quote(cmake) + " --build " + Quote(app / "build") + " -j2", &out);
  ASSERT_EQ(rc, 0) << "build of the doc example failed:\n" << out;
  ASSERT_TRUE(fs::exists(app / "build" / "nav_app"));

  // No node on this test's domain: the app must end with a clear "node absent" error.
  rc = Shell(Quote(app / "build" / "nav_app") + " hello " + std::to_string(TestDomainId()), &out);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("no live ARI node"), std::string::npos) << out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
