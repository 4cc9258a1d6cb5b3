// Publish retries off the caller's thread (issue 18, docs/reliability.md "A stuck reader"):
// NodeTransport with a chunk writer that a stuck reader really throttles (KEEP_ALL and
// 8 kB non-adaptive writer-history watermarks: tests/component/chunk_throttle_test.cc
// shows this set-up times out a write after ~10 chunks), its only reader in a second
// process (a re-exec of this test) frozen with SIGSTOP. 300 chunks are published: no call
// blocks longer than one max_blocking_time (the old code retried up to 10 s per chunk on
// the scheduler thread), the chunks wait in the outbox; after SIGCONT the publisher thread
// delivers every one of them, none is lost or reported as a failure.
#include <dds/dds.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "ari.h"
#include "component/client/dds.h"
#include "component/node/node_transport.h"
#include "tests/common/dds_test_util.h"

namespace {
namespace dds = ari::component::dds;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int kChunks = 300;          // 6 requests of 50, each ended by a terminal chunk
constexpr double kMaxCallMs = 400.0;  // one max_blocking_time (100 ms) plus scheduling

// Child (ARI_OUTBOX_CHILD=<domain>, ARI_OUTBOX_COUNT=<file>): a TokenChunk reader with the
// production reader QoS that takes every sample and writes its count to the file.
int RunChild() {
  const char* domain = std::getenv("ARI_OUTBOX_CHILD");
  const char* count_file = std::getenv("ARI_OUTBOX_COUNT");
  if (domain == nullptr || *domain == '\0' || count_file == nullptr) return 0;
  const auto id = static_cast<dds_domainid_t>(std::atoi(domain));
  if (dds_create_domain(id, ari::testing::LoopbackConfigUri().c_str()) < 0) _exit(2);
  const dds_entity_t pp = dds_create_participant(id, nullptr, nullptr);
  const dds::TopicQosSpec& spec = dds::TopicQos(dds::TopicKind::kTokenChunk);
  const dds_entity_t topic = dds_create_topic(pp, dds::TopicDescriptor(dds::TopicKind::kTokenChunk),
                                              spec.name, nullptr, nullptr);
  const dds::Qos q = dds::ReaderQos(dds::TopicKind::kTokenChunk);
  const dds_entity_t reader =
      pp < 0 || topic < 0 ? -1 : dds_create_reader(pp, topic, q.get(), nullptr);
  if (reader < 0) _exit(3);
  long total = 0;
  void* samples[16] = {};
  dds_sample_info_t infos[16];
  for (;;) {
    const dds_return_t n = dds_take(reader, samples, infos, 16, 16);
    int valid = 0;
    for (dds_return_t i = 0; i < n; ++i) valid += infos[i].valid_data ? 1 : 0;
    if (n > 0) {
      dds_return_loan(reader, samples, n);
      total += valid;
    }
    std::ofstream(count_file, std::ios::trunc) << total << "\n";
    std::this_thread::sleep_for(5ms);
  }
}
[[maybe_unused]] const int g_child = RunChild();

long ReadCount(const fs::path& p) {
  std::ifstream in(p);
  long n = -1;
  in >> n;
  return n;
}

// The child rewrites the file every 5 ms; a read that lands on the truncation retries.
long ReadCountSettled(const fs::path& p) {
  long n = ReadCount(p);
  for (int i = 0; i < 100 && n < 0; ++i) {
    std::this_thread::sleep_for(2ms);
    n = ReadCount(p);
  }
  return n;
}

// Kills and reaps the child reader however the test leaves its scope (an ASSERT included).
// Reap() before removing the count file: a live child writes it again within 5 ms.
class ChildReaper {
 public:
  explicit ChildReaper(pid_t pid) : pid_(pid) {}
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;
  ~ChildReaper() { Reap(); }
  void Reap() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  pid_t pid_;
};

TEST(TransportOutbox, ThrottledWriterNeverBlocksThePublisherAndLosesNothing) {
  const std::string domain_id = std::to_string(ari::testing::TestDomainId());
  const fs::path count_file =
      fs::temp_directory_path() / ("ari_outbox_count_" + std::to_string(getpid()));
  std::error_code ec;
  fs::remove(count_file, ec);
  const auto self = fs::read_symlink("/proc/self/exe", ec);
  const pid_t child = fork();
  if (child == 0) {
    setenv("ARI_OUTBOX_CHILD", domain_id.c_str(), 1);
    setenv("ARI_OUTBOX_COUNT", count_file.c_str(), 1);
    execl(self.c_str(), self.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(child, 0);
  ChildReaper reaper(child);
  // Loopback config + 8 kB non-adaptive writer-history watermarks (as chunk_throttle_test).
  const fs::path cfg = ari::testing::WriteSmallWhcConfig("outbox");
  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(std::atoi(domain_id.c_str()));
  d.config = "file://" + cfg.string();
  ari::component::NodeTransportOptions o;
  o.chunk_keep_all = true;
  std::atomic<int> failures{0};
  {
    auto t = ari::component::NodeTransport::Create(d, o);
    ASSERT_TRUE(t.has_value()) << t.error().ToString();
    (*t)->SetPublishFailureHandler(
        [&](const ari::component::Error&, const ari_TokenChunk&) { failures.fetch_add(1); });
    for (int i = 0; i < 400 && ReadCount(count_file) < 0; ++i) std::this_thread::sleep_for(25ms);
    // The set-up needs the writer matched with the reader before the freeze, else nothing
    // throttles it (a fixed wait was too short once under ASan with -j2). A volatile probe
    // chunk reaches the reader only once the writer has matched it: probe until one arrives.
    long probes_got = 0;
    for (int i = 0; i < 200 && probes_got < 1; ++i) {
      auto probe = (*t)->PublishInPlace([&](ari_TokenChunk& c) {
        c = ari_TokenChunk{};
        const dds::InstanceKey key = dds::KeyOfName("probe-" + std::to_string(i));
        c.key_hi = key.hi;
        c.key_lo = key.lo;
        c.terminal = true;
      });
      ASSERT_TRUE(probe.has_value()) << probe.error().ToString();
      std::this_thread::sleep_for(100ms);
      probes_got = ReadCountSettled(count_file);
    }
    ASSERT_GE(probes_got, 1) << "the reader never received a probe chunk in 20 s";
    std::this_thread::sleep_for(500ms);  // the probes in flight arrive, the reader acknowledges
    probes_got = ReadCountSettled(count_file);
    kill(child, SIGSTOP);
    double worst_ms = 0;
    for (int i = 0; i < kChunks; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      auto r = (*t)->PublishInPlace([&](ari_TokenChunk& c) {
        c = ari_TokenChunk{};
        const dds::InstanceKey key = dds::KeyOfName("req-" + std::to_string(i / 50));
        c.key_hi = key.hi;
        c.key_lo = key.lo;
        c.sequence_number = static_cast<uint32_t>(i % 50);
        c.terminal = i % 50 == 49;
      });
      worst_ms = std::max(
          worst_ms,
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      EXPECT_TRUE(r.has_value()) << i << ": " << r.error().ToString();
    }
    const ari::component::NodeTransportStats queued = (*t)->stats();
    std::this_thread::sleep_for(1000ms);  // the publisher thread retries meanwhile
    kill(child, SIGCONT);
    EXPECT_TRUE((*t)->FlushOutbox(20000ms)) << "the outbox did not drain";
    long got = -1;
    for (int i = 0; i < 400 && (got = ReadCount(count_file) - probes_got) < kChunks; ++i) {
      std::this_thread::sleep_for(25ms);
    }
    const ari::component::NodeTransportStats s = (*t)->stats();
    std::printf(
        "[ measure  ] frozen reader, throttled KEEP_ALL writer: %d chunks published, "
        "worst call %.1f ms, %llu queued (at most %llu at once), %llu retries; after "
        "SIGCONT the reader got %ld (after %ld probe chunks), %d lost\n",
        kChunks, worst_ms, static_cast<unsigned long long>(queued.chunks_queued),
        static_cast<unsigned long long>(s.outbox_max),
        static_cast<unsigned long long>(s.publish_retries), got, probes_got, failures.load());
    EXPECT_LT(worst_ms, kMaxCallMs);
    EXPECT_GT(queued.chunks_queued, 0u) << "the writer was never throttled: the set-up failed";
    EXPECT_GT(s.publish_retries, 0u) << "the retries ran on the publisher thread";
    EXPECT_EQ(s.outbox_full, 0u);
    EXPECT_EQ(got, kChunks);
    EXPECT_EQ(failures.load(), 0);
  }
  reaper.Reap();
  fs::remove(cfg, ec);
  fs::remove(count_file, ec);
}

}  // namespace
