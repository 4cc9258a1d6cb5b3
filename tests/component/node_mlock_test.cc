// memory_lock (idl/node_config.proto) when the kernel refuses the lock: ari-node runs in a
// child whose RLIMIT_MEMLOCK is 64 KiB and whose capability bounding set lacks
// CAP_IPC_LOCK (so a root test run is refused too). MEMORY_LOCK_REQUIRED: the node does
// not start (exit 2) and says why, naming the limit and the bytes asked;
// MEMORY_LOCK_TRY: it logs the refusal, runs unlocked, serves a request and stops cleanly.
// With the default limits, MEMORY_LOCK_TRY locks (tests/component/node_alloc_test.cc).
// The TRY run also sets huge_pages: HUGE_PAGES_OFF and finds the engine's choice in the log.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "component/client/client.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

using namespace std::chrono_literals;

// fork + exec ari-node --config `config` with a 64 KiB RLIMIT_MEMLOCK and no CAP_IPC_LOCK.
pid_t StartLowMemlockNode(const std::filesystem::path& config, const std::filesystem::path& log) {
  const std::string bin = NodeBinary().string(), cfg = config.string();
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    const rlimit low{rlim_t{64} * 1024, rlim_t{64} * 1024};
    if (setrlimit(RLIMIT_MEMLOCK, &low) != 0) _exit(125);
    // Without CAP_SETPCAP (not root) this fails and the limit alone refuses the lock.
    if (prctl(PR_CAPBSET_DROP, CAP_IPC_LOCK, 0, 0, 0) != 0 && getuid() == 0) _exit(126);
    execl(bin.c_str(), bin.c_str(), "--config", cfg.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Exit code of `pid` within `timeout` (-1: still running).
int WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

class NodeMlock : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "ASan intercepts mlock (a no-op that never refuses) in the ari-node of "
                    "this build";
#endif
    dir_ = TempDir("node_mlock");
    pack_ = Stories260KPack(dir_);
    if (pack_.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_, pack_;
  pid_t pid_ = -1;
};

TEST_F(NodeMlock, RequiredRefusesToStartAndSaysWhy) {
  const auto cfg = WriteNodeConfig(dir_, pack_, "memory_lock: MEMORY_LOCK_REQUIRED\n");
  const auto log = dir_ / "node.log";
  pid_ = StartLowMemlockNode(cfg, log);
  ASSERT_GT(pid_, 0);
  const int code = WaitExit(pid_, 60s);
  if (code >= 0) pid_ = -1;  // still running: TearDown kills it
  const std::string text = ReadAll(log);
  EXPECT_EQ(code, 2) << text;
  EXPECT_NE(text.find("memory_lock: MEMORY_LOCK_REQUIRED and mlock of "), std::string::npos)
      << text;
  EXPECT_NE(text.find("RLIMIT_MEMLOCK is 65536 bytes"), std::string::npos) << text;
  EXPECT_EQ(text.find("ready in"), std::string::npos) << text;
}

// Also huge_pages: HUGE_PAGES_OFF, which the node passes to the engine and logs.
TEST_F(NodeMlock, TryRunsUnlockedAndServes) {
  const auto cfg =
      WriteNodeConfig(dir_, pack_, "memory_lock: MEMORY_LOCK_TRY\nhuge_pages: HUGE_PAGES_OFF\n");
  const auto log = dir_ / "node.log";
  pid_ = StartLowMemlockNode(cfg, log);
  ASSERT_GT(pid_, 0);
  component::dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(TestDomainId());
  d.config = LoopbackConfigUri();
  auto domain = component::dds::Domain::Create(d);
  ASSERT_TRUE(domain.has_value()) << domain.error().ToString();
  component::ClientOptions o;
  o.client_id = "mlock";
  o.node_timeout = 60s;
  auto client = component::Client::Connect(*domain, o);
  ASSERT_TRUE(client.has_value()) << client.error().ToString();
  ASSERT_TRUE((*client)->WaitForNode(60s).has_value()) << ReadAll(log);
  component::AskParams p;
  p.prompt = "Once upon a time";
  p.max_tokens = 16;
  auto s = (*client)->Ask(p);
  ASSERT_TRUE(s.has_value());
  auto sum = s->Wait({}, 30s);
  ASSERT_TRUE(sum.has_value()) << sum.error().ToString();
  EXPECT_EQ(sum->status, ari_STATUS_DONE);
  client->reset();
  kill(pid_, SIGTERM);
  const int code = WaitExit(pid_, 30s);
  EXPECT_EQ(code, 0);
  if (code >= 0) pid_ = -1;  // still running: TearDown kills it
  const std::string text = ReadAll(log);
  EXPECT_NE(text.find("memory_lock: mlock of "), std::string::npos) << text;
  EXPECT_NE(text.find("RLIMIT_MEMLOCK is 65536 bytes"), std::string::npos) << text;
  EXPECT_NE(text.find("running unlocked (MEMORY_LOCK_TRY)"), std::string::npos) << text;
  EXPECT_NE(text.find("pools in 4 kB pages (huge pages off)"), std::string::npos) << text;
  EXPECT_NE(text.find("arena prefaulted: "), std::string::npos) << text;
}

}  // namespace
}  // namespace ari::testing
