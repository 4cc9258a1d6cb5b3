// Preemption scenario (sim/preempt_run.h) on the real scheduler in real time, with a fake
// engine that takes real time per token. Checks structure only (the CRITICAL request
// overtakes the NORMAL prefill, turns park when every slot is busy, the NORMAL chunks run
// with the knobs the run reports, errors end the run), never the timing ratios.
#include "sim/preempt_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/test_util.h"
#include "tests/qos/sched_fixture.h"

namespace ari::sim {
namespace {

using qos::LoadPolicyFile;
using qos::Policy;
using qos::testing::FakeEngine;

// FakeEngine that sleeps 20 us per prompt token and 200 us per generated token; or, with
// `fail`, whose every chunk fails.
class SlowEngine final : public runtime::ChunkRunner {
 public:
  explicit SlowEngine(int slots, int park_areas = 0, bool fail = false)
      : inner_(slots, park_areas), fail_(fail) {}
  int32_t num_slots() const override { return inner_.num_slots(); }
  runtime::Result<void> StartTurn(int32_t slot, const runtime::TurnSpec& t) override {
    return inner_.StartTurn(slot, t);
  }
  runtime::Result<runtime::ChunkResult> RunChunk(int32_t slot,
                                                 const runtime::ChunkKnobs& k) override {
    if (fail_) return runtime::MakeError(runtime::ErrorCode::kInternal, "slow engine: failed");
    auto r = inner_.RunChunk(slot, k);
    if (r && r->phase == runtime::ChunkPhase::kPrefill) prefill_chunks_.push_back(k.prefill_tokens);
    if (r) {
      r->compute_ns = r->phase == runtime::ChunkPhase::kPrefill
                          ? int64_t{r->prompt_tokens} * 20'000
                          : static_cast<int64_t>(r->tokens.size()) * 200'000;
      std::this_thread::sleep_for(std::chrono::nanoseconds(r->compute_ns));
    }
    return r;
  }
  int32_t num_park_areas() const override { return inner_.num_park_areas(); }
  runtime::Result<runtime::ParkId> ParkSlot(int32_t slot) override { return inner_.ParkSlot(slot); }
  runtime::Result<void> ResumeParked(runtime::ParkId id, int32_t slot) override {
    return inner_.ResumeParked(id, slot);
  }
  void DropParked(runtime::ParkId id) override { inner_.DropParked(id); }
  // Prefill chunks the engine ran with a chunk knob of `tokens` prompt tokens.
  int ChunksOf(int tokens) const {
    return static_cast<int>(std::count(prefill_chunks_.begin(), prefill_chunks_.end(), tokens));
  }
  int parks() const { return inner_.parks; }

