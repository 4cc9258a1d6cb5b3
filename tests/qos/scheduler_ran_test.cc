// The scheduler driving the REAL engine on a stories260K pack through a temperature ramp:
// for every chunk, what ran (runtime::ChunkResult, carried in StepInfo::ran and
// ChunkEvent::ran) equals what was decided (StepInfo::knobs), knob by knob: precision,
// ISA tier, threads, CPUs observed inside the compute within the decided set, layers
// dropped, KV type. Not the governor's decision log: the engine's own report.
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

#include "qos/scheduler.h"
#include "runtime/engine/engine.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"
#include "tests/qos/sched_fixture.h"

namespace ari::qos {
namespace {

using testing::MakeRequest;
using testing::RecordingSink;
constexpr int64_t kMs = thermal::kNsPerMs;

struct RampSource : thermal::TemperatureSource {
  double celsius = 40.0;
  void ReadInto(thermal::Reading& out) override {
    out.celsius = celsius;
    out.state = thermal::SensorState::kOk;
    out.source = "test";
  }
  std::string_view name() const override { return "test"; }
};

// The highest tier this CPU supports at or below `ceiling`: what the kernels must use.
runtime::kernels::IsaTier ExpectedIsa(runtime::kernels::IsaTier ceiling) {
  runtime::kernels::IsaTier best = runtime::kernels::IsaTier::kScalar;
  for (auto t : runtime::kernels::SupportedIsaTiers()) {
    if (t <= ceiling) best = t;
  }
  return best;
}

// Records the chunk events (what reached the sink for tokens) next to the steps.
struct TraceSink : RecordingSink {
  std::vector<ChunkEvent> events;
  void OnChunk(const ChunkEvent& c) override {
    RecordingSink::OnChunk(c);
    std::lock_guard lk(mu);
    events.push_back(c);
    events.back().text = {};
    events.back().tokens = {};
  }
};

// stories260K packed with a layer importance (so layer drop is available).
std::filesystem::path PackWithImportance() {
  const auto dir = ari::testing::TempDir("sched_ran");
  const auto plain = testing::WriteStoriesGguf(dir);
  if (plain.empty()) return {};
  auto m = runtime::Model::Load(plain, {});
  if (!m) return {};
  runtime::PackOptions po;
  const int32_t n = (*m)->config().n_layers;
  for (int32_t l = 0; l < n; ++l) po.layer_importance.push_back(0.1f + 0.05f * (l % 3));
  const auto pack = dir / "stories260K.imp.pack.gguf";
  return runtime::WritePack(plain, pack, po) ? pack : std::filesystem::path();
}

// Three thermal bands; the NORMAL class changes every knob from one band to the next.
Policy RampPolicy() {
  Policy p = testing::TestPolicy(/*prefill=*/4, /*decode=*/3);
  p.thermal_bands.push_back(ThermalBand{"warm", 70.0, 65.0, 0});
  p.thermal_bands.push_back(ThermalBand{"hot", 85.0, 80.0, 0});
  p.knobs.resize(3, p.knobs[0]);
  const int n = Rank(Urgency::kNormal);
  Knobs& cool = p.knobs[0][n];
  cool = testing::MakeKnobs(CoreClass::kPerformance, 1, WeightPrecision::kW8A16, 4, 3);
  Knobs& warm = p.knobs[1][n];
  warm = testing::MakeKnobs(CoreClass::kEfficiency, 1, WeightPrecision::kW4A8, 4, 3);
  warm.isa = IsaTier::kAvx2;
  warm.layer_drop = 1;
  Knobs& hot = p.knobs[2][n];
  hot = testing::MakeKnobs(CoreClass::kAny, 2, WeightPrecision::kW4A8, 4, 3);
  hot.isa = IsaTier::kScalar;
  hot.layer_drop = 2;
  hot.kv_precision = KvPrecision::kInt8;
  p.conservative = p.knobs[2];
  return p;
}

TEST(SchedulerRan, EveryChunkRunsWhatWasDecidedKnobByKnob) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs 2 CPUs";
  const auto pack = PackWithImportance();
  if (pack.empty()) GTEST_SKIP() << "stories260K not found under " << ari::testing::ModelsDir();
  runtime::EngineOptions eo;
  eo.model_path = pack;
  eo.slots = 2;
  eo.context_length = 256;
  eo.max_chunk = 64;
  eo.cpus = {0, 1};
  eo.threads = 2;
  auto engine = runtime::Engine::Create(eo);
  ASSERT_TRUE(engine.has_value()) << engine.error().ToString();
  ASSERT_TRUE((*engine)->has_pack());
  const Policy p = RampPolicy();
  RampSource temp;
  TraceSink sink;
  thermal::ManualClock clock;
  SchedulerOptions so;
  so.policy = &p;
  so.engine = engine->get();
  so.clock = &clock;
  so.sink = &sink;
  so.temperature = &temp;
  so.topology = testing::TwoCpuTopology();
  so.max_prefill_chunk = 64;
  auto s = Scheduler::Create(so);
  ASSERT_TRUE(s.has_value());
  // Up the ramp and down again, one request per leg (a live slot never returns from
  // INT8 KV to F16: the way down starts new turns).
  const double ramp[][4] = {{40, 75, 90, 90}, {90, 75, 40, 40}};
  uint64_t id = 1;
  for (const auto& leg : ramp) {
    ASSERT_EQ((*s)->Submit(MakeRequest(id, Urgency::kNormal, 12, 24)), SubmitStatus::kAdmitted);
    for (int i = 0; i < 500 && !sink.TerminalCount(id); ++i) {
      temp.celsius = leg[std::min<size_t>(sink.steps.size() % 16 / 4, 3)];
      (*s)->Step();
      clock.AdvanceNs(kMs);
    }
    ASSERT_TRUE(sink.EndedOnce(id, TerminalStatus::kDone));
    ++id;
  }
  std::map<runtime::Precision, int> precisions;
  std::map<int32_t, int> drops, threads;
  std::map<uint64_t, bool> int8;  // per request: its slot went INT8 (stays so)
  for (const StepInfo& st : sink.steps) {
    const runtime::ChunkKnobs& d = st.knobs;
    const ChunkRan& r = st.ran;
    SCOPED_TRACE(::testing::Message() << "request " << st.id << " chunk at " << st.start_ns);
    EXPECT_EQ(r.precision, d.precision);
    EXPECT_EQ(r.isa, ExpectedIsa(d.max_isa));
    EXPECT_FALSE(r.isa_refused);
    EXPECT_EQ(r.threads, d.threads);
    EXPECT_GE(r.threads_observed, 1);
    EXPECT_LE(r.threads_observed, r.threads);
    EXPECT_NE(r.cpus, 0u);
    EXPECT_EQ(r.cpus & ~d.cpu_mask, 0u) << std::hex << r.cpus << " vs " << d.cpu_mask;
    EXPECT_EQ(r.pin_failures, 0);
    EXPECT_EQ(r.layers_dropped, d.layer_drop);
    int8[st.id] = int8[st.id] || d.kv_type == runtime::KvType::kInt8;
    EXPECT_EQ(r.kv_type, int8[st.id] ? runtime::KvType::kInt8 : d.kv_type);
    ++precisions[r.precision];
    ++drops[r.layers_dropped];
    ++threads[r.threads];
  }
  // The ramp really moved every knob.
  EXPECT_GT(precisions[runtime::Precision::kW8A16], 0);
  EXPECT_GT(precisions[runtime::Precision::kW4A8], 0);
  EXPECT_EQ(drops.size(), 3u);
  EXPECT_EQ(threads.size(), 2u);
  // The sink's chunk events carry the same report as the steps with tokens.
  size_t with_tokens = 0;
  for (const StepInfo& st : sink.steps) with_tokens += st.new_tokens > 0 ? 1 : 0;
  ASSERT_EQ(sink.events.size(), with_tokens);
  size_t e = 0;
  for (const StepInfo& st : sink.steps) {
    if (st.new_tokens == 0) continue;
    const ChunkEvent& ev = sink.events[e++];
    EXPECT_EQ(ev.ran.precision, st.ran.precision);
    EXPECT_EQ(ev.ran.cpus, st.ran.cpus);
    EXPECT_EQ(ev.decided.cpu_mask, st.knobs.cpu_mask);
    EXPECT_EQ(ev.decided.layer_drop, st.knobs.layer_drop);
    EXPECT_EQ(ev.precision, st.ran.precision);
  }
}

}  // namespace
}  // namespace ari::qos
