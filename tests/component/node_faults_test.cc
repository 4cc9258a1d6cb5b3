// ari-node under faults (multi-process, the real binary):
//   - model missing / truncated / wrong magic at start-up: exit code 2, the reason on stderr;
//   - model file truncated while mapped: the node does not die of SIGBUS; requests end
//     FAILED "model file changed ...", NodeStatus says so, SIGTERM still exits 0;
//   - a client process killed mid-stream: the node is not blocked by the dead reader,
//     every one of its requests still ends with exactly one terminal (node log ledger);
//   - a cancel storm (duplicates, unknown ids, cancels of finished requests);
//   - SIGTERM while long prompts are being prefilled.
// (SIGTERM after the first token, in both shutdown modes: node_lifecycle_test.cc.)
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "component/client/client.h"
#include "tests/component/node_fixture.h"
#include "tests/component/node_test_util.h"

namespace {

namespace dds = ari::component::dds;
using namespace std::chrono_literals;

// Child process (re-exec of this binary, ARI_FAULT_CLIENT_CHILD=1): asks three long
// requests, appends their ids and "ready" to ARI_FAULT_OUT once each streams, then
// waits to be killed. Runs before main() so it never shares a forked DDS state.
int RunClientChild() {
  const char* flag = std::getenv("ARI_FAULT_CLIENT_CHILD");
  if (flag == nullptr || std::strcmp(flag, "1") != 0) return 0;
  ari::component::ClientOptions o;
  o.domain.domain_id = static_cast<uint32_t>(std::atoi(std::getenv("ARI_FAULT_DOMAIN")));
  o.domain.config = ari::testing::LoopbackConfigUri();
  o.client_id = "doomed";
  o.node_timeout = 20s;
  auto client = ari::component::Client::Connect(o);
  if (!client || !(*client)->WaitForNode(20s)) _exit(3);
  std::vector<ari::component::Stream> streams;
  std::ofstream out(std::getenv("ARI_FAULT_OUT"));
  for (int i = 0; i < 3; ++i) {
    ari::component::AskParams p;
    p.prompt = "Once upon a time";
    p.max_tokens = 80;  // NORMAL: 4 tokens per chunk under the conservative knobs
    auto s = (*client)->Ask(p);
    if (!s) _exit(4);
    out << s->request_id() << "\n" << std::flush;
    streams.push_back(std::move(*s));
  }
  for (auto& s : streams) (void)s.Next(20s);
  out << "ready\n" << std::flush;
  for (;;) pause();
}
[[maybe_unused]] const int g_child = RunClientChild();

}  // namespace

