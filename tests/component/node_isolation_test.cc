// A slow or stuck reader costs only its own stream (issue 18). A second process (a
// re-exec of this test) starts three long answers and then stops reading: either its
// whole process is frozen (SIGSTOP), or its TokenChunk reader is RELIABLE KEEP_ALL with
// 4 samples at most and it never takes, so it refuses every further chunk. Another
// client's chunk spacing stays within 2x of its normal value meanwhile.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "component/client/client.h"
#include "tests/component/node_fixture.h"
#include "tests/component/node_test_util.h"

namespace {
namespace dds = ari::component::dds;
using namespace std::chrono_literals;

// A participant whose TokenChunk reader is RELIABLE, KEEP_ALL, max 4 samples, and
// never takes: after 4 chunks it refuses (does not acknowledge) everything else.
class StuckReader {
 public:
  bool Init(std::shared_ptr<dds::Domain> domain) {
    auto pp = dds::Participant::Create(std::move(domain));
    if (!pp) return false;
    pp_ = std::move(*pp);
    auto rt = dds::Topic::Create(pp_, dds::TopicKind::kRequest);
    auto ct = dds::Topic::Create(pp_, dds::TopicKind::kTokenChunk);
    if (!rt || !ct) return false;
    req_t_ = std::move(*rt);
    chunk_t_ = std::move(*ct);
    auto w = dds::Writer::Create(pp_, req_t_);
    if (!w) return false;
    writer_ = std::move(*w);
    dds_qos_t* q = dds_create_qos();
    dds_qset_reliability(q, DDS_RELIABILITY_RELIABLE, DDS_MSECS(100));
    dds_qset_history(q, DDS_HISTORY_KEEP_ALL, 0);
    dds_qset_resource_limits(q, 4, DDS_LENGTH_UNLIMITED, 4);
    dds_qset_durability(q, DDS_DURABILITY_VOLATILE);
    reader_ = dds::Entity(dds_create_reader(pp_.handle(), chunk_t_.handle(), q, nullptr));
    dds_delete_qos(q);
    if (!reader_.valid()) return false;
    for (int i = 0; i < 400; ++i) {
      auto m = writer_.MatchedReaders();
      dds_subscription_matched_status_t st{};
      if (m && *m > 0 && dds_get_subscription_matched_status(reader_.handle(), &st) == 0 &&
          st.current_count > 0) {
        return true;
      }
      std::this_thread::sleep_for(25ms);
    }
    return false;
  }
  bool Ask(const std::string& id, uint32_t max_tokens) {
    ari_Request r{};
    const dds::InstanceKey key = dds::KeyOfName(id);  // one instance per request
    r.key_hi = key.hi;
    r.key_lo = key.lo;
    dds::CopyFixed(id, r.request_id);
    dds::CopyFixed("stuck", r.client_id);
    r.urgency = ari_URGENCY_NORMAL;
    r.max_tokens = max_tokens;
    const std::string prompt = "Once upon a time";
    std::memcpy(r.prompt, prompt.data(), prompt.size());
    r.prompt_len = static_cast<uint32_t>(prompt.size());
    return writer_.Write(&r).has_value();
  }

 private:
  dds::Participant pp_;
  dds::Topic req_t_, chunk_t_;
  dds::Writer writer_;
  dds::Entity reader_;
};

// Child process (re-exec, ARI_ISO_CHILD=frozen|keepall): three long answers, then
// "ready" in ARI_ISO_OUT once they stream; waits to be stopped (SIGSTOP) and killed.
int RunChild() {
  const char* mode = std::getenv("ARI_ISO_CHILD");
  if (mode == nullptr || *mode == '\0') return 0;
  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(std::atoi(std::getenv("ARI_ISO_DOMAIN")));
  d.config = ari::testing::LoopbackConfigUri();
  auto domain = dds::Domain::Create(d);
  if (!domain) _exit(2);
  std::ofstream out(std::getenv("ARI_ISO_OUT"));
  if (std::strcmp(mode, "keepall") == 0) {
    StuckReader stuck;
    if (!stuck.Init(*domain)) _exit(3);
    for (int i = 0; i < 3; ++i) {
      if (!stuck.Ask("stuck-" + std::to_string(i), 250)) _exit(4);
    }
    std::this_thread::sleep_for(200ms);  // streaming; the reader is full after 4 chunks
    out << "ready\n" << std::flush;
    for (;;) pause();
  }
  ari::component::ClientOptions o;
  o.client_id = "frozen";
  o.node_timeout = 20s;
  auto client = ari::component::Client::Connect(*domain, o);
  if (!client || !(*client)->WaitForNode(20s)) _exit(3);
  std::vector<ari::component::Stream> streams;
  for (int i = 0; i < 3; ++i) {
    ari::component::AskParams p;
    p.prompt = "Once upon a time";
    p.max_tokens = 250;
    auto s = (*client)->Ask(p);
    if (!s) _exit(4);
    streams.push_back(std::move(*s));
  }
  for (auto& s : streams) (void)s.Next(20s);
  out << "ready\n" << std::flush;
  for (;;) pause();
}
[[maybe_unused]] const int g_child = RunChild();

}  // namespace

