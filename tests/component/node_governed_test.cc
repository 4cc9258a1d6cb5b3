// The governed path end to end, over real DDS: ari-node on a calibrated stories260K pack
// with a replayed temperature ramp (SENSOR_REPLAY: normal -> warm -> hot -> critical ->
// hot -> normal). HIGH and NORMAL clients ask through the whole ramp; a CRITICAL request
// arrives in the hot part. For every chunk:
//  - what ran equals what was decided, knob by knob (precision, ISA tier, threads, observed
//    CPUs within the decided core class, layers dropped, KV type);
//  - the knobs really change the computation: each request replayed in-process with the
//    chunk-by-chunk knobs the node reported gives the node's tokens exactly, and a W8A16
//    replay without layer drop differs for requests that ran W4A8 or dropped layers;
//  - CRITICAL runs on the performance cores in its own precision (W8A16 while the others
//    run W4A8 in the hot band).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "component/client/chunk_trace_text.h"
#include "component/client/client.h"
#include "runtime/engine/engine.h"
#include "runtime/kernels/cpu_features.h"
#include "tests/component/node_test_util.h"
#include "thermal/topology.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
using namespace std::chrono_literals;

// Seconds since the node started -> die temperature, a sample every 0.5 s (a held sample
// older than the replay's max age reads STALE); bands: normal < 70 <= warm < 85 <= hot < 95
// <= critical (exits 67 / 82 / 92), dwell 300 ms (ShortDwells).
std::string Ramp() {
  const std::pair<double, int> steps[] = {{0, 55},  {3, 78},  {6, 90}, {9, 97},
                                          {12, 88}, {15, 60}, {60, 60}};
  std::string csv = "time_s,celsius\n";
  for (size_t i = 0; i + 1 < std::size(steps); ++i) {
    for (double t = steps[i].first; t < steps[i + 1].first; t += 0.5) {
      csv += std::to_string(t) + "," + std::to_string(steps[i].second) + "\n";
    }
  }
  return csv + "60,60\n";
}
constexpr double kRunS = 17.5;
constexpr double kCriticalAtS = 7.2;  // inside the first hot stretch

struct Chunk {
  std::vector<int32_t> tokens;
  ari_KnobTrace decided{}, ran{};
};
struct Answer {
  ari_UrgencyClass urgency = ari_URGENCY_NORMAL;
  std::string prompt;
  std::vector<Chunk> chunks;
  ari_ChunkStatus status = ari_STATUS_OK;
  std::vector<int32_t> Tokens() const {
    std::vector<int32_t> all;
    for (const Chunk& c : chunks) all.insert(all.end(), c.tokens.begin(), c.tokens.end());
    return all;
  }
};

int ExpectedIsa(int ceiling) {
  int best = 0;
  for (auto t : runtime::kernels::SupportedIsaTiers()) {
    if (static_cast<int>(t) <= ceiling) best = static_cast<int>(t);
  }
  return best;
}

uint64_t MaskOf(const std::vector<int>& cpus) {
  uint64_t m = 0;
  for (int c : cpus) m |= uint64_t{1} << std::min(c, 63);
  return m;
}

Answer Ask(component::Client& client, ari_UrgencyClass u, const std::string& prompt) {
  component::AskParams p;
  p.prompt = prompt;
  p.max_tokens = 24;
  p.urgency = u;  // sampling zero: greedy
  if (u == ari_URGENCY_CRITICAL) p.deadline_ms = 5000;
  Answer a;
  a.urgency = u;
  a.prompt = prompt;
  auto stream = client.Ask(p);
  EXPECT_TRUE(stream.has_value()) << stream.error().ToString();
  if (!stream) return a;
  for (;;) {
    auto c = stream->Next(30s);
    if (!c) break;
    if (c->terminal) {
      a.status = static_cast<ari_ChunkStatus>(dds::RawEnum(c->status));
      EXPECT_FALSE(c->has_trace);
      continue;
    }
    EXPECT_TRUE(c->has_trace) << component::ChunkTraceText(*c);
    Chunk ch;
    ch.tokens.assign(c->token_ids, c->token_ids + c->n_tokens);
    ch.decided = c->decided;
    ch.ran = c->ran;
    EXPECT_EQ(c->pin_failures, 0u) << component::ChunkTraceText(*c);
    EXPECT_FALSE(c->isa_refused);
    EXPECT_FALSE(c->on_fallback);
    a.chunks.push_back(ch);
  }
  return a;
}

