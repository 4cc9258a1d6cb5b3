// Privilege reduction: the sandbox (no_new_privs, Landlock write restriction) in a forked
// child, and a running ari-node that dropped root (when the test runs as root) and still
// serves: NoNewPrivs 1, no capabilities, uid of the configured user in /proc/<pid>/status.
#include "component/node/privileges.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <fstream>

#include "component/client/client.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
using namespace std::chrono_literals;

std::string StatusField(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) {
      auto v = line.substr(key.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v;
    }
  }
  return "";
}

bool CanCreate(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

TEST(Privileges, SandboxAllowsWritesOnlyBelowWritableDirs) {
  const auto dir = TempDir("privileges");
  const auto allowed = dir / "allowed", denied = dir / "denied";
  std::filesystem::create_directories(allowed);
  std::filesystem::create_directories(denied);
  std::ofstream(denied / "existing") << "x";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    component::SandboxOptions o;
    o.writable_dirs = {allowed};
    auto r = component::EnterSandbox(o);
    if (!r) _exit(10);
    if (StatusField(getpid(), "NoNewPrivs") != "1") _exit(11);
    if (!r->landlock_enforced) _exit(77);  // kernel without Landlock
    if (!CanCreate(allowed / "ok")) _exit(12);
    if (CanCreate(denied / "new")) _exit(13);
    if (errno != EACCES) _exit(14);
    // Writing an existing file and removing one are refused too; reading is not.
    if (::open((denied / "existing").c_str(), O_WRONLY | O_CLOEXEC) >= 0) _exit(15);
    if (::unlink((denied / "existing").c_str()) == 0) _exit(16);
    if (::open((denied / "existing").c_str(), O_RDONLY | O_CLOEXEC) < 0) _exit(17);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "Landlock not available in this kernel";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the _exit codes in the test";
  EXPECT_TRUE(std::filesystem::exists(allowed / "ok"));
  EXPECT_FALSE(std::filesystem::exists(denied / "new"));
  std::filesystem::remove_all(dir);
}

TEST(Privileges, DropUserWithoutRootIsANoOp) {
  if (geteuid() == 0) GTEST_SKIP() << "runs as root (covered by the node test)";
  auto r = component::DropUser("nobody");
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->find("not root"), std::string::npos);
}

TEST(Privileges, RunningNodeHasNoNewPrivsNoCapabilitiesAndServes) {
  const auto dir = TempDir("privileges_node");
  const auto model = Stories260K(dir);
  if (model.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  const bool root = geteuid() == 0;
  // Landlock: the node may write only below dir/state (it writes nothing today).
  std::filesystem::create_directories(dir / "state");
  const std::string extra = std::string("privileges { writable_dirs: \"state\"") +
                            (root ? " run_as_user: \"nobody\"" : "") + " }\n";
  NodeProcess node;
  ASSERT_TRUE(node.Start(WriteNodeConfig(dir, model, extra), dir / "node.log"));
  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(TestDomainId());
  d.config = LoopbackConfigUri();
  auto domain = dds::Domain::Create(d);
  ASSERT_TRUE(domain.has_value());
  component::ClientOptions o;
  o.client_id = "priv";
  o.node_timeout = 20s;
  auto client = component::Client::Connect(*domain, o);
  ASSERT_TRUE(client.has_value());
  ASSERT_TRUE((*client)->WaitForNode(20s).has_value()) << node.Log();
  // The node publishes its first status before it drops root: wait for the log line.
  for (int i = 0; i < 200 && node.Log().find("privileges:") == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(StatusField(node.pid(), "NoNewPrivs"), "1") << node.Log();
  EXPECT_EQ(StatusField(node.pid(), "CapEff"), "0000000000000000");
  EXPECT_EQ(StatusField(node.pid(), "CapPrm"), "0000000000000000");
  EXPECT_EQ(StatusField(node.pid(), "CapAmb"), "0000000000000000");
  if (root) {
    EXPECT_EQ(StatusField(node.pid(), "Uid"), "65534\t65534\t65534\t65534") << node.Log();
    EXPECT_NE(node.Log().find("running as nobody"), std::string::npos) << node.Log();
  }
  // Still serves after the drop (DDS sockets and the mapped model stay usable).
  component::AskParams p;
  p.prompt = "Once upon a time";
  p.max_tokens = 4;
  auto s = (*client)->Ask(p);
  ASSERT_TRUE(s.has_value()) << s.error().ToString();
  auto sum = s->Wait({}, 20s);
  ASSERT_TRUE(sum.has_value()) << sum.error().ToString() << node.Log();
  EXPECT_EQ(sum->timing.tokens_generated, 4u);
  EXPECT_EQ(node.Stop(SIGTERM), 0) << node.Log();
  client->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
