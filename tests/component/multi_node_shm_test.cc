// Several ari-node processes on one host with iceoryx shared memory on (issue 20): two
// nodes (n1, n2) with shared memory, one client whose DDS config has shared memory on
// and one whose config is plain UDP on loopback, all on one domain. Each client's
// requests are routed over both nodes and every one is answered by its addressed node
// only; the shm client's chunks come through iceoryx, the UDP client's through the
// network stack. Starts its own iox-roudi (RUN_SERIAL; stopped by PID); the clients run
// in child processes (fork + exec of this binary), so the test process never joins
// iceoryx.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "component/client/client.h"
#include "tests/component/node_test_util.h"
#include "tests/component/roudi_util.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
using namespace std::chrono_literals;

constexpr int kAsks = 6;  // 5 NORMAL, then 1 CRITICAL

struct AskReport {
  int status = -1;
  uint32_t chunks = 0;
  char node[32] = {};
  char error[160] = {};
};

struct ClientReport {
  int connect_ok = 0;
  int chunk_shm = -1;
  uint64_t chunk_samples = 0, chunk_shm_samples = 0;
  char note[256] = {};
  AskReport asks[kAsks];
};

// Client child (runs before main() when ARI_MULTI_SHM_CHILD is set): the asks, each
// streamed before the next is sent (the routing then sees both nodes' load), report on fd 3.
int RunClientChild() {
  const char* name = std::getenv("ARI_MULTI_SHM_CHILD");
  if (name == nullptr || *name == '\0') return 0;
  ClientReport rep;
  {
    component::ClientOptions o;
    o.domain.domain_id = static_cast<uint32_t>(std::atoi(std::getenv("ARI_SHM_DOMAIN")));
    o.domain.config = std::getenv("ARI_SHM_CONFIG");
    o.client_id = name;
    o.node_timeout = 20s;
    auto client = component::Client::Connect(o);
    if (client) {
      rep.connect_ok = 1;
      dds::CopyFixed((*client)->domain().shared_memory_note(), rep.note);
      rep.chunk_shm = (*client)->chunk_shared_memory();
      // Both nodes known and ready first (as an app that starts with the car would find
      // them): then both have matched this client's request writer, and each node's
      // "ignored" count below is exact.
      for (int t = 0; t < 400; ++t) {
        size_t ready = 0;
        for (const auto& v : (*client)->Nodes()) ready += v.ready && v.alive ? 1 : 0;
        if (ready >= 2) break;
        std::this_thread::sleep_for(50ms);
      }
      std::vector<component::Stream> streams;
      for (int i = 0; i < kAsks; ++i) {
        component::AskParams p;
        p.prompt = "Once upon a time";
        p.max_tokens = 24;
        p.urgency = i + 1 == kAsks ? ari_URGENCY_CRITICAL : ari_URGENCY_NORMAL;
        auto s = (*client)->Ask(p);
        if (!s) {
          dds::CopyFixed(s.error().ToString(), rep.asks[i].error);
          continue;
        }
        dds::CopyFixed(s->node_id(), rep.asks[i].node);
        streams.push_back(std::move(*s));
        std::this_thread::sleep_for(30ms);
      }
      for (size_t i = 0, k = 0; i < static_cast<size_t>(kAsks); ++i) {
        AskReport& a = rep.asks[i];
        if (a.error[0] != '\0') continue;
        auto sum = streams[k++].Wait({}, 30s);
        if (!sum) {
          dds::CopyFixed(sum.error().ToString(), a.error);
          continue;
        }
        a.status = sum->status;
        a.chunks = sum->chunks;
      }
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

std::filesystem::path WriteConfig(const std::filesystem::path& dir,
                                  const std::filesystem::path& model, const std::string& id) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "policy.textproto") << DefaultPolicyWith();
  auto path = dir / "node.textproto";
  std::ofstream out(path);
  out << "model_path: \"" << model.string() << "\"\n"
      << "policy_path: \"policy.textproto\"\n"
      << "dds { domain_id: " << TestDomainId() << " cyclone_config: \""
      << (SourceDir() / "config" / "cyclonedds-shm.xml").string()
      << "\" shared_memory: true liveliness_lease_ms: 1000 node_id: \"" << id << "\" }\n"
      << "session_slots: 2\nmax_context: 512\n"
      << "limits { max_prompt_bytes: 512 max_max_tokens: 256 }\n"
      << "sensor { kind: SENSOR_NONE }\nstatus_period_ms: 200\nthreads: 1\n";
  return path;
}

// "N requests for other nodes ignored" from a node's stop line (-1: no such line).
long Ignored(const std::string& log) {
  const size_t at = log.find(" requests for other nodes ignored");
  if (at == std::string::npos) return -1;
  const size_t start = log.rfind(' ', at - 1) + 1;
  return std::stol(log.substr(start, at - start));
}

TEST(MultiNodeSharedMemory, ShmAndUdpClientsAreRoutedOverTwoShmNodes) {
  if (!std::filesystem::exists(kRoudi)) GTEST_SKIP() << kRoudi << " missing: install iceoryx";
  if (std::string why; dds::RoudiReachable(&why)) {
    GTEST_SKIP() << "an iox-roudi this test did not start is running (socket /tmp/roudi); "
                    "not touching it - stop it and rerun";
  }
  const auto dir = TempDir("multi_node_shm");
  const auto model = Stories260K(dir);
  if (model.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  Roudi roudi;
  if (!roudi.ready() && dds::RoudiReachable()) {
    GTEST_SKIP() << "another iox-roudi started meanwhile (one per machine); not touching it";
  }
  ASSERT_TRUE(roudi.ready()) << "iox-roudi did not become ready:\n" << roudi.output();
  std::map<std::string, NodeProcess> nodes;
  for (const std::string id : {"n1", "n2"}) {
    ASSERT_TRUE(nodes[id].Start(WriteConfig(dir / id, model, id), dir / (id + ".log")));
  }
  const std::string domain = "ARI_SHM_DOMAIN=" + std::to_string(TestDomainId());
  const std::string cfg = "file://" + (SourceDir() / "config").string();
  ClientReport shm, udp;
  const bool ran_shm = RunSelfAsChild(
      {"ARI_MULTI_SHM_CHILD=shm-app", domain, "ARI_SHM_CONFIG=" + cfg + "/cyclonedds-shm.xml"},
      &shm, sizeof shm);
  const bool ran_udp = RunSelfAsChild(
      {"ARI_MULTI_SHM_CHILD=udp-app", domain, "ARI_SHM_CONFIG=" + cfg + "/cyclonedds-lo.xml"}, &udp,
      sizeof udp);
  std::map<std::string, std::string> logs;
  for (auto& [id, n] : nodes) {
    EXPECT_EQ(n.Stop(SIGTERM), 0) << n.Log();
    logs[id] = n.Log();
  }
  EXPECT_EQ(roudi.Stop(), 0) << roudi.output();  // every process deregistered cleanly
  ASSERT_TRUE(ran_shm && ran_udp) << logs["n1"] << logs["n2"];

  std::map<std::string, long> answered;  // per node, over both clients
  for (const ClientReport* r : {&shm, &udp}) {
    SCOPED_TRACE(r == &shm ? "shm client" : "udp client");
    ASSERT_EQ(r->connect_ok, 1) << r->note;
    std::map<std::string, int> per;
    for (const AskReport& a : r->asks) {
      EXPECT_EQ(a.status, ari_STATUS_DONE) << a.error;
      EXPECT_GT(a.chunks, 0u);
      ++per[a.node];
      ++answered[a.node];
    }
    EXPECT_EQ(per.count(""), 0u) << "a request went unaddressed";
    EXPECT_GE(per["n1"], 1);  // routed over both nodes
    EXPECT_GE(per["n2"], 1);
  }
  // The transport each client really used (Cyclone's own answer and sample counts).
  EXPECT_NE(std::string(shm.note).find("shared memory on"), std::string::npos) << shm.note;
  EXPECT_EQ(shm.chunk_shm, 1);
  EXPECT_GT(shm.chunk_samples, 0u);
  EXPECT_EQ(shm.chunk_shm_samples, shm.chunk_samples);
  EXPECT_EQ(udp.chunk_shm, 0);
  EXPECT_GT(udp.chunk_samples, 0u);
  EXPECT_EQ(udp.chunk_shm_samples, 0u);
  // Each node: chunks loaned from iceoryx, and it ignored exactly the requests addressed
  // to the other node.
  for (const std::string id : {"n1", "n2"}) {
    EXPECT_NE(logs[id].find("chunk writer shm=1, request reader shm=1"), std::string::npos)
        << logs[id];
    EXPECT_EQ(Ignored(logs[id]), long{2} * kAsks - answered[id]) << logs[id];
  }
  std::printf(
      "[ measure  ] n1 answered %ld, n2 %ld of %d; shm client %llu chunk samples via "
      "iceoryx, udp client %llu via UDP\n",
      answered["n1"], answered["n2"], 2 * kAsks,
      static_cast<unsigned long long>(shm.chunk_shm_samples),
      static_cast<unsigned long long>(udp.chunk_samples));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
