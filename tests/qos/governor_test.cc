// The governor against the shipped default policy: hysteresis, dwell, sawtooth,
// sensor faults, the memory ladder and class knobs.
#include "qos/governor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/common/test_util.h"

namespace ari::qos {
namespace {

constexpr int64_t kMs = 1000000;
constexpr uint64_t kMB = 1024ull * 1024ull;

class GovernorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = LoadPolicyFile(ari::testing::SourceDir() / "config" / "policy_default.textproto");
    ASSERT_TRUE(p.has_value()) << p.error().ToString();
    policy_ = std::move(*p);
    in_.reading.state = thermal::SensorState::kOk;
    in_.reading.source = "test";
    in_.active = Urgency::kNormal;
  }

  // One decision at time t_ms with temperature c; the state carries over.
  const Decision& Step(int64_t t_ms, double c) {
    in_.now_ns = t_ms * kMs;
    in_.reading.celsius = c;
    in_.reading.time_ns = in_.now_ns;
    out_ = Decide(policy_, state_, in_);
    state_ = out_.state;
    return out_.decision;
  }
  const Decision& StepMem(int64_t t_ms, uint64_t avail_mb) {
    in_.mem_available_bytes = avail_mb * kMB;
    return Step(t_ms, 50.0);
  }
  int Band(const std::string& name) const { return policy_.ThermalBandIndex(name); }
  std::string Reason() const { return std::string(out_.decision.Reason()); }

  Policy policy_;
  GovernorState state_;
  GovernorInputs in_;
  GovernorOutput out_;
};

TEST_F(GovernorTest, FirstReadingPicksBandDirectly) {
  EXPECT_EQ(Step(0, 50.0).thermal_band, Band("normal"));
  state_ = {};
  EXPECT_EQ(Step(0, 90.0).thermal_band, Band("hot"));
  EXPECT_NE(Reason().find("first reading"), std::string::npos) << Reason();
}

TEST_F(GovernorTest, EnterAndExitWithHysteresis) {
  Step(0, 60.0);
  const Decision& d = Step(3000, 71.0);  // normal dwell (2 s) has passed
  EXPECT_EQ(d.thermal_band, Band("warm"));
  EXPECT_TRUE(d.thermal_changed);
  EXPECT_NE(Reason().find("band warm (71.0 C >= 70.0 enter)"), std::string::npos) << Reason();
  // Below enter but above exit (67): stays warm however long.
  EXPECT_EQ(Step(20000, 68.0).thermal_band, Band("warm"));
  EXPECT_EQ(Step(40000, 67.0).thermal_band, Band("warm"));
  const Decision& down = Step(41000, 66.9);
  EXPECT_EQ(down.thermal_band, Band("normal"));
  EXPECT_NE(Reason().find("band normal (66.9 C < 67.0 exit warm)"), std::string::npos) << Reason();
  // Back up only at the enter threshold, not at the exit one.
  EXPECT_EQ(Step(50000, 69.9).thermal_band, Band("normal"));
  EXPECT_EQ(Step(51000, 70.0).thermal_band, Band("warm"));
}

TEST_F(GovernorTest, DwellHoldsTheBand) {
  Step(0, 60.0);
  Step(3000, 71.0);                                        // warm at 3 s, dwell 5 s
  EXPECT_EQ(Step(4000, 60.0).thermal_band, Band("warm"));  // held
  EXPECT_NE(Reason().find("held by dwell"), std::string::npos) << Reason();
  EXPECT_NE(Reason().find("1000/5000 ms"), std::string::npos) << Reason();
  EXPECT_EQ(Step(4000, 90.0).thermal_band, Band("warm"));    // up is held too...
  EXPECT_EQ(Step(8000, 60.0).thermal_band, Band("normal"));  // ...until the dwell is over
}

TEST_F(GovernorTest, LastBandSkipsDwellAndCoolingIsOneBandAtATime) {
  Step(0, 60.0);
  Step(3000, 71.0);  // warm
  const Decision& d = Step(3100, 97.0);
  EXPECT_EQ(d.thermal_band, Band("critical"));
  EXPECT_NE(Reason().find("last band skips dwell"), std::string::npos) << Reason();
  EXPECT_EQ(Step(5000, 40.0).thermal_band, Band("critical"));  // critical dwell 10 s
  EXPECT_EQ(Step(13100, 40.0).thermal_band, Band("hot"));
  EXPECT_EQ(Step(14000, 40.0).thermal_band, Band("hot"));  // hot dwell 5 s
  EXPECT_EQ(Step(18100, 40.0).thermal_band, Band("warm"));
  EXPECT_EQ(Step(23100, 40.0).thermal_band, Band("normal"));
}

TEST_F(GovernorTest, JumpsSeveralBandsUpAtOnce) {
  Step(0, 60.0);
  EXPECT_EQ(Step(3000, 90.0).thermal_band, Band("hot"));
}

