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

#include "component/client/client.h"
#include "tests/common/dds_test_util.h"
#include "tests/component/fake_node.h"
#include "tests/component/roudi_util.h"

namespace {

namespace dds = ari::component::dds;
using namespace std::chrono_literals;
constexpr int kChunks = 100;
using ari::testing::kRoudi;
using ari::testing::Roudi;
using ari::testing::RunSelfAsChild;

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
  return RunSelfAsChild({"ARI_SHM_CLIENT_CHILD=1", "ARI_SHM_DOMAIN=" + std::to_string(domain_id),
                         "ARI_SHM_CONFIG=" + config},
                        out, sizeof *out);
}

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
  EXPECT_NE(std::string(off.client.note).find("not reachable"), std::string::npos)
      << off.client.note;
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
    // No retry: the first chunks of a new client's first stream used to be lost now and
    // then (1 in 47 runs) because RouDi connects iceoryx endpoints up to 100 ms after DDS
    // reports the match; the client now waits dds::kIceoryxSettle (dds.h).
    // ARI_SHM_TEST_REPEAT=N repeats this run (stress / diagnosis; with
    // ARI_ICEORYX_SETTLE_MS=0 the lost first chunks come back).
    const char* repeat_env = std::getenv("ARI_SHM_TEST_REPEAT");
    const int repeat = repeat_env ? std::max(1, std::atoi(repeat_env)) : 1;
    int incomplete = 0;
    for (int i = 0; i < repeat; ++i) {
      on = RunResult{};
      ASSERT_NO_FATAL_FAILURE(RunOnce(shm_config, &on));
      if (on.client.status != ari_STATUS_DONE ||
          on.client.chunks != static_cast<uint32_t>(kChunks + 1)) {
        ++incomplete;
        std::printf(
            "run %d: incomplete stream (status %d, %u chunks; node got %llu requests, "
            "published %llu chunks)\n",
            i, on.client.status, on.client.chunks,
            static_cast<unsigned long long>(on.node.requests),
            static_cast<unsigned long long>(on.node.chunks));
      }
    }
    EXPECT_EQ(incomplete, 0) << "of " << repeat << " runs";
    // Clean shutdown: every child deregistered from RouDi before exiting.
    EXPECT_EQ(roudi.Stop(), 0) << roudi.output();
  }
  EXPECT_EQ(on.node_exit, 0);
  EXPECT_EQ(on.client.connect_ok, 1);
  EXPECT_NE(std::string(on.client.note).find("shared memory on"), std::string::npos)
      << on.client.note;
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
  std::printf(
      "shm off: node chunks %llu loaned %llu; client request loaned %llu, chunk samples %llu\n",
      static_cast<unsigned long long>(off.node.chunks),
      static_cast<unsigned long long>(off.node.chunks_loaned),
      static_cast<unsigned long long>(off.client.request_loaned),
      static_cast<unsigned long long>(off.client.chunk_samples));
  std::printf(
      "shm on : node chunks %llu loaned %llu shm w=%d r=%d; client request loaned %llu "
      "shm w=%d, chunk samples %llu (shm reader %llu) r=%d\n",
      static_cast<unsigned long long>(on.node.chunks),
      static_cast<unsigned long long>(on.node.chunks_loaned), on.node.chunk_shm,
      on.node.request_shm, static_cast<unsigned long long>(on.client.request_loaned),
      on.client.request_shm, static_cast<unsigned long long>(on.client.chunk_samples),
      static_cast<unsigned long long>(on.client.chunk_shm_samples), on.client.chunk_shm);
}

}  // namespace