// What ran equals what was decided, knob by knob (ISA: the decided ceiling clamped to the
// CPU; KV: a slot converted to INT8 stays INT8 until its conversation ends).
void ExpectRanAsDecided(const Answer& a) {
  bool int8_seen = false;
  for (const Chunk& c : a.chunks) {
    const ari_KnobTrace &d = c.decided, &r = c.ran;
    SCOPED_TRACE("urgency " + std::to_string(a.urgency));
    EXPECT_EQ(dds::RawEnum(r.precision), dds::RawEnum(d.precision));
    EXPECT_EQ(dds::RawEnum(r.isa), ExpectedIsa(dds::RawEnum(d.isa)));
    EXPECT_EQ(r.threads, d.threads);
    EXPECT_NE(r.cpus, 0u);
    EXPECT_EQ(r.cpus & ~d.cpus, 0u) << "ran on a CPU outside the decided class";
    EXPECT_EQ(r.layers_dropped, d.layers_dropped);
    if (dds::RawEnum(d.kv_type) == ari_KV_INT8 || !int8_seen) {
      EXPECT_EQ(dds::RawEnum(r.kv_type), dds::RawEnum(d.kv_type));
    } else {
      EXPECT_EQ(dds::RawEnum(r.kv_type), ari_KV_INT8);
    }
    int8_seen |= dds::RawEnum(r.kv_type) == ari_KV_INT8;
  }
}

// The request replayed in-process on the same pack; `as_reported`: with each chunk's
// reported knobs, else all W8A16, no drop, F16 KV.
std::vector<int32_t> Replay(runtime::Engine& e, const Answer& a, bool as_reported) {
  auto ids = e.model().tokenizer()->Encode(a.prompt, runtime::EncodeOptions{});
  EXPECT_TRUE(ids.has_value());
  runtime::TurnSpec turn;
  turn.prompt = *ids;
  turn.max_tokens = 24;
  turn.keep_context = false;
  EXPECT_TRUE(e.StartTurn(0, turn).has_value());
  std::vector<int32_t> out;
  for (size_t i = 0; i < a.chunks.size() || !as_reported; ++i) {
    runtime::ChunkKnobs k;
    k.prefill_tokens = 512;
    k.decode_tokens = 8;
    if (as_reported) {
      const ari_KnobTrace& r = a.chunks[i].ran;
      k.precision = static_cast<runtime::Precision>(dds::RawEnum(r.precision));
      k.max_isa = static_cast<runtime::kernels::IsaTier>(dds::RawEnum(r.isa));
      k.threads = static_cast<int32_t>(r.threads);
      k.layer_drop = static_cast<int32_t>(r.layers_dropped);
      k.kv_type = static_cast<runtime::KvType>(dds::RawEnum(r.kv_type));
      k.decode_tokens = static_cast<int32_t>(a.chunks[i].tokens.size());
    }
    auto r = e.RunChunk(0, k);
    EXPECT_TRUE(r.has_value()) << r.error().ToString();
    if (!r) break;
    out.insert(out.end(), r->tokens.begin(), r->tokens.end());
    if (r->finished) break;
  }
  return out;
}

class NodeGoverned : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("node_governed");
    pack_ = Stories260KPack(dir_);
    if (pack_.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
    std::ofstream(dir_ / "ramp.csv") << Ramp();
    auto cfg = WriteNodeConfig(dir_, pack_, "", ShortDwells(DefaultPolicyWith()));
    std::ifstream in(cfg);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    text.replace(text.find("threads: 1"), 10, "threads: 2");
    const std::string none = "sensor { kind: SENSOR_NONE }";
    text.replace(text.find(none), none.size(),
                 "sensor { kind: SENSOR_REPLAY replay_csv: \"ramp.csv\" }");
    std::ofstream(cfg) << text;
    started_ = std::chrono::steady_clock::now();
    ASSERT_TRUE(node_.Start(cfg, dir_ / "node.log"));
  }
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
  std::filesystem::path dir_, pack_;
  NodeProcess node_;
  std::chrono::steady_clock::time_point started_;
};