namespace ari::testing {
namespace {

using component::AskParams;
using component::Client;
using Clock = std::chrono::steady_clock;

// Median spacing (ms) between the non-terminal chunks of one answer, and the 90th percentile.
struct Spacing {
  double median_ms = 0, p90_ms = 0;
  uint32_t chunks = 0;
  ari_ChunkStatus status = ari_STATUS_OK;
};

Spacing Measure(component::Client& client, const std::string& prompt, uint32_t max_tokens) {
  component::AskParams p;
  p.prompt = prompt;
  p.max_tokens = max_tokens;
  Spacing s;
  auto stream = client.Ask(p);
  EXPECT_TRUE(stream.has_value());
  if (!stream) return s;
  std::vector<double> gaps;
  Clock::time_point last{};
  for (;;) {
    auto c = stream->Next(30s);
    if (!c) break;
    const auto now = Clock::now();
    if (c->terminal) {
      s.status = static_cast<ari_ChunkStatus>(dds::RawEnum(c->status));
      break;
    }
    if (s.chunks++ > 0)
      gaps.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  }
  if (gaps.empty()) return s;
  std::sort(gaps.begin(), gaps.end());
  s.median_ms = gaps[gaps.size() / 2];
  s.p90_ms = gaps[gaps.size() * 9 / 10];
  return s;
}

// The node's Cyclone config with an 8 kB non-adaptive writer-history high-water mark,
// the setting under which a reliable writer would block soonest once a reader stops
// acknowledging. On Cyclone 0.10.2 the KEEP_LAST chunk writer still never blocks (its
// WHC grows to ~1200 unacknowledged chunks, publish: 0 retries; docs/reliability.md
// "A stuck reader"): if a Cyclone change ever made it throttle, these tests see it.
void UseSmallWhc(const std::filesystem::path& dir, const std::filesystem::path& cfg) {
  std::ifstream lo_in(SourceDir() / "config" / "cyclonedds-lo.xml");
  std::stringstream ss;
  ss << lo_in.rdbuf();
  std::string xml = ss.str();
  const std::string domain_end = "</Domain>";
  xml.insert(xml.rfind(domain_end),
             "<Internal><Watermarks><WhcHigh>8kB</WhcHigh><WhcHighInit>8kB</WhcHighInit>"
             "<WhcLow>2kB</WhcLow>"
             "<WhcAdaptive>false</WhcAdaptive></Watermarks></Internal>\n");
  const auto xml_path = dir / "cyclonedds-smallwhc.xml";
  std::ofstream(xml_path) << xml;
  std::ifstream cfg_in(cfg);
  std::stringstream cs;
  cs << cfg_in.rdbuf();
  std::string text = cs.str();
  const std::string lo = (SourceDir() / "config" / "cyclonedds-lo.xml").string();
  if (auto at = text.find(lo); at != std::string::npos) text.replace(at, lo.size(), xml_path);
  std::ofstream(cfg) << text;
}

class NodeIsolation : public NodeTestBase {
 protected:
  NodeIsolation() : NodeTestBase("node_isolation") {}

  // Median chunk spacing of one answer, before and while a child of `mode` is stuck.
  void Run(const std::string& mode, Spacing* base, Spacing* with) {
    NodeProcess node;
    auto cfg = WriteNodeConfig(dir_ / mode, model_);
    UseSmallWhc(dir_ / mode, cfg);
    ASSERT_TRUE(node.Start(cfg, dir_ / (mode + ".log")));
    component::ClientOptions o;
    o.client_id = "steady";
    o.node_timeout = 20s;
    auto client = Client::Connect(domain_, o);
    ASSERT_TRUE(client.has_value());
    ASSERT_TRUE((*client)->WaitForNode(20s).has_value()) << node.Log();
    (void)Measure(**client, "Once upon a time", 40);  // warm-up
    *base = Measure(**client, "Once upon a time", 200);
    const auto out = dir_ / (mode + ".out");
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::string domain_id = std::to_string(TestDomainId());  // before fork: pid-based
    const pid_t child = fork();
    if (child == 0) {
      setenv("ARI_ISO_CHILD", mode.c_str(), 1);
      setenv("ARI_ISO_DOMAIN", domain_id.c_str(), 1);
      setenv("ARI_ISO_OUT", out.c_str(), 1);
      execl(self.c_str(), self.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    ASSERT_GT(child, 0);
    bool ready = false;
    for (int i = 0; i < 1000 && !ready; ++i) {
      std::ifstream in(out);
      std::string line;
      ready = std::getline(in, line) && line == "ready";
      if (!ready) std::this_thread::sleep_for(20ms);
    }
    if (ready && mode == "frozen") kill(child, SIGSTOP);
    if (ready) *with = Measure(**client, "Once upon a time", 200);
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    ASSERT_TRUE(ready) << "the child never streamed";
    std::printf(
        "[ measure  ] chunk spacing, median / p90: normal %.2f / %.2f ms (%u chunks), "
        "with a %s reader %.2f / %.2f ms (%u chunks)\n",
        base->median_ms, base->p90_ms, base->chunks, mode.c_str(), with->median_ms, with->p90_ms,
        with->chunks);
    EXPECT_EQ(node.Stop(SIGTERM, 60s), 0);
    const std::string log = node.Log();
    if (auto at = log.find("publish:"); at != std::string::npos) {
      std::printf("%s\n", log.substr(at, log.find('\n', at) - at).c_str());
    }
  }
};

TEST_F(NodeIsolation, FrozenClientProcessCostsOnlyItsOwnStreams) {
  Spacing base, with;
  Run("frozen", &base, &with);
  EXPECT_EQ(with.status, ari_STATUS_DONE);
  EXPECT_EQ(with.chunks, 200u);
  EXPECT_LE(with.median_ms, 2.0 * base.median_ms);
}

TEST_F(NodeIsolation, KeepAllReaderThatStopsTakingCostsOnlyItsOwnStreams) {
  Spacing base, with;
  Run("keepall", &base, &with);
  EXPECT_EQ(with.status, ari_STATUS_DONE);
  EXPECT_EQ(with.chunks, 200u);
  EXPECT_LE(with.median_ms, 2.0 * base.median_ms);
}

}  // namespace
}  // namespace ari::testing
