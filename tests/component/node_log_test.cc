// The node's log line (component/node/node_log.h) is written whole: the intake thread and
// the scheduler thread log at the same time, and tests and operators read the terminal
// ledger ("[ari-node] <request id> CANCELLED ...") line by line. The line used to be three
// stdio calls, and a line of the other thread could land between its prefix and its text
// (seen in component.node_faults under ASan: "[ari-node] [ari-node] cancel of ...").
#include "component/node/node_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace ari::component {
namespace {

// Redirects stderr (fd 2) into a file for the scope.
class StderrToFile {
 public:
  explicit StderrToFile(const std::filesystem::path& path)
      : saved_(std::fflush(stderr) == 0 ? ::dup(2) : -1),
        file_(std::fopen(path.c_str(), "w")),
        ok_(saved_ >= 0 && file_ != nullptr && ::dup2(::fileno(file_), 2) == 2) {}
  ~StderrToFile() {
    std::fflush(stderr);
    if (saved_ >= 0 && ::dup2(saved_, 2) == 2) ::close(saved_);
    if (file_ != nullptr) std::fclose(file_);
  }
  StderrToFile(const StderrToFile&) = delete;
  StderrToFile& operator=(const StderrToFile&) = delete;
  bool ok() const { return ok_; }

 private:
  int saved_ = -1;
  FILE* file_ = nullptr;
  bool ok_ = false;
};

TEST(NodeLog, LinesFromTwoThreadsNeverInterleave) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("ari_node_log_test_" + std::to_string(::getpid()) + ".txt");
  constexpr int kLines = 4000;
  {
    StderrToFile redirect(path);
    ASSERT_TRUE(redirect.ok());
    auto writer = [](const char* who) {
      for (int i = 0; i < kLines; ++i) node_internal::Log("%s %d CANCELLED", who, i);
    };
    std::thread a(writer, "thread-a");
    std::thread b(writer, "thread-b");
    a.join();
    b.join();
  }
  std::ifstream in(path);
  std::string line;
  int lines = 0, bad = 0;
  std::string first_bad;
  while (std::getline(in, line)) {
    ++lines;
    const bool whole = line.starts_with("[ari-node] thread-") && line.ends_with(" CANCELLED") &&
                       line.find("[ari-node]", 1) == std::string::npos;
    if (!whole && bad++ == 0) first_bad = line;
  }
  std::error_code ec;
  std::filesystem::remove(path, ec);
  EXPECT_EQ(lines, 2 * kLines);
  EXPECT_EQ(bad, 0) << "first broken line: " << first_bad;
}

}  // namespace
}  // namespace ari::component
