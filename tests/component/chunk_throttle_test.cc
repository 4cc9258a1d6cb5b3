// When does a stuck reader throttle the node's TokenChunk writer (issue 18)? A reader in
// a second process (a re-exec of this test) matches and is then frozen with SIGSTOP, so
// it never acknowledges again; the writer runs with an 8 kB non-adaptive WhcHigh, the
// Cyclone setting under which a reliable writer blocks soonest. With the production
// chunk writer QoS (KEEP_LAST 256) Cyclone 0.10.2 never blocks a write; the same writer
// with KEEP_ALL times out within a few writes, which shows the set-up creates real
// back-pressure. docs/reliability.md "A stuck reader".
#include <dds/dds.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "ari.h"
#include "component/client/dds.h"
#include "tests/common/dds_test_util.h"

namespace {
namespace dds = ari::component::dds;
using namespace std::chrono_literals;

// Child (ARI_THROTTLE_CHILD=<domain>): a TokenChunk reader with the production reader
// QoS that waits to be frozen and killed.
int RunChild() {
  const char* domain = std::getenv("ARI_THROTTLE_CHILD");
  if (domain == nullptr || *domain == '\0') return 0;
  const auto id = static_cast<dds_domainid_t>(std::atoi(domain));
  if (dds_create_domain(id, ari::testing::LoopbackConfigUri().c_str()) < 0) _exit(2);
  const dds_entity_t pp = dds_create_participant(id, nullptr, nullptr);
  const dds::TopicQosSpec& spec = dds::TopicQos(dds::TopicKind::kTokenChunk);
  const dds_entity_t topic = dds_create_topic(pp, dds::TopicDescriptor(dds::TopicKind::kTokenChunk),
                                              spec.name, nullptr, nullptr);
  const dds::Qos q = dds::ReaderQos(dds::TopicKind::kTokenChunk);
  if (pp < 0 || topic < 0 || dds_create_reader(pp, topic, q.get(), nullptr) < 0) _exit(3);
  for (;;) pause();
}
[[maybe_unused]] const int g_child = RunChild();

struct Outcome {
  int ok = 0, timeouts = 0, other = 0;
  double worst_ms = 0;
};

// 600 chunk writes (12 requests of 50, each unregistered at its end) while the only
// reader is frozen, stopping at the 5th TIMEOUT (write or unregister); keep_all
// replaces the writer's KEEP_LAST history.
Outcome WriteWithFrozenReader(bool keep_all) {
  Outcome out;
  const std::string domain_id = std::to_string(ari::testing::TestDomainId());
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const pid_t child = fork();
  if (child == 0) {
    setenv("ARI_THROTTLE_CHILD", domain_id.c_str(), 1);
    execl(self.c_str(), self.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  EXPECT_GT(child, 0);
  if (child <= 0) return out;
  // Loopback config + 8 kB non-adaptive writer-history watermarks.
  const auto path = ari::testing::WriteSmallWhcConfig("chunk_throttle");
  const auto id = static_cast<dds_domainid_t>(std::atoi(domain_id.c_str()));
  const dds_entity_t domain = dds_create_domain(id, ("file://" + path.string()).c_str());
  const dds_entity_t pp = dds_create_participant(id, nullptr, nullptr);
  const dds::TopicQosSpec& spec = dds::TopicQos(dds::TopicKind::kTokenChunk);
  const dds_entity_t topic = dds_create_topic(pp, dds::TopicDescriptor(dds::TopicKind::kTokenChunk),
                                              spec.name, nullptr, nullptr);
  const dds::Qos q = dds::WriterQos(dds::TopicKind::kTokenChunk, dds::kDefaultLivelinessLease);
  dds_qos_t* wq = dds_create_qos();
  EXPECT_EQ(dds_copy_qos(wq, q.get()), DDS_RETCODE_OK);
  if (keep_all) dds_qset_history(wq, DDS_HISTORY_KEEP_ALL, 0);
  const dds_entity_t w = dds_create_writer(pp, topic, wq, nullptr);
  dds_delete_qos(wq);
  EXPECT_GT(domain, 0);
  EXPECT_GT(w, 0);
  dds_publication_matched_status_t st{};
  for (int i = 0; i < 400 && w > 0; ++i) {
    if (dds_get_publication_matched_status(w, &st) == 0 && st.current_count > 0) break;
    std::this_thread::sleep_for(25ms);
  }
  EXPECT_GT(st.current_count, 0) << "the child's reader never matched";
  std::this_thread::sleep_for(300ms);  // the reader acknowledges the (empty) start
  kill(child, SIGSTOP);
  ari_TokenChunk c{};
  for (int i = 0; i < 600 && st.current_count > 0 && out.timeouts < 5; ++i) {
    const dds::InstanceKey key = dds::KeyOfName("req-" + std::to_string(i / 50));
    c.key_hi = key.hi;
    c.key_lo = key.lo;
    c.sequence_number = static_cast<uint32_t>(i % 50);
    c.terminal = i % 50 == 49;
    const auto t0 = std::chrono::steady_clock::now();
    const dds_return_t rc = dds_write(w, &c);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    out.worst_ms = std::max(out.worst_ms, ms);
    if (rc == DDS_RETCODE_OK) {
      ++out.ok;
    } else if (rc == DDS_RETCODE_TIMEOUT) {
      ++out.timeouts;
    } else {
      ++out.other;
    }
    const dds_return_t ur = c.terminal ? dds_unregister_instance(w, &c) : DDS_RETCODE_OK;
    if (ur == DDS_RETCODE_TIMEOUT) ++out.timeouts;
    if (ur != DDS_RETCODE_OK && ur != DDS_RETCODE_TIMEOUT) ++out.other;
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  if (domain > 0) {
    EXPECT_EQ(dds_delete(domain), DDS_RETCODE_OK);
  }
  std::filesystem::remove(path, ec);
  std::printf(
      "[ measure  ] %s chunk writer, frozen reader, WhcHigh 8 kB: %d ok, %d timeouts, "
      "%d other, worst write %.1f ms\n",
      keep_all ? "KEEP_ALL" : "KEEP_LAST 256 (production)", out.ok, out.timeouts, out.other,
      out.worst_ms);
  return out;
}

TEST(ChunkThrottle, ProductionKeepLastWriterNeverBlocksOnAFrozenReader) {
  const Outcome o = WriteWithFrozenReader(false);
  EXPECT_EQ(o.ok, 600);
  EXPECT_EQ(o.timeouts, 0);
  EXPECT_EQ(o.other, 0);
  EXPECT_LT(o.worst_ms, 50.0);
}

// The control: the same set-up does create back-pressure on a KEEP_ALL writer, so the
// test above would see a throttling writer.
TEST(ChunkThrottle, KeepAllWriterTimesOutOnAFrozenReader) {
  const Outcome o = WriteWithFrozenReader(true);
  EXPECT_GT(o.timeouts, 0);
  EXPECT_EQ(o.other, 0);
}

}  // namespace