// A sawtooth of +-4 C around the hot threshold with a 1 s period: the band may
// only change after the dwell of the band it leaves has passed.
TEST_F(GovernorTest, SawtoothDoesNotSwitchFasterThanDwell) {
  std::vector<int64_t> changes;
  int prev_band = -1;
  int64_t last_change = 0;
  for (int64_t t = 0; t <= 120000; t += 50) {
    const double phase = static_cast<double>(t % 1000) / 1000.0;
    const double c = 81.0 + 8.0 * (phase < 0.5 ? 2 * phase : 2 * (1 - phase));  // 81..89
    const Decision& d = Step(t, c);
    if (prev_band >= 0 && d.thermal_band != prev_band) {
      const int64_t dwell = policy_.thermal_bands[prev_band].min_dwell_ms;
      EXPECT_GE(t - last_change, dwell) << "switch at " << t << " ms from band " << prev_band;
      changes.push_back(t);
      last_change = t;
    } else if (prev_band < 0) {
      last_change = t;
    }
    prev_band = d.thermal_band;
  }
  EXPECT_GE(changes.size(), 4u);   // it does follow the temperature...
  EXPECT_LE(changes.size(), 25u);  // ...but at most once per 5 s dwell
}

TEST_F(GovernorTest, SawtoothInsideHysteresisGapNeverSwitchesBack) {
  int switches = 0;
  int prev = -1;
  for (int64_t t = 0; t <= 60000; t += 100) {
    const double c = 84.5 + 2.0 * std::sin(static_cast<double>(t) / 300.0);  // 82.5..86.5
    const int band = Step(t, c).thermal_band;
    if (prev >= 0 && band != prev) ++switches;
    prev = band;
  }
  EXPECT_LE(switches, 1);  // warm -> hot once, then 82.5 never goes below the 82.0 exit
  EXPECT_EQ(prev, Band("hot"));
}

TEST_F(GovernorTest, SensorFaultRunsConservativeModeAndSaysSo) {
  Step(0, 60.0);
  in_.reading.state = thermal::SensorState::kStale;
  const Decision& d = Step(1000, 60.0);
  EXPECT_TRUE(d.conservative);
  EXPECT_EQ(d.knobs, policy_.conservative[Rank(Urgency::kNormal)]);
  EXPECT_NE(Reason().find("CONSERVATIVE: sensor stale"), std::string::npos) << Reason();
  for (auto s : {thermal::SensorState::kNoSensor, thermal::SensorState::kVanished,
                 thermal::SensorState::kInvalid}) {
    in_.reading.state = s;
    EXPECT_TRUE(Step(2000, 200.0).conservative);
    EXPECT_EQ(state_.thermal_band, Band("normal"));  // the bogus 200 C is not believed
  }
  in_.reading.state = thermal::SensorState::kOk;
  const Decision& ok = Step(3000, 60.0);
  EXPECT_FALSE(ok.conservative);
  EXPECT_EQ(ok.knobs, policy_.KnobsFor(Urgency::kNormal, 0));
  EXPECT_NE(Reason().find("sensor ok again"), std::string::npos) << Reason();
}

TEST_F(GovernorTest, NoSensorFromStartAndNaN) {
  in_.reading.state = thermal::SensorState::kNoSensor;
  EXPECT_TRUE(Step(0, 0.0).conservative);
  EXPECT_FALSE(state_.initialized);
  in_.reading.state = thermal::SensorState::kOk;
  EXPECT_TRUE(Step(100, std::nan("")).conservative);  // OK state but NaN: not believed
  EXPECT_FALSE(Step(200, 50.0).conservative);
  EXPECT_TRUE(state_.initialized);
}

TEST_F(GovernorTest, MemoryLadderStepsAndReverses) {
  const Knobs base = StepMem(0, 2000).knobs;
  EXPECT_EQ(out_.decision.memory_band, -1);
  EXPECT_EQ(out_.decision.memory, MemoryActions{});

  const Decision& low = StepMem(1000, 450);
  EXPECT_EQ(low.memory_band, 0);
  EXPECT_TRUE(low.memory.greedy_only);
  EXPECT_EQ(low.knobs.kv_precision, KvPrecision::kInt8);
  EXPECT_NE(Reason().find("memory low (450 MB < 500 enter)"), std::string::npos) << Reason();

  const Decision& tight = StepMem(2000, 150);
  EXPECT_EQ(tight.memory_band, 1);
  EXPECT_TRUE(tight.memory.greedy_only);  // cumulative
  EXPECT_EQ(tight.memory.context_cap, 512u);
  EXPECT_EQ(tight.memory.output_cap, 256u);
  EXPECT_FALSE(tight.memory.use_fallback_model);

  EXPECT_TRUE(StepMem(3000, 90).memory.use_fallback_model);
  EXPECT_EQ(state_.memory_band, 2);

  // Relief: hysteresis (120 MB is not > 150 exit), then dwell, then one step at a time.
  EXPECT_EQ(StepMem(30000, 120).memory_band, 2);
  EXPECT_EQ(StepMem(31000, 2000).memory_band, 1);
  EXPECT_EQ(StepMem(32000, 2000).memory_band, 1);  // tight dwell 10 s
  EXPECT_NE(Reason().find("held by dwell"), std::string::npos) << Reason();
  EXPECT_EQ(StepMem(41000, 2000).memory_band, 0);
  const Decision& back = StepMem(51000, 2000);
  EXPECT_EQ(back.memory_band, -1);
  EXPECT_EQ(back.memory, MemoryActions{});
  EXPECT_EQ(back.knobs, base);
}

