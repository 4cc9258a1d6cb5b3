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
#include <vector>

#include "tests/common/test_util.h"

extern char** environ;

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
      for (ssize_t n = read(out_fd_, buf, sizeof buf); n > 0; n = read(out_fd_, buf, sizeof buf)) {
        output_.append(buf, static_cast<size_t>(n));
      }
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

// Runs this test executable again as a child (the same process image: the shm clients must
// be separate processes with their own iceoryx runtime) with `extra_env` added, and reads
// `size` bytes of report from the child's fd 3. True when the whole report arrived and the
// child exited 0.
inline bool RunSelfAsChild(const std::vector<std::string>& extra_env, void* report, size_t size) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  char exe[] = "/proc/self/exe";
  char* argv[] = {exe, nullptr};
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  const pid_t pid = fork();
  if (pid == 0) {
    if (dup2(fds[1], 3) != 3) _exit(41);
    execve(exe, argv, envp.data());
    _exit(42);
  }
  close(fds[1]);
  size_t got = 0;
  auto* bytes = static_cast<char*>(report);
  while (got < size) {
    const ssize_t n = read(fds[0], bytes + got, size - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got == size && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace ari::testing