 private:
  FakeEngine inner_;
  bool fail_;
  std::vector<int32_t> prefill_chunks_;
};

Policy DefaultPolicy() {
  auto p = LoadPolicyFile(ari::testing::SourceDir() / "config" / "policy_default.textproto");
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().ToString());
  return p ? *p : Policy{};
}

constexpr int kNormalPrompt = 160;

PreemptRunOptions Options(const Policy& policy, runtime::ChunkRunner& engine) {
  PreemptRunOptions o;
  o.policy = &policy;
  o.engine = &engine;
  o.vocab_size = 500;
  o.context_length = 2048;
  // 160 tokens: 20 conservative chunks of 8, each followed by a 12 ms pause. CRITICAL
  // arrives after the second, so a loaded machine would have to stall this process for
  // about 200 ms before CRITICAL is late for the structural checks below.
  o.normal_prompt = kNormalPrompt;
  o.reps = 3;
  o.wait_timeout_ms = 30'000;
  return o;
}

const qos::Knobs& NormalKnobs(const Policy& p, bool conservative) {
  const auto nr = static_cast<size_t>(qos::Rank(qos::Urgency::kNormal));
  return conservative ? p.conservative[nr] : p.knobs[0][nr];
}

TEST(PreemptRun, CriticalIsServedBeforeTheNormalPrefillEnds) {
  const Policy policy = DefaultPolicy();
  SlowEngine engine(2);
  auto r = RunPreempt(Options(policy, engine));
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_EQ(r->reps.size(), 3u);
  EXPECT_EQ(r->normal_prompt, kNormalPrompt);
  const qos::Knobs& k = NormalKnobs(policy, true);
  EXPECT_EQ(r->knobs, "conservative (no sensor) (NORMAL: " + qos::KnobsToString(k) + ")");
  for (const PreemptRep& x : r->reps) {
    EXPECT_TRUE(x.critical_first) << PreemptRunTable(*r);
    EXPECT_GT(x.idle_ms, 0.0);
    EXPECT_GT(x.loaded_ms, 0.0);
    EXPECT_GT(x.ratio, 0.0);
    EXPECT_GT(x.period_ms, 0.0);
    EXPECT_LT(x.arrival_offset_ms, x.period_ms);
    EXPECT_EQ(x.parked, 0);
    EXPECT_GT(x.normal_tok_s, 0.0);
    EXPECT_GT(x.normal_chunk_ms, 0.0);
    EXPECT_GT(x.cpu_normal_tok_s, 0.0);
  }
  // The NORMAL prompt ran in the reported knobs' chunks: 160 / 8 per repetition.
  EXPECT_EQ(engine.ChunksOf(static_cast<int>(k.prefill_chunk)),
            3 * kNormalPrompt / static_cast<int>(k.prefill_chunk));
}

TEST(PreemptRun, AFixedTemperatureAppliesItsBandsKnobs) {
  const Policy policy = DefaultPolicy();
  SlowEngine engine(2);
  PreemptRunOptions o = Options(policy, engine);
  o.celsius = 40.0;
  o.normal_prompt = 480;  // 30 chunks of 16 with 3 ms pauses: the same margin as above
  o.reps = 1;
  auto r = RunPreempt(o);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const qos::Knobs& k = NormalKnobs(policy, false);
  EXPECT_EQ(r->knobs, "band normal (NORMAL: " + qos::KnobsToString(k) + ")");
  EXPECT_EQ(engine.ChunksOf(static_cast<int>(k.prefill_chunk)),
            480 / static_cast<int>(k.prefill_chunk));
  EXPECT_TRUE(r->reps[0].critical_first) << PreemptRunTable(*r);
}

TEST(PreemptRun, WithEverySlotBusyTheCriticalRequestParksATurn) {
  Policy policy = DefaultPolicy();
  policy.critical_reserved_slots = 0;  // the shipped 1 keeps a slot free: nothing to park
  SlowEngine engine(2, 2);
  PreemptRunOptions o = Options(policy, engine);
  o.busy_slots = 2;
  o.reps = 2;
  auto r = RunPreempt(o);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  for (const PreemptRep& x : r->reps) {
    EXPECT_GE(x.parked, 1) << PreemptRunTable(*r);
    EXPECT_TRUE(x.critical_first) << PreemptRunTable(*r);
  }
  EXPECT_GE(engine.parks(), 2);
  EXPECT_NE(PreemptRunTable(*r).find("2 slots busy"), std::string::npos);
}

TEST(PreemptRun, BadOptionsAreErrors) {
  const Policy policy = DefaultPolicy();
  SlowEngine engine(2);
  PreemptRunOptions o = Options(policy, engine);
  o.policy = nullptr;
  EXPECT_FALSE(RunPreempt(o).has_value());
  o = Options(policy, engine);
  o.reps = 0;
  EXPECT_FALSE(RunPreempt(o).has_value());
  o = Options(policy, engine);
  o.busy_slots = 3;
  auto busy = RunPreempt(o);
  ASSERT_FALSE(busy.has_value());
  EXPECT_NE(busy.error().message.find("above the 2 slots"), std::string::npos);
  o = Options(policy, engine);
  o.context_length = 80 + 16;  // the NORMAL prompt cut to 16 tokens: two chunks of 8
  auto short_prompt = RunPreempt(o);
  ASSERT_FALSE(short_prompt.has_value());
  EXPECT_NE(short_prompt.error().message.find("more than two chunks"), std::string::npos);
  EXPECT_EQ(engine.ChunksOf(8), 0) << "nothing ran";
}

TEST(PreemptRun, AFailingEngineEndsTheRunWithAnError) {
  const Policy policy = DefaultPolicy();
  SlowEngine engine(2, 0, /*fail=*/true);
  auto r = RunPreempt(Options(policy, engine));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("request 1 ended"), std::string::npos) << r.error().message;
}

TEST(PreemptRun, TableAndJsonCarryEveryRepetition) {
  const Policy policy = DefaultPolicy();
  SlowEngine engine(2);
  PreemptRunOptions o = Options(policy, engine);
  o.reps = 2;
  auto r = RunPreempt(o);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  const std::string table = PreemptRunTable(*r);
  EXPECT_EQ(table.rfind("knobs: conservative", 0), 0u) << table;
  EXPECT_NE(table.find("rep 0: idle TTFT"), std::string::npos) << table;
  EXPECT_NE(table.find("rep 1: idle TTFT"), std::string::npos) << table;
  EXPECT_NE(table.find("preempt: median idle TTFT"), std::string::npos) << table;
  const std::string json = PreemptRunJson(*r);
  EXPECT_EQ(
      json.rfind("{\"scenario\":\"preempt\",\"busy_slots\":0,\"normal_prompt\":160,\"reps\":2,", 0),
      0u)
      << json;
  size_t rows = 0;
  for (size_t p = json.find("\"critical_first\":true"); p != std::string::npos;
       p = json.find("\"critical_first\":true", p + 1)) {
    ++rows;
  }
  EXPECT_EQ(rows, 2u) << json;
  EXPECT_EQ(json.substr(json.size() - 3), "]}\n");
  EXPECT_DOUBLE_EQ(PreemptMedian({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(PreemptMedian({4.0, 1.0}), 2.5);
  EXPECT_DOUBLE_EQ(PreemptMedian({}), 0.0);
}

}  // namespace
}  // namespace ari::sim