TEST_F(GovernorTest, MemoryDeepJumpAndHysteresis) {
  StepMem(0, 2000);
  EXPECT_EQ(StepMem(100, 50).memory_band, 2);  // straight to the bottom
  state_ = {};
  StepMem(0, 450);
  EXPECT_EQ(StepMem(60000, 550).memory_band, 0);  // 550 is not > 600
  EXPECT_EQ(StepMem(61000, 601).memory_band, -1);
}

TEST_F(GovernorTest, MemoryPsiAndUnknown) {
  in_.psi_some_avg10 = 25.0;
  EXPECT_EQ(StepMem(0, 2000).memory_band, 0);
  EXPECT_NE(Reason().find("PSI 25.0 % >= 20.0"), std::string::npos) << Reason();
  in_.psi_some_avg10 = 15.0;
  EXPECT_EQ(StepMem(20000, 2000).memory_band, 0);  // not below psi_exit 10
  in_.mem_available_bytes.reset();
  EXPECT_EQ(Step(40000, 50.0).memory_band, 0);  // unknown: kept
  in_.psi_some_avg10 = 5.0;
  EXPECT_EQ(StepMem(41000, 2000).memory_band, -1);
}

TEST_F(GovernorTest, CriticalVersusNormalKnobs) {
  for (double c : {50.0, 75.0, 90.0}) {
    state_ = {};
    in_.active = Urgency::kCritical;
    const Knobs crit = Step(0, c).knobs;
    EXPECT_EQ(crit.core_class, CoreClass::kPerformance) << c;
    // W8A16 while cool; W4A8 from the warm band (faster and cooler: the answer in time
    // first, docs/policy.md).
    EXPECT_EQ(crit.precision, c < 70.0 ? WeightPrecision::kW8A16 : WeightPrecision::kW4A8) << c;
    in_.active = Urgency::kNormal;
    const Knobs chat = Step(0, c).knobs;
    EXPECT_EQ(chat.core_class, CoreClass::kEfficiency) << c;
    EXPECT_EQ(chat.precision, WeightPrecision::kW4A8) << c;
    EXPECT_GT(chat.pause_ms, crit.pause_ms) << c;
  }
  state_ = {};
  in_.active = Urgency::kCritical;
  const Decision& hot = Step(0, 86.2);
  EXPECT_NE(Reason().find("CRITICAL -> perf cores x2, W4A8, chunk 32/4"), std::string::npos)
      << Reason();
  EXPECT_EQ(hot.knobs.layer_drop, 0u);
  state_ = {};
  const Decision& crit = Step(0, 97.0);  // critical heat: W4A8 and layer drop even for CRITICAL
  EXPECT_EQ(crit.knobs.precision, WeightPrecision::kW4A8);
  EXPECT_GT(crit.knobs.layer_drop, 0u);
}

TEST_F(GovernorTest, ClassSelectionWhenIdle) {
  in_.active.reset();
  const Decision& idle = Step(0, 50.0);
  EXPECT_TRUE(idle.idle);
  EXPECT_EQ(idle.urgency, Urgency::kNormal);
  in_.queue_depths = {1, 0, 3, 0};
  const Decision& next = Step(100, 50.0);
  EXPECT_FALSE(next.idle);
  EXPECT_EQ(next.urgency, Urgency::kCritical);
  EXPECT_NE(Reason().find("waiting C1 H0 N3 B0"), std::string::npos) << Reason();
}

TEST_F(GovernorTest, PureSameInputsSameOutputs) {
  Step(0, 60.0);
  const GovernorState before = state_;
  in_.now_ns = 4000 * kMs;
  in_.reading.celsius = 72.0;
  const GovernorOutput a = Decide(policy_, before, in_);
  const GovernorOutput b = Decide(policy_, before, in_);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.decision.knobs, b.decision.knobs);
  EXPECT_EQ(a.decision.Reason(), b.decision.Reason());
}

TEST_F(GovernorTest, HandMadeEmptyPolicyIsSafe) {
  Policy empty;
  const GovernorOutput out = Decide(empty, state_, in_);
  EXPECT_TRUE(out.decision.conservative);
}

}  // namespace
}  // namespace ari::qos