namespace ari::testing {
namespace {

using component::AskParams;
using component::Client;

std::string Slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Terminal lines the node logged for `rid` ("<rid> DONE (...)", "refused <rid>: ...").
int TerminalLines(const std::string& log, const std::string& rid) {
  int n = 0;
  for (const std::string& pat : {"] " + rid + " ", "] refused " + rid + ":"}) {
    for (size_t pos = log.find(pat); pos != std::string::npos; pos = log.find(pat, pos + 1)) ++n;
  }
  return n;
}

class NodeFaults : public NodeTestBase {
 protected:
  NodeFaults() : NodeTestBase("node_faults") {}
  std::unique_ptr<Client> Connect(const std::string& name) {
    component::ClientOptions o;
    o.client_id = name;
    o.node_timeout = 20s;
    auto c = Client::Connect(domain_, o);
    EXPECT_TRUE(c.has_value());
    if (!c || !(*c)->WaitForNode(20s)) return nullptr;
    return std::move(*c);
  }
  // Starts ari-node on `model` and returns its exit code (it must fail at start-up).
  int StartupExitCode(const std::string& name, const std::filesystem::path& model,
                      std::string* log) {
    NodeProcess node;
    auto cfg = WriteNodeConfig(dir_ / name, model);
    EXPECT_TRUE(node.Start(cfg, dir_ / (name + ".log")));
    const int rc = node.Stop(0, 30s);  // signal 0: wait for the exit
    *log = node.Log();
    return rc;
  }
  std::filesystem::path CopyModel(const std::string& name) {
    auto p = dir_ / name;
    std::filesystem::copy_file(model_, p, std::filesystem::copy_options::overwrite_existing);
    return p;
  }
  // Reads a stream to its end; returns its terminal chunks and checks the sequence.
  std::vector<ari_TokenChunk> Drain(component::Stream& s, uint32_t seq = 0) {
    std::vector<ari_TokenChunk> terminals;
    for (;;) {
      auto c = s.Next(30s);
      if (!c) {
        EXPECT_EQ(c.error().code, component::ErrorCode::kClosed) << c.error().ToString();
        break;
      }
      EXPECT_EQ(c->sequence_number, seq++);
      if (c->terminal) terminals.push_back(*c);
    }
    return terminals;
  }
};

TEST_F(NodeFaults, MissingModelExitsTwoWithReason) {
  std::string log;
  EXPECT_EQ(StartupExitCode("missing", dir_ / "no-such-model.gguf", &log), 2);
  EXPECT_NE(log.find("ari-node: "), std::string::npos) << log;
  EXPECT_NE(log.find("no-such-model.gguf"), std::string::npos) << log;
  EXPECT_NE(log.find("No such file"), std::string::npos) << log;
}

TEST_F(NodeFaults, TruncatedModelExitsTwoWithReason) {
  auto p = CopyModel("truncated.gguf");
  std::filesystem::resize_file(p, std::filesystem::file_size(p) / 2);
  std::string log;
  EXPECT_EQ(StartupExitCode("truncated", p, &log), 2);
  EXPECT_NE(log.find("truncated.gguf"), std::string::npos) << log;
  EXPECT_NE(log.find("past the end of the file"), std::string::npos) << log;
}

TEST_F(NodeFaults, WrongMagicExitsTwoWithReason) {
  auto p = CopyModel("magic.gguf");
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.write("GGML", 4);
  }
  std::string log;
  EXPECT_EQ(StartupExitCode("magic", p, &log), 2);
  EXPECT_NE(log.find("bad magic"), std::string::npos) << log;
}

TEST_F(NodeFaults, ModelTruncatedWhileMappedFailsRequestsNotTheNode) {
  // The node maps the pack it runs: truncate that file (a plain GGUF would be packed into
  // the cache and the mapped file would be the cached pack).
  const auto packed = Stories260KPack(dir_);
  ASSERT_FALSE(packed.empty());
  auto p = dir_ / "mapped.pack.gguf";
  std::filesystem::copy_file(packed, p, std::filesystem::copy_options::overwrite_existing);
  NodeProcess node;
  auto cfg = WriteNodeConfig(dir_ / "mapped", p);
  ASSERT_TRUE(node.Start(cfg, dir_ / "mapped.log"));
  auto client = Connect("mapped");
  ASSERT_TRUE(client);
  AskParams ap;
  ap.prompt = "Once upon a time";
  ap.max_tokens = 8;
  {
    auto s = client->Ask(ap);
    ASSERT_TRUE(s.has_value());
    ASSERT_TRUE(s->Wait({}, 20s).has_value());
  }
  // A stream in flight when the file shrinks ends once, DONE or FAILED.
  ap.max_tokens = 250;
  auto inflight = client->Ask(ap);
  ASSERT_TRUE(inflight.has_value());
  ASSERT_TRUE(inflight->Next(20s).has_value());
  std::filesystem::resize_file(p, 4096);
  auto t = Drain(*inflight, 1);
  ASSERT_EQ(t.size(), 1u) << node.Log();
  const int32_t st = dds::RawEnum(t[0].status);
  EXPECT_TRUE(st == ari_STATUS_DONE || st == ari_STATUS_FAILED) << st << " " << t[0].message;
  // Every later request: FAILED, "model file changed", and the node stays up.
  ap.max_tokens = 8;
  for (int i = 0; i < 2; ++i) {
    auto s = client->Ask(ap);
    ASSERT_TRUE(s.has_value());
    auto term = Drain(*s);
    ASSERT_EQ(term.size(), 1u);
    EXPECT_EQ(dds::RawEnum(term[0].status), ari_STATUS_FAILED);
    EXPECT_NE(std::strstr(term[0].message, "model file changed"), nullptr) << term[0].message;
  }
  auto status = client->WaitForNode(10s, [](const ari_NodeStatus& s) {
    return std::strstr(s.reason, "model file changed") != nullptr;
  });
  EXPECT_TRUE(status.has_value());
  EXPECT_EQ(node.Stop(SIGTERM), 0) << node.Log();
  EXPECT_NE(node.Log().find("model file changed"), std::string::npos);
}

TEST_F(NodeFaults, ClientKilledMidStreamDoesNotBlockTheNode) {
  NodeProcess node;
  auto cfg = WriteNodeConfig(dir_ / "vanish", model_);
  ASSERT_TRUE(node.Start(cfg, dir_ / "vanish.log"));
  auto observer = Connect("observer");
  ASSERT_TRUE(observer);
  const auto out = dir_ / "child.out";
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const pid_t child = fork();
  if (child == 0) {
    setenv("ARI_FAULT_CLIENT_CHILD", "1", 1);
    setenv("ARI_FAULT_DOMAIN", std::to_string(TestDomainId()).c_str(), 1);
    setenv("ARI_FAULT_OUT", out.c_str(), 1);
    execl(self.c_str(), self.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(child, 0);
  for (int i = 0; i < 1000 && Slurp(out).find("ready") == std::string::npos; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  kill(child, SIGKILL);
  int wst = 0;
  waitpid(child, &wst, 0);
  std::vector<std::string> ids;
  {
    std::istringstream in(Slurp(out));
    for (std::string line; std::getline(in, line);) {
      if (line != "ready") ids.push_back(line);
    }
  }
  ASSERT_EQ(ids.size(), 3u) << "child did not stream: " << Slurp(out) << node.Log();
  // The node keeps serving others while the dead client's requests are still live.
  AskParams ap;
  ap.prompt = "Hello";
  ap.max_tokens = 4;
  ap.urgency = ari_URGENCY_HIGH;
  auto s = observer->Ask(ap);
  ASSERT_TRUE(s.has_value());
  auto sum = s->Wait({}, 30s);
  EXPECT_TRUE(sum.has_value()) << node.Log();
  // Each of the dead client's requests ends exactly once (node log ledger).
  auto all_ended = [&] {
    const std::string log = node.Log();
    for (const auto& id : ids) {
      if (TerminalLines(log, id) < 1) return false;
    }
    return true;
  };
  for (int i = 0; i < 1500 && !all_ended(); ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(node.Stop(SIGTERM), 0);
  const std::string log = node.Log();
  for (const auto& id : ids) EXPECT_EQ(TerminalLines(log, id), 1) << id << "\n" << log;
}

TEST_F(NodeFaults, CancelStormEndsEveryStreamExactlyOnce) {
  NodeProcess node;
  auto cfg = WriteNodeConfig(dir_ / "storm", model_, "max_chunk: 4\n");
  ASSERT_TRUE(node.Start(cfg, dir_ / "storm.log"));
  auto a = Connect("storm-a");
  auto b = Connect("storm-b");
  ASSERT_TRUE(a && b);
  std::vector<component::Stream> streams;
  std::vector<Client*> owner;
  for (int i = 0; i < 16; ++i) {
    AskParams ap;
    ap.prompt = "Once upon a time there was a little girl";
    ap.max_tokens = 100;
    ap.urgency = i % 2 ? ari_URGENCY_NORMAL : ari_URGENCY_BACKGROUND;
    Client* c = i % 2 ? a.get() : b.get();
    auto s = c->Ask(ap);
    ASSERT_TRUE(s.has_value());
    streams.push_back(std::move(*s));
    owner.push_back(c);
  }
  // Hundreds of cancels: each request 3 times (+ once by the wrong client), and
  // unknown ids in between.
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < streams.size(); ++i) {
      if (i % 4 == 3) continue;  // a quarter is left to finish
      EXPECT_TRUE(owner[i]->Cancel(streams[i].request_id()).has_value());
      if (round == 0) (void)(owner[i] == a.get() ? b : a)->Cancel(streams[i].request_id());
      for (int k = 0; k < 5; ++k) {
        (void)owner[i]->Cancel("unknown-" + std::to_string(round) + "-" + std::to_string(i) + "-" +
                               std::to_string(k));
      }
    }
  }
  std::map<int32_t, int> by_status;
  for (size_t i = 0; i < streams.size(); ++i) {
    auto t = Drain(streams[i]);
    ASSERT_EQ(t.size(), 1u) << streams[i].request_id() << node.Log();
    const int32_t st = dds::RawEnum(t[0].status);
    ++by_status[st];
    if (i % 4 == 3)
      EXPECT_EQ(st, ari_STATUS_DONE) << t[0].message;
    else
      EXPECT_TRUE(st == ari_STATUS_CANCELLED || st == ari_STATUS_DONE) << st;
  }
  EXPECT_GT(by_status[ari_STATUS_CANCELLED], 0);
  // Cancels after the end change nothing; the node still serves.
  for (auto& s : streams) (void)a->Cancel(s.request_id());
  AskParams ap;
  ap.prompt = "Hello";
  ap.max_tokens = 4;
  auto s = a->Ask(ap);
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->Wait({}, 30s).has_value());
  EXPECT_EQ(node.Stop(SIGTERM), 0);
  const std::string log = node.Log();
  for (auto& st : streams) EXPECT_EQ(TerminalLines(log, st.request_id()), 1) << log;
}

TEST_F(NodeFaults, SigtermDuringPrefillEndsEveryRequestOnce) {
  NodeProcess node;
  auto cfg =
      WriteNodeConfig(dir_ / "prefill", model_, "max_chunk: 2\nshutdown_mode: SHUTDOWN_CANCEL\n");
  ASSERT_TRUE(node.Start(cfg, dir_ / "prefill.log"));
  auto client = Connect("prefill");
  ASSERT_TRUE(client);
  std::string prompt;
  while (prompt.size() < 480) prompt += "Once upon a time there was a little dog. ";
  prompt.resize(480);
  std::vector<component::Stream> streams;
  for (int i = 0; i < 6; ++i) {
    AskParams ap;
    ap.prompt = prompt;
    ap.max_tokens = 20;
    auto s = client->Ask(ap);
    ASSERT_TRUE(s.has_value());
    streams.push_back(std::move(*s));
  }
  // SIGTERM once the node is prefilling (its first non-idle decision is logged): a fixed
  // sleep raced the requests' arrival on a loaded machine, and a request the node never
  // received has no terminal chunk to give (the client sees the node's liveliness end).
  const auto until = std::chrono::steady_clock::now() + 20s;
  auto running = [&] {
    const std::string log = node.Log();
    for (size_t p = log.find("decision "); p != std::string::npos;
         p = log.find("decision ", p + 1)) {
      if (log.compare(p, 14, "decision idle ") != 0) return true;
    }
    return false;
  };
  while (!running() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(running()) << node.Log();
  std::this_thread::sleep_for(50ms);  // the other five follow the first on the same writer
  kill(node.pid(), SIGTERM);
  int shutdown_before_tokens = 0;
  for (auto& s : streams) {
    auto t = Drain(s);
    ASSERT_EQ(t.size(), 1u) << node.Log();
    const int32_t st = dds::RawEnum(t[0].status);
    EXPECT_TRUE(st == ari_STATUS_SHUTDOWN || st == ari_STATUS_DONE) << st << " " << t[0].message;
    if (st == ari_STATUS_SHUTDOWN && t[0].sequence_number == 0) ++shutdown_before_tokens;
  }
  EXPECT_EQ(node.Stop(0, 20s), 0);
  const std::string log = node.Log();
  for (auto& s : streams) EXPECT_EQ(TerminalLines(log, s.request_id()), 1) << log;
  RecordProperty("shutdown_before_first_token", shutdown_before_tokens);
}

}  // namespace
}  // namespace ari::testing
