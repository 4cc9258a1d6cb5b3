// Shared memory (iceoryx) really carries ARI's samples, and the same stream arrives
// with it on and off. Starts its own iox-roudi (one per machine: this executable runs
// with RUN_SERIAL and never touches a RouDi it did not start). Node and client run in
// child processes (fork + exec) so the test process itself never joins iceoryx.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include "component/client.h"
#include "tests/common/dds_test_util.h"
#include "tests/component/fake_node.h"

namespace {

namespace dds = ari::component::dds;
using namespace std::chrono_literals;
constexpr int kChunks = 100;
constexpr char kRoudi[] = "/usr/bin/iox-roudi";

struct ClientReport {
  int connect_ok = 0;
  int request_shm = -1;
  int chunk_shm = -1;
  int status = -1;
  uint64_t request_writes = 0, request_loaned = 0;
  uint64_t chunk_samples = 0, chunk_shm_samples = 0;
  uint32_t chunks = 0, gaps = 0, n_tokens = 0;
  char text[2048] = {};
  int32_t tokens[512] = {};
  char note[256] = {};
};

// Client child: ask once, report. Runs before main() when ARI_SHM_CLIENT_CHILD=1.
int RunClientChild() {
  const char* flag = std::getenv("ARI_SHM_CLIENT_CHILD");
  if (flag == nullptr || std::strcmp(flag, "1") != 0) return 0;
  ClientReport rep;
  {
    ari::component::ClientOptions o;
    o.domain.domain_id = static_cast<uint32_t>(std::atoi(std::getenv("ARI_SHM_DOMAIN")));
    o.domain.config = std::getenv("ARI_SHM_CONFIG");
    o.client_id = "shm-client";
    o.node_timeout = 10s;
    auto client = ari::component::Client::Connect(o);
    if (client) {
      rep.connect_ok = 1;
      dds::CopyFixed((*client)->domain().shared_memory_note(), rep.note);
      rep.request_shm = (*client)->request_shared_memory();
      rep.chunk_shm = (*client)->chunk_shared_memory();
      ari::component::AskParams p;
      p.prompt = "stream:" + std::to_string(kChunks);
      auto s = (*client)->Ask(p);
      if (s) {
        auto sum = s->Wait({}, 10s);  // the fake stream takes well under 1 s
        if (sum) {
          rep.status = sum->status;
          rep.chunks = sum->chunks;
          rep.gaps = sum->gaps;
          dds::CopyFixed(sum->text, rep.text);
          rep.n_tokens = static_cast<uint32_t>(std::min<size_t>(sum->tokens.size(), 512));
          std::memcpy(rep.tokens, sum->tokens.data(), rep.n_tokens * sizeof(int32_t));
        }
      }
      rep.request_writes = (*client)->request_stats().writes;
      rep.request_loaned = (*client)->request_stats().loaned_writes;
      rep.chunk_samples = (*client)->chunk_stats().samples;
      rep.chunk_shm_samples = (*client)->chunk_stats().shm_samples;
    }
  }
  const bool ok = write(3, &rep, sizeof rep) == static_cast<ssize_t>(sizeof rep);
  std::exit(ok ? 0 : 40);  // runs static destructors: deregisters from iox-roudi
}
const int kClientChildHook = RunClientChild();

// Runs the client child to completion and returns its report.
bool RunClient(uint32_t domain_id, const std::string& config, ClientReport* out) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.push_back("ARI_SHM_CLIENT_CHILD=1");
  env.push_back("ARI_SHM_DOMAIN=" + std::to_string(domain_id));
  env.push_back("ARI_SHM_CONFIG=" + config);
  std::vector<char*> envp;
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
  auto* bytes = reinterpret_cast<char*>(out);
  while (got < sizeof *out) {
    const ssize_t n = read(fds[0], bytes + got, sizeof *out - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got == sizeof *out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// RAII: our own iox-roudi with the project's pool config; stopped by PID.
class Roudi {
 public:
  Roudi() {
    const std::string cfg = (ari::testing::SourceDir() / "config" / "roudi.toml").string();
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
    const auto until = std::chrono::steady_clock::now() + 20s;
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

struct RunResult {
  ClientReport client;
  ari::testing::NodeReport node;
  int node_exit = -1;
};

void RunOnce(const std::string& config, RunResult* r) {
  ari::testing::FakeNodeConfig nc;
  nc.domain.domain_id = static_cast<uint32_t>(ari::testing::TestDomainId());
  nc.domain.config = config;
  ari::testing::FakeNodeProcess node(nc);
  ASSERT_TRUE(node.WaitReady()) << "fake node did not start";
  ASSERT_TRUE(RunClient(nc.domain.domain_id, config, &r->client)) << "client child failed";
  r->node_exit = node.Stop(&r->node);
}

void ExpectSameStream(const ClientReport& a, const ClientReport& b) {
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.chunks, b.chunks);
  EXPECT_STREQ(a.text, b.text);
  ASSERT_EQ(a.n_tokens, b.n_tokens);
  EXPECT_EQ(std::memcmp(a.tokens, b.tokens, a.n_tokens * sizeof(int32_t)), 0);
}

TEST(SharedMemory, SameStreamOverLoopbackAndIceoryx) {
  if (!std::filesystem::exists(kRoudi)) GTEST_SKIP() << kRoudi << " missing: install iceoryx";
  if (std::string why; dds::RoudiReachable(&why)) {
    GTEST_SKIP() << "an iox-roudi this test did not start is running (socket /tmp/roudi); "
                    "not touching it - stop it and rerun";
  }
  const std::string shm_config = dds::ShippedConfigUri("cyclonedds-shm.xml");

  // 1. Shared memory requested but no RouDi: both sides fall back to loopback.
  RunResult off;
  ASSERT_NO_FATAL_FAILURE(RunOnce(shm_config, &off));
  EXPECT_EQ(off.node_exit, 0);
  EXPECT_EQ(off.client.connect_ok, 1);
  EXPECT_NE(std::string(off.client.note).find("not reachable"), std::string::npos) << off.client.note;
  EXPECT_EQ(off.client.status, ari_STATUS_DONE);
  EXPECT_EQ(off.client.chunks, static_cast<uint32_t>(kChunks + 1));
  EXPECT_EQ(off.client.gaps, 0u);
  EXPECT_EQ(off.node.chunk_shm, 0);
  EXPECT_EQ(off.node.chunks_loaned, 0u);
  EXPECT_EQ(off.client.request_shm, 0);
  EXPECT_EQ(off.client.chunk_shm, 0);
  EXPECT_EQ(off.client.request_loaned, 0u);

  // 2. With our own RouDi: the same stream through iceoryx, with loans on both sides.
  RunResult on;
  {
    Roudi roudi;
    ASSERT_TRUE(roudi.ready()) << "iox-roudi did not become ready:\n" << roudi.output();
    // Rarely (seen 1 in 47 runs) the first chunks of the very first stream after a
    // client starts are lost: Cyclone 0.10 reports the reader matched before its
    // iceoryx subscriber finished subscribing through RouDi, and samples published in
    // that window never reach it (there is no API to wait for the subscription). A
    // lost stream is retried with a fresh node and client (clean counts), and said so.
    for (int attempt = 1; attempt <= 3; ++attempt) {
      on = RunResult{};
      ASSERT_NO_FATAL_FAILURE(RunOnce(shm_config, &on));
      if (on.client.status == ari_STATUS_DONE &&
          on.client.chunks == static_cast<uint32_t>(kChunks + 1)) {
        break;
      }
      std::printf("shm attempt %d: stream incomplete (status %d, %u chunks): retrying\n",
                  attempt, on.client.status, on.client.chunks);
    }
    // Clean shutdown: every child deregistered from RouDi before exiting.
    EXPECT_EQ(roudi.Stop(), 0) << roudi.output();
  }
  EXPECT_EQ(on.node_exit, 0);
  EXPECT_EQ(on.client.connect_ok, 1);
  EXPECT_NE(std::string(on.client.note).find("shared memory on"), std::string::npos) << on.client.note;
  EXPECT_EQ(on.node.chunk_shm, 1) << "dds_is_shared_memory_available(chunk writer)";
  EXPECT_EQ(on.node.request_shm, 1) << "dds_is_shared_memory_available(request reader)";
  EXPECT_EQ(on.client.request_shm, 1) << "dds_is_shared_memory_available(request writer)";
  EXPECT_EQ(on.client.chunk_shm, 1) << "dds_is_shared_memory_available(chunk reader)";
  EXPECT_EQ(on.node.chunks, static_cast<uint64_t>(kChunks + 1));
  EXPECT_EQ(on.node.chunks_loaned, on.node.chunks) << "every chunk written via dds_loan_sample";
  EXPECT_EQ(on.client.request_loaned, 1u);
  EXPECT_EQ(on.client.chunk_shm_samples, on.client.chunk_samples);
  EXPECT_EQ(on.client.gaps, 0u);
  ExpectSameStream(off.client, on.client);
  std::printf("shm off: node chunks %llu loaned %llu; client request loaned %llu, chunk samples %llu\n",
              static_cast<unsigned long long>(off.node.chunks),
              static_cast<unsigned long long>(off.node.chunks_loaned),
              static_cast<unsigned long long>(off.client.request_loaned),
              static_cast<unsigned long long>(off.client.chunk_samples));
  std::printf("shm on : node chunks %llu loaned %llu shm w=%d r=%d; client request loaned %llu "
              "shm w=%d, chunk samples %llu (shm reader %llu) r=%d\n",
              static_cast<unsigned long long>(on.node.chunks),
              static_cast<unsigned long long>(on.node.chunks_loaned), on.node.chunk_shm,
              on.node.request_shm, static_cast<unsigned long long>(on.client.request_loaned),
              on.client.request_shm, static_cast<unsigned long long>(on.client.chunk_samples),
              static_cast<unsigned long long>(on.client.chunk_shm_samples), on.client.chunk_shm);
}

}  // namespace
