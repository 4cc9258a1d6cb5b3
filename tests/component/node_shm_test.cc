// The REAL ari-node (separate process, stories260K) gives the same token streams with
// shared memory off and on, for greedy and for seeded sampling, and the shm run really
// goes through iceoryx (Cyclone's dds_is_shared_memory_available on the client's and
// the node's endpoints, loaned request samples, the node's "shm=1" start-up line).
// Starts its own iox-roudi (RUN_SERIAL; stopped by PID). The client runs in a child
// process (fork + exec of this binary) so the test process never joins iceoryx.
// No retries: the client waits dds::kIceoryxSettle after the first match (dds.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "component/client/client.h"
#include "tests/component/node_test_util.h"
#include "tests/component/roudi_util.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
using namespace std::chrono_literals;

constexpr int kAsks = 2;  // 0: greedy, 1: seeded sampling
constexpr uint32_t kMaxTokens = 40;

struct AskReport {
  int status = -1;
  uint32_t chunks = 0, gaps = 0, n_tokens = 0;
  char text[1024] = {};
  int32_t tokens[256] = {};
  char error[160] = {};
};

struct ClientReport {
  int connect_ok = 0;
  int request_shm = -1, chunk_shm = -1;
  uint64_t request_writes = 0, request_loaned = 0;
  uint64_t chunk_samples = 0, chunk_shm_samples = 0;
  char note[256] = {};
  AskReport asks[kAsks];
};

component::AskParams Params(int i) {
  component::AskParams p;
  p.prompt = "Once upon a time";
  p.max_tokens = kMaxTokens;
  if (i == 1) {
    p.sampling.temperature = 0.9f;
    p.sampling.top_p = 0.9f;
    p.sampling.top_k = 40;
    p.sampling.seed = 1234;
  }
  return p;
}

// Client child (runs before main() when ARI_NODE_SHM_CHILD=1): both asks, report on fd 3.
int RunClientChild() {
  const char* flag = std::getenv("ARI_NODE_SHM_CHILD");
  if (flag == nullptr || std::strcmp(flag, "1") != 0) return 0;
  ClientReport rep;
  {
    component::ClientOptions o;
    o.domain.domain_id = static_cast<uint32_t>(std::atoi(std::getenv("ARI_SHM_DOMAIN")));
    o.domain.config = std::getenv("ARI_SHM_CONFIG");
    o.client_id = "node-shm-client";
    o.node_timeout = 20s;
    auto client = component::Client::Connect(o);
    if (client) {
      rep.connect_ok = 1;
      dds::CopyFixed((*client)->domain().shared_memory_note(), rep.note);
      rep.request_shm = (*client)->request_shared_memory();
      rep.chunk_shm = (*client)->chunk_shared_memory();
      for (int i = 0; i < kAsks; ++i) {
        AskReport& a = rep.asks[i];
        auto s = (*client)->Ask(Params(i));
        if (!s) {
          dds::CopyFixed(s.error().ToString(), a.error);
          continue;
        }
        auto sum = s->Wait({}, 30s);
        if (!sum) {
          dds::CopyFixed(sum.error().ToString(), a.error);
          continue;
        }
        a.status = sum->status;
        a.chunks = sum->chunks;
        a.gaps = sum->gaps;
        dds::CopyFixed(sum->text, a.text);
        a.n_tokens = static_cast<uint32_t>(std::min<size_t>(sum->tokens.size(), 256));
        std::memcpy(a.tokens, sum->tokens.data(), a.n_tokens * sizeof(int32_t));
      }
      rep.request_writes = (*client)->request_stats().writes;
      rep.request_loaned = (*client)->request_stats().loaned_writes;
      rep.chunk_samples = (*client)->chunk_stats().samples;
      rep.chunk_shm_samples = (*client)->chunk_stats().shm_samples;
    } else {
      dds::CopyFixed(client.error().ToString(), rep.note);
    }
  }
  const bool ok = write(3, &rep, sizeof rep) == static_cast<ssize_t>(sizeof rep);
  std::exit(ok ? 0 : 40);  // runs static destructors: deregisters from iox-roudi
}
const int kClientChildHook = RunClientChild();

bool RunClient(const std::string& config, ClientReport* out) {
  return RunSelfAsChild({"ARI_NODE_SHM_CHILD=1", "ARI_SHM_DOMAIN=" + std::to_string(TestDomainId()),
                         "ARI_SHM_CONFIG=" + config},
                        out, sizeof *out);
}

std::filesystem::path WriteConfig(const std::filesystem::path& dir,
                                  const std::filesystem::path& model, bool shm) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "policy.textproto") << DefaultPolicyWith();
  auto path = dir / "node.textproto";
  std::ofstream out(path);
  out << "model_path: \"" << model.string() << "\"\n"
      << "policy_path: \"policy.textproto\"\n"
      << "dds { domain_id: " << TestDomainId() << " cyclone_config: \""
      << (SourceDir() / "config" / "cyclonedds-shm.xml").string()
      << "\" shared_memory: " << (shm ? "true" : "false") << " liveliness_lease_ms: 1000 }\n"
      << "session_slots: 2\nmax_context: 512\n"
      << "limits { max_prompt_bytes: 512 max_max_tokens: 256 }\n"
      << "sensor { kind: SENSOR_NONE }\nstatus_period_ms: 200\nthreads: 1\n";
  return path;
}

struct RunResult {
  ClientReport client;
  std::string node_log;
  int node_exit = -1;
};

