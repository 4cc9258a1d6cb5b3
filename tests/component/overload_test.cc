// Overload through real DDS (loopback, own domain): 10,000 requests from 8 clients in a
// burst with mixed urgency against one ari-node process on stories260K with tiny
// max_tokens. Checks: bounded node memory (RSS before/after) and queue depths (from
// NodeStatus), BUSY for what does not fit, CRITICAL never refused (lower classes are
// evicted instead), and an independent ledger: every request id sent gets exactly one
// terminal chunk, none is lost, none is duplicated, no stray terminals.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include "component/client/client.h"
#include "component/client/ledger.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
using component::AskParams;
using component::Client;
using component::ClientOptions;
using namespace std::chrono_literals;

constexpr int kClients = 8;
constexpr int kPerClient = 1250;  // 10,000 in all
// Requests per client in an optional burst before the measured one (ARI_OVERLOAD_PRE;
// default 0 to keep the test short; 1250 shows the memory plateau, see the RSS checks).
const int kPreBurstPerClient =
    std::getenv("ARI_OVERLOAD_PRE") ? std::atoi(std::getenv("ARI_OVERLOAD_PRE")) : 0;
// Queue capacities of the test policy (CRITICAL lowered from 8 so it overflows often).
constexpr uint32_t kCapacity[4] = {64, 32, 16, 2};  // by ari Urgency: BG, NORMAL, HIGH, CRIT
constexpr uint32_t kTotalCapacity = 64 + 32 + 16 + 2;

// Resident set of a process in kB (VmRSS or VmHWM), -1 when unreadable.
long ProcKb(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::atol(line.c_str() + key.size() + 1);
  }
  return -1;
}

std::filesystem::path WriteOverloadConfig(const std::filesystem::path& dir,
                                          const std::filesystem::path& model) {
  std::ofstream(dir / "policy.textproto")
      << DefaultPolicyWith("queue_capacity: 8", "queue_capacity: 2");
  auto path = dir / "node.textproto";
  std::ofstream out(path);
  out << "model_path: \"" << model.string() << "\"\n"
      << "policy_path: \"policy.textproto\"\n"
      << "dds { domain_id: " << TestDomainId() << " cyclone_config: \""
      << (SourceDir() / "config" / "cyclonedds-lo.xml").string()
      << "\" liveliness_lease_ms: 2000 }\n"
      << "session_slots: 2\nmax_context: 256\n"
      << "limits { max_prompt_bytes: 256 max_max_tokens: 4 client_rate_per_s: 0 }\n"
      << "sensor { kind: SENSOR_NONE }\nstatus_period_ms: 50\nthreads: 1\n"
      << "shutdown_mode: SHUTDOWN_CANCEL\n";
  return path;
}

ari_UrgencyClass UrgencyFor(int i) {
  const int k = i % 20;
  if (k == 0) return ari_URGENCY_CRITICAL;  // 5%
  if (k <= 3) return ari_URGENCY_HIGH;      // 15%
  if (k <= 11) return ari_URGENCY_NORMAL;   // 40%
  return ari_URGENCY_BACKGROUND;            // 40%
}

struct Tally {
  std::mutex mu;
  uint64_t sent = 0, send_retries = 0, stream_errors = 0, gaps = 0;
  uint64_t status[4][component::kWireStatusCount] = {};  // [urgency][status]
  uint64_t evicted = 0;
  uint64_t critical_busy_nothing_to_evict = 0;  // CRITICAL BUSY saying "nothing to evict"
};

// Sends per_client requests from every client as fast as Ask returns (mixed urgency),
// then waits for every stream's terminal and tallies statuses.
void RunBurst(std::vector<std::unique_ptr<Client>>& clients, component::ChunkLedger& ledger,
              int per_client, Tally* tally) {
  std::vector<std::thread> senders;
  senders.reserve(kClients);
  for (int c = 0; c < kClients; ++c) {
    senders.emplace_back([&, c] {
      Client& cl = *clients[c];
      std::vector<std::pair<ari_UrgencyClass, component::Stream>> streams;
      streams.reserve(per_client);
      uint64_t retries = 0;
      for (int i = 0; i < per_client; ++i) {
        AskParams p;
        p.prompt = (i % 2) ? "Once upon a time" : "The little bird";
        p.max_tokens = 1 + static_cast<uint32_t>(i % 2);
        p.urgency = UrgencyFor(i + c);
        for (int attempt = 0;; ++attempt) {
          auto s = cl.Ask(p);
          if (s) {
            ledger.Expect(s->request_id());
            streams.emplace_back(p.urgency, std::move(*s));
            break;
          }
          // Writer back-pressure (reliable, max_blocking) is the only acceptable failure:
          // the sample was not written, so the request was never sent; send it again.
          ASSERT_EQ(s.error().code, component::ErrorCode::kDds) << s.error().ToString();
          ASSERT_LT(attempt, 100) << s.error().ToString();
          ++retries;
        }
      }
      uint64_t errors = 0, gaps = 0, evicted = 0, crit_busy_ok = 0;
      uint64_t st[4][component::kWireStatusCount] = {};
      for (auto& [urgency, s] : streams) {
        uint32_t status = 0;
        std::string message;
        bool terminal = false;
        auto sum = s.Wait(
            [&](const ari_TokenChunk& ch) {
              if (!ch.terminal) return;
              terminal = true;
              status = static_cast<uint32_t>(dds::RawEnum(ch.status));
              message = std::string(dds::FixedView(ch.message));
            },
            60s);
        if (!terminal) {
          ++errors;
          continue;
        }
        if (sum) gaps += sum->gaps;
        if (status < component::kWireStatusCount) ++st[urgency][status];
        if (message.find("evicted") != std::string::npos) ++evicted;
        if (urgency == ari_URGENCY_CRITICAL && status == ari_STATUS_BUSY &&
            message.find("nothing to evict") != std::string::npos) {
          ++crit_busy_ok;
        }
      }
      std::lock_guard<std::mutex> l(tally->mu);
      tally->sent += streams.size();
      tally->send_retries += retries;
      tally->stream_errors += errors;
      tally->gaps += gaps;
      tally->evicted += evicted;
      tally->critical_busy_nothing_to_evict += crit_busy_ok;
      for (int u = 0; u < 4; ++u) {
        for (int k = 0; k < component::kWireStatusCount; ++k) tally->status[u][k] += st[u][k];
      }
    });
  }
  for (auto& t : senders) t.join();
}