TEST_F(NodeGoverned, ThermalRampRunsEveryChunkAsDecided) {
  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(TestDomainId());
  d.config = LoopbackConfigUri();
  auto dom = dds::Domain::Create(d);
  ASSERT_TRUE(dom.has_value()) << dom.error().ToString();
  auto connect = [&](const std::string& id) {
    component::ClientOptions co;
    co.client_id = id;
    co.node_timeout = 20s;
    auto c = component::Client::Connect(*dom, co);
    EXPECT_TRUE(c.has_value());
    return c ? std::move(*c) : nullptr;
  };
  auto high = connect("assistant"), chat = connect("chat"), nav = connect("nav");
  ASSERT_TRUE(high && chat && nav);
  auto status = high->WaitForNode(20s);
  ASSERT_TRUE(status.has_value()) << node_.Log();
  EXPECT_TRUE(status->can_switch_precision);

  std::mutex mu;
  std::vector<Answer> answers;
  const char* prompts[] = {"Once upon a time", "The little dog", "Lily saw a big red car"};
  auto loop = [&](component::Client* c, ari_UrgencyClass u) {
    for (int i = 0; Elapsed() < kRunS; ++i) {
      Answer a = Ask(*c, u, prompts[i % 3]);
      {
        std::lock_guard<std::mutex> lock(mu);
        answers.push_back(std::move(a));
      }
      std::this_thread::sleep_for(60ms);  // within the client rate limit (50/s, burst 20)
    }
  };
  std::thread th(loop, high.get(), ari_URGENCY_HIGH), tn(loop, chat.get(), ari_URGENCY_NORMAL);
  while (Elapsed() < kCriticalAtS) std::this_thread::sleep_for(20ms);
  const Answer critical = Ask(*nav, ari_URGENCY_CRITICAL, "The car turned left at the");
  th.join();
  tn.join();
  EXPECT_EQ(node_.Stop(SIGTERM), 0) << node_.Log();

  // 1. What ran = what was decided, for every chunk of every request.
  int chunks = 0;
  std::map<int, int> ran_precision, ran_drop, ran_kv, ran_threads, ran_isa;
  for (const Answer& a : answers) {
    EXPECT_EQ(a.status, ari_STATUS_DONE);
    ExpectRanAsDecided(a);
    for (const Chunk& c : a.chunks) {
      ++chunks;
      ++ran_precision[dds::RawEnum(c.ran.precision)];
      ++ran_drop[static_cast<int>(c.ran.layers_dropped)];
      ++ran_kv[dds::RawEnum(c.ran.kv_type)];
      ++ran_threads[static_cast<int>(c.ran.threads)];
      ++ran_isa[dds::RawEnum(c.ran.isa)];
    }
  }
  std::printf("[measured] %zu requests, %d chunks through the ramp\n", answers.size(), chunks);
  // The ramp exercised every knob: both precisions, layer drop, INT8 KV, 1 and 2 threads,
  // the AVX2 ceiling of the critical band next to the best tier.
  EXPECT_GT(ran_precision[ari_PRECISION_W8A16], 0);
  EXPECT_GT(ran_precision[ari_PRECISION_W4A8], 0);
  EXPECT_GT(ran_drop.size(), 1u);
  EXPECT_GT(ran_kv[ari_KV_INT8], 0);
  EXPECT_GT(ran_threads[1], 0);
  EXPECT_GT(ran_threads[2], 0);
  if (runtime::kernels::BestIsaTier() > runtime::kernels::IsaTier::kAvx2) {
    EXPECT_GT(ran_isa.size(), 1u);
  }

  // 2. CRITICAL in the hot band: performance cores, its own W4A8 (W8A16 only while cool),
  // no layer drop, as decided.
  ASSERT_FALSE(critical.chunks.empty());
  EXPECT_EQ(critical.status, ari_STATUS_DONE);
  ExpectRanAsDecided(critical);
  auto topo = thermal::DetectTopology();
  ASSERT_TRUE(topo.has_value());
  const uint64_t perf = MaskOf(topo->performance.empty() ? topo->efficiency : topo->performance);
  for (const Chunk& c : critical.chunks) {
    EXPECT_EQ(c.decided.cpus, perf);
    EXPECT_EQ(dds::RawEnum(c.ran.precision), ari_PRECISION_W4A8);
    EXPECT_EQ(c.ran.layers_dropped, 0u);
  }

  // 3. The knobs change the computation, and the trace says exactly how.
  runtime::EngineOptions eo;
  eo.model_path = pack_;
  eo.slots = 1;
  eo.context_length = 512;
  eo.threads = 2;
  auto engine = runtime::Engine::Create(eo);
  ASSERT_TRUE(engine.has_value()) << engine.error().ToString();
  int degraded = 0, differs = 0;
  for (const Answer& a : answers) {
    if (a.status != ari_STATUS_DONE) continue;
    EXPECT_EQ(Replay(**engine, a, true), a.Tokens()) << "reported knobs do not reproduce";
    bool changed = false;
    for (const Chunk& c : a.chunks) {
      changed |= dds::RawEnum(c.ran.precision) == ari_PRECISION_W4A8 || c.ran.layers_dropped > 0;
    }
    if (!changed) continue;
    ++degraded;
    differs += Replay(**engine, a, false) != a.Tokens();
  }
  std::printf("[measured] %d requests ran W4A8 or layer drop; %d differ from W8A16\n", degraded,
              differs);
  EXPECT_GT(degraded, 0);
  EXPECT_GT(differs, 0);
  std::filesystem::remove_all(dir_);
}

}  // namespace
}  // namespace ari::testing