void RunOnce(const std::filesystem::path& dir, const std::filesystem::path& model, bool shm,
             RunResult* r) {
  const auto cfg = WriteConfig(dir, model, shm);
  NodeProcess node;
  ASSERT_TRUE(node.Start(cfg, dir / "node.log"));
  const std::string client_config =
      "file://" +
      (SourceDir() / "config" / (shm ? "cyclonedds-shm.xml" : "cyclonedds-lo.xml")).string();
  const bool ran = RunClient(client_config, &r->client);
  r->node_exit = node.Stop(SIGTERM);
  r->node_log = node.Log();
  ASSERT_TRUE(ran) << "client child failed\n" << r->node_log;
}

void ExpectSameStreams(const ClientReport& off, const ClientReport& on) {
  for (int i = 0; i < kAsks; ++i) {
    SCOPED_TRACE(i == 0 ? "greedy" : "seeded sampling");
    const AskReport& a = off.asks[i];
    const AskReport& b = on.asks[i];
    EXPECT_EQ(a.status, ari_STATUS_DONE) << a.error;
    EXPECT_EQ(b.status, ari_STATUS_DONE) << b.error;
    EXPECT_EQ(a.gaps, 0u);
    EXPECT_EQ(b.gaps, 0u);
    EXPECT_EQ(a.chunks, b.chunks);
    EXPECT_EQ(a.n_tokens, kMaxTokens);
    EXPECT_STREQ(a.text, b.text);
    ASSERT_EQ(a.n_tokens, b.n_tokens);
    EXPECT_EQ(std::memcmp(a.tokens, b.tokens, a.n_tokens * sizeof(int32_t)), 0);
  }
  // Sanity: the seeded stream is not just the greedy one again.
  EXPECT_NE(std::memcmp(off.asks[0].tokens, off.asks[1].tokens, kMaxTokens * sizeof(int32_t)), 0);
}

TEST(NodeSharedMemory, RealNodeGivesIdenticalStreamsWithShmOffAndOn) {
  if (!std::filesystem::exists(kRoudi)) GTEST_SKIP() << kRoudi << " missing: install iceoryx";
  if (std::string why; dds::RoudiReachable(&why)) {
    GTEST_SKIP() << "an iox-roudi this test did not start is running (socket /tmp/roudi); "
                    "not touching it - stop it and rerun";
  }
  const auto dir = TempDir("node_shm");
  const auto model = Stories260K(dir);
  if (model.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();

  RunResult off;
  ASSERT_NO_FATAL_FAILURE(RunOnce(dir / "off", model, false, &off));
  EXPECT_EQ(off.node_exit, 0) << off.node_log;
  EXPECT_EQ(off.client.connect_ok, 1) << off.client.note;
  EXPECT_NE(off.node_log.find("chunk writer shm=0, request reader shm=0"), std::string::npos)
      << off.node_log;
  EXPECT_EQ(off.client.request_shm, 0);
  EXPECT_EQ(off.client.chunk_shm, 0);
  EXPECT_EQ(off.client.request_loaned, 0u);
  EXPECT_EQ(off.client.chunk_shm_samples, 0u);
  EXPECT_NE(off.node_log.find(" 0 of them via iceoryx loans"), std::string::npos) << off.node_log;

  RunResult on;
  {
    Roudi roudi;
    if (!roudi.ready() && dds::RoudiReachable()) {
      GTEST_SKIP() << "another iox-roudi started meanwhile (one per machine); not touching it";
    }
    ASSERT_TRUE(roudi.ready()) << "iox-roudi did not become ready:\n" << roudi.output();
    ASSERT_NO_FATAL_FAILURE(RunOnce(dir / "on", model, true, &on));
    EXPECT_EQ(roudi.Stop(), 0) << roudi.output();  // every process deregistered cleanly
  }
  EXPECT_EQ(on.node_exit, 0) << on.node_log;
  EXPECT_EQ(on.client.connect_ok, 1) << on.client.note;
  EXPECT_NE(std::string(on.client.note).find("shared memory on"), std::string::npos)
      << on.client.note;
  // Cyclone itself says the endpoints use iceoryx: node side (logged at start-up) ...
  EXPECT_NE(on.node_log.find("shared memory on"), std::string::npos) << on.node_log;
  EXPECT_NE(on.node_log.find("chunk writer shm=1, request reader shm=1"), std::string::npos)
      << on.node_log;
  // Every chunk the node published went through a sample loaned from iceoryx.
  const auto stopped = on.node_log.find("chunks published, ");
  ASSERT_NE(stopped, std::string::npos) << on.node_log;
  const size_t line = on.node_log.rfind('(', stopped);
  unsigned long long tokens = 0, chunks = 0, loaned = 0;
  ASSERT_EQ(std::sscanf(on.node_log.c_str() + line,
                        "(%llu tokens served; %llu chunks published, %llu of them", &tokens,
                        &chunks, &loaned),
            3)
      << on.node_log;
  EXPECT_GT(chunks, 0u);
  EXPECT_EQ(loaned, chunks) << "node chunks via dds_loan_sample";
  // ... and client side: dds_is_shared_memory_available, loans, samples via iceoryx.
  EXPECT_EQ(on.client.request_shm, 1);
  EXPECT_EQ(on.client.chunk_shm, 1);
  EXPECT_EQ(on.client.request_writes, static_cast<uint64_t>(kAsks));
  EXPECT_EQ(on.client.request_loaned, static_cast<uint64_t>(kAsks))
      << "requests via dds_loan_sample";
  EXPECT_GT(on.client.chunk_samples, 0u);
  EXPECT_EQ(on.client.chunk_shm_samples, on.client.chunk_samples);
  ExpectSameStreams(off.client, on.client);
  std::printf("shm off: %u+%u chunks; shm on: %u+%u chunks, %llu chunk samples via iceoryx\n",
              off.client.asks[0].chunks, off.client.asks[1].chunks, on.client.asks[0].chunks,
              on.client.asks[1].chunks,
              static_cast<unsigned long long>(on.client.chunk_shm_samples));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