TEST(Overload, TenThousandRequestsEightClientsBoundedAndNothingLost) {
  const auto dir = TempDir("overload");
  const auto model = Stories260K(dir);
  if (model.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  NodeProcess node;
  ASSERT_TRUE(node.Start(WriteOverloadConfig(dir, model), dir / "node.log"));

  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(TestDomainId());
  d.config = LoopbackConfigUri();
  auto domain = dds::Domain::Create(d);
  ASSERT_TRUE(domain.has_value()) << domain.error().ToString();
  auto ledger = component::ChunkLedger::Create(*domain, "ovl");
  ASSERT_TRUE(ledger.has_value()) << ledger.error().ToString();

  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < kClients; ++c) {
    ClientOptions o;
    o.client_id = "ovl" + std::to_string(c);
    o.node_timeout = 30s;
    auto cl = Client::Connect(*domain, o);
    ASSERT_TRUE(cl.has_value()) << cl.error().ToString();
    ASSERT_TRUE((*cl)->WaitForNode(30s).has_value()) << node.Log();
    clients.push_back(std::move(*cl));
  }
  ASSERT_TRUE((*ledger)->WaitMatched(30s).has_value());

  // Warm-up: a few requests per client so the node's lazy allocations are done.
  for (auto& cl : clients) {
    for (int i = 0; i < 3; ++i) {
      AskParams p;
      p.prompt = "Once upon a time";
      p.max_tokens = 2;
      auto s = cl->Ask(p);
      ASSERT_TRUE(s.has_value()) << s.error().ToString();
      (*ledger)->Expect(s->request_id());
      ASSERT_TRUE(s->Wait({}, 30s).has_value());
    }
  }
  const long rss_warm = ProcKb(node.pid(), "VmRSS");
  // Monitor: queue depths from NodeStatus and the node's RSS while the burst runs.
  std::atomic<bool> burst_done{false}, measuring{false};
  uint32_t max_depth[4] = {}, max_total = 0;
  long rss_max = 0;
  std::thread monitor([&] {
    uint32_t last_seq = 0;
    while (!burst_done.load()) {
      auto view = clients[0]->Node();
      if (view.status && view.status->status_seq != last_seq) {
        last_seq = view.status->status_seq;
        uint32_t total = 0;
        for (int u = 0; u < 4; ++u) {
          max_depth[u] = std::max(max_depth[u], view.status->queue_depth[u]);
          total += view.status->queue_depth[u];
        }
        max_total = std::max(max_total, total);
      }
      if (measuring.load()) rss_max = std::max(rss_max, ProcKb(node.pid(), "VmRSS"));
      std::this_thread::sleep_for(10ms);
    }
  });

  // Optional pre-burst (ARI_OVERLOAD_PRE): the node's buffers and allocator arenas reach
  // their working size first; memory growth is then measured over the real burst.
  Tally pre;
  RunBurst(clients, **ledger, kPreBurstPerClient, &pre);
  std::this_thread::sleep_for(500ms);
  const long rss_before = ProcKb(node.pid(), "VmRSS");
  EXPECT_GT(rss_before, 0);
  measuring.store(true);
  Tally tally;
  const auto t0 = std::chrono::steady_clock::now();
  RunBurst(clients, **ledger, kPerClient, &tally);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool complete = (*ledger)->WaitComplete(30s);
  burst_done.store(true);
  monitor.join();
  const long rss_after = ProcKb(node.pid(), "VmRSS");
  const long hwm = ProcKb(node.pid(), "VmHWM");
  const component::LedgerReport report = (*ledger)->Report();

  std::printf("pre-burst: %llu requests, node RSS %ld kB after warm-up\n",
              static_cast<unsigned long long>(pre.sent), rss_warm);
  std::printf(
      "overload: %llu requests in %.1f s (%llu send retries); node RSS %ld kB before, "
      "%ld kB max, %ld kB after, VmHWM %ld kB; max queue depth BG %u NORMAL %u "
      "HIGH %u CRITICAL %u total %u; evicted %llu\nledger: %s\n",
      static_cast<unsigned long long>(tally.sent), secs,
      static_cast<unsigned long long>(tally.send_retries), rss_before, rss_max, rss_after, hwm,
      max_depth[0], max_depth[1], max_depth[2], max_depth[3], max_total,
      static_cast<unsigned long long>(tally.evicted), report.ToString().c_str());
  static constexpr const char* kUrg[4] = {"BACKGROUND", "NORMAL", "HIGH", "CRITICAL"};
  for (int u = 0; u < 4; ++u) {
    const uint64_t other =
        tally.status[u][ari_STATUS_CANCELLED] + tally.status[u][ari_STATUS_INVALID] +
        tally.status[u][ari_STATUS_FAILED] + tally.status[u][ari_STATUS_SHUTDOWN] +
        tally.status[u][ari_STATUS_FORBIDDEN];
    std::printf("  %-10s DONE %llu BUSY %llu REJECTED %llu DEADLINE_MISSED %llu other %llu\n",
                kUrg[u], static_cast<unsigned long long>(tally.status[u][ari_STATUS_DONE]),
                static_cast<unsigned long long>(tally.status[u][ari_STATUS_BUSY]),
                static_cast<unsigned long long>(tally.status[u][ari_STATUS_REJECTED]),
                static_cast<unsigned long long>(tally.status[u][ari_STATUS_DEADLINE_MISSED]),
                static_cast<unsigned long long>(other));
  }

  // Ledger: sent == terminals received, exactly one per id, nothing stray.
  EXPECT_EQ(tally.sent, static_cast<uint64_t>(kClients) * kPerClient);
  EXPECT_TRUE(complete) << report.ToString();
  EXPECT_TRUE(report.ok()) << report.ToString();
  EXPECT_EQ(report.expected, tally.sent + pre.sent + uint64_t{kClients} * 3);
  EXPECT_EQ(report.with_terminal, report.expected);
  EXPECT_EQ(report.terminals, report.expected);
  EXPECT_EQ(tally.stream_errors + pre.stream_errors, 0u);
  EXPECT_EQ(tally.gaps + pre.gaps, 0u);

  // Overload really happened, and refusals are BUSY (queue full) or evictions.
  uint64_t busy_lower = 0;
  for (int u = 0; u < 3; ++u) busy_lower += tally.status[u][ari_STATUS_BUSY];
  EXPECT_GT(busy_lower, 1000u);
  // CRITICAL is never refused for lack of room while lower classes are queued: a full
  // CRITICAL class evicts one. Only when the whole queue storage holds CRITICAL requests
  // may one be BUSY, and the node then says "nothing to evict" (RequestQueue::Push
  // returns kFull for CRITICAL only then; tests/qos). Release runs: 0 such; a slow node
  // (ASan) fills all 114 slots with CRITICAL and refuses a few dozen.
  EXPECT_EQ(tally.critical_busy_nothing_to_evict,
            tally.status[ari_URGENCY_CRITICAL][ari_STATUS_BUSY]);
  EXPECT_EQ(tally.status[ari_URGENCY_CRITICAL][ari_STATUS_REJECTED], 0u);
  EXPECT_GT(tally.status[ari_URGENCY_CRITICAL][ari_STATUS_DONE], 0u);
  // Every REJECTED of a lower class is an eviction by a CRITICAL request.
  uint64_t rejected_lower = 0;
  for (int u = 0; u < 3; ++u) rejected_lower += tally.status[u][ari_STATUS_REJECTED];
  EXPECT_EQ(rejected_lower, tally.evicted);

  // Bounded queues: no class beyond its capacity (CRITICAL may take evicted slots).
  for (int u = 0; u < 3; ++u) EXPECT_LE(max_depth[u], kCapacity[u]) << kUrg[u];
  EXPECT_LE(max_depth[3], kTotalCapacity);
  EXPECT_LE(max_total, kTotalCapacity);
  // Bounded memory. The node's RSS grows with the burst's working set (DDS buffers for
  // requests in flight, allocator arenas), not with the number of requests served:
  // observed +50..75 MB over this 10,000-request burst, and with ARI_OVERLOAD_PRE=1250
  // (a first 10,000-request burst) the second burst adds only ~5 MB (plateau;
  // docs/reliability.md "Overload"). ASan's quarantine makes RSS meaningless there.
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(rss_max - rss_before, 128 * 1024) << "kB";
  EXPECT_LT(rss_after - rss_before, 96 * 1024) << "kB";
#endif

  EXPECT_EQ(node.Stop(SIGTERM), 0) << node.Log().substr(0, 4000);
  clients.clear();
  ledger->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
