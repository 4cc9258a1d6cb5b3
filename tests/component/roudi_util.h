// Test support: our own iceoryx RouDi daemon (iox-roudi) for the shared-memory tests.
// iceoryx 2.0 allows one RouDi per machine (socket /tmp/roudi): a test that needs one
// runs RUN_SERIAL, skips when a RouDi it did not start is already up, and stops its own
// by PID (SIGTERM), never by name.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/common/test_util.h"

namespace ari::testing {

inline constexpr char kRoudi[] = "/usr/bin/iox-roudi";

// RAII: our own iox-roudi with the project's pool config; stopped by PID.
class Roudi {
 public:
  Roudi() {
    const std::string cfg = (SourceDir() / "config" / "roudi.toml").string();
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      execl(kRoudi, kRoudi, "-c", cfg.c_str(), "-l", "info", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    out_fd_ = fds[0];
    // Wait (poll on its output, 20 s at most) for "RouDi is ready for clients".
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (output_.find("RouDi is ready for clients") == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return;
      char buf[512];
      const ssize_t n = read(out_fd_, buf, sizeof buf);
      if (n <= 0) return;  // RouDi exited
      output_.append(buf, static_cast<size_t>(n));
    }
    ready_ = true;
  }
  ~Roudi() { Stop(); }
  // SIGTERM by PID; returns RouDi's wait status (0 = clean shutdown).
  int Stop() {
    int status = -1;
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, &status, 0);
      pid_ = -1;
      char buf[4096];
      ssize_t n;
      while ((n = read(out_fd_, buf, sizeof buf)) > 0) output_.append(buf, static_cast<size_t>(n));
      if (std::getenv("ARI_SHM_TEST_VERBOSE")) {
        std::fprintf(stderr, "iox-roudi (exit status %d):\n%s\n", status, output_.c_str());
      }
    }
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
    return status;
  }
  bool ready() const { return ready_; }
  const std::string& output() const { return output_; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool ready_ = false;
  std::string output_;
};

}  // namespace ari::testing
