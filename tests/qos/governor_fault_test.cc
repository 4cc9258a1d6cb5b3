// Monotone degradation (docs/policy.md): a temperature-sensor fault never leaves the
// node less throttled than the hottest band seen within policy.fault_window_ms, for
// every band of every shipped policy; the window expires; MoreThrottled per knob.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "qos/governor.h"
#include "tests/common/test_util.h"

namespace ari::qos {
namespace {

constexpr int64_t kMs = 1000000;

// Independent of MoreThrottled: is `k` at least as throttled as `ref`, knob by knob?
void ExpectAtLeastAsThrottled(const Knobs& k, const Knobs& ref, const std::string& what) {
  auto core = [](CoreClass c) {
    return c == CoreClass::kAny ? 0 : c == CoreClass::kPerformance ? 1 : 2;
  };
  EXPECT_GE(core(k.core_class), core(ref.core_class)) << what;
  EXPECT_LE(k.threads, ref.threads) << what;
  if (ref.precision == WeightPrecision::kW4A8) {
    EXPECT_EQ(k.precision, WeightPrecision::kW4A8) << what;
  }
  EXPECT_LE(k.prefill_chunk, ref.prefill_chunk) << what;
  EXPECT_LE(k.decode_tokens_per_chunk, ref.decode_tokens_per_chunk) << what;
  EXPECT_GE(k.pause_ms, ref.pause_ms) << what;
  if (ref.isa != IsaTier::kBest) {
    EXPECT_TRUE(k.isa == ref.isa || k.isa == IsaTier::kScalar ||
                (ref.isa == IsaTier::kAvx512 && k.isa == IsaTier::kAvx2) ||
                (ref.isa == IsaTier::kNeonDotprod && k.isa == IsaTier::kNeon))
        << what << ": isa " << IsaTierName(k.isa) << " vs " << IsaTierName(ref.isa);
  }
  EXPECT_GE(k.layer_drop, ref.layer_drop) << what;
  if (ref.kv_precision == KvPrecision::kInt8) {
    EXPECT_EQ(k.kv_precision, KvPrecision::kInt8) << what;
  }
}

class FaultTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto p = LoadPolicyFile(ari::testing::SourceDir() / "config" / GetParam());
    ASSERT_TRUE(p.has_value()) << p.error().ToString();
    policy_ = std::move(*p);
    in_.reading.source = "test";
  }
  int Bands() const { return static_cast<int>(policy_.thermal_bands.size()); }
  // A temperature inside band b (above its enter, below the next band's enter).
  double Inside(int b) const {
    const auto& t = policy_.thermal_bands;
    const double lo = b == 0 ? (t.size() > 1 ? t[1].enter_c - 20.0 : 40.0) : t[b].enter_c;
    return b + 1 < Bands() ? (lo + t[b + 1].enter_c) / 2.0 : lo + 1.0;
  }
  const Decision& Step(int64_t t_ms, double c, bool ok = true, Urgency u = Urgency::kNormal) {
    in_.reading.state = ok ? thermal::SensorState::kOk : thermal::SensorState::kVanished;
    in_.now_ns = t_ms * kMs;
    in_.reading.celsius = c;
    in_.reading.time_ns = in_.now_ns;
    in_.active = u;
    out_ = Decide(policy_, state_, in_);
    state_ = out_.state;
    return out_.decision;
  }
  // From band 0 up to band b through every band, each held its min dwell. Returns the time.
  int64_t ClimbTo(int b) {
    int64_t t = 0;
    EXPECT_EQ(Step(t, Inside(0)).thermal_band, 0);
    for (int k = 1; k <= b; ++k) {
      t += policy_.thermal_bands[k - 1].min_dwell_ms + 1;
      EXPECT_EQ(Step(t, Inside(k)).thermal_band, k) << "climbing at " << t << " ms";
    }
    return t;
  }
  // Every class's knobs in a fault decision at t_ms bound by band `floor`.
  void ExpectFaultFloor(int64_t t_ms, int floor, const std::string& where) {
    for (Urgency u : kAllUrgencies) {
      const Decision& d = Step(t_ms, 0.0, /*ok=*/false, u);
      const std::string what = GetParam() + " " + where + " " + std::string(UrgencyName(u));
      ASSERT_TRUE(d.conservative) << what;
      EXPECT_EQ(d.fault_floor_band, floor) << what << ": " << d.Reason();
      ExpectAtLeastAsThrottled(d.knobs, policy_.KnobsFor(u, static_cast<size_t>(floor)), what);
      ExpectAtLeastAsThrottled(d.knobs, policy_.conservative[Rank(u)], what + " (conservative)");
    }
  }

  Policy policy_;
  GovernorState state_;
  GovernorInputs in_;
  GovernorOutput out_;
};

TEST_P(FaultTest, FaultInEveryBandKeepsThatBandsThrottle) {
  for (int b = 0; b < Bands(); ++b) {
    state_ = {};
    const int64_t t = ClimbTo(b);
    const std::string where = "fault in band " + policy_.thermal_bands[b].name;
    ExpectFaultFloor(t + 100, b, where);
    // The floor is latched for the whole fault, however long it lasts.
    ExpectFaultFloor(t + 10 * policy_.fault_window_ms + 100, b, where + " (long fault)");
    // Recovery: normal band logic again, no floor.
    const Decision& ok = Step(t + 10 * policy_.fault_window_ms + 200, Inside(b));
    EXPECT_FALSE(ok.conservative);
    EXPECT_EQ(ok.fault_floor_band, -1);
    EXPECT_EQ(ok.knobs, policy_.KnobsFor(Urgency::kNormal, static_cast<size_t>(ok.thermal_band)));
  }
}

TEST_P(FaultTest, FaultAfterCoolingDownKeepsTheHottestBandOfTheWindow) {
  for (int b = 1; b < Bands(); ++b) {
    state_ = {};
    int64_t t = ClimbTo(b);
    const int64_t left_hot = t;
    for (int k = b; k >= 1; --k) {  // back down to band 0, one band per dwell
      t += policy_.thermal_bands[k].min_dwell_ms + 1;
      EXPECT_EQ(Step(t, Inside(0)).thermal_band, k - 1);
    }
    if (t - left_hot > policy_.fault_window_ms) continue;  // descent outlasts the window
    ExpectFaultFloor(t + 1, b, "fault in band 0 after " + policy_.thermal_bands[b].name);
  }
}

TEST_P(FaultTest, WindowExpires) {
  const int hottest = Bands() - 1;
  int64_t t = ClimbTo(hottest);
  for (int k = hottest; k >= 1; --k) {
    t += policy_.thermal_bands[k].min_dwell_ms + 1;
    Step(t, Inside(0));
  }
  ASSERT_EQ(state_.thermal_band, 0);
  // Hottest band last seen at the last decision in it; the window runs from there.
  const int64_t last_hot = t - (policy_.thermal_bands[1].min_dwell_ms + 1);
  int64_t when = last_hot + policy_.fault_window_ms;
  for (int64_t s = t + 1000; s < when; s += 1000) Step(s, Inside(0));  // cool, band 0
  const GovernorState cool = state_;
  for (Urgency u : kAllUrgencies) {
    state_ = cool;
    const Decision& d = Step(when + 1, 0.0, /*ok=*/false, u);
    EXPECT_EQ(d.fault_floor_band, 0) << UrgencyName(u) << ": " << d.Reason();
    EXPECT_EQ(d.knobs, MoreThrottled(policy_.conservative[Rank(u)], policy_.KnobsFor(u, 0)));
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, FaultTest,
                         ::testing::Values("policy_default.textproto",
                                           "policy_a76_4gb_tuned.textproto",
                                           "policy_static_eco.textproto",
                                           "policy_static_performance.textproto"),
                         [](const auto& info) {
                           std::string s = info.param.substr(7, info.param.find('.') - 7);
                           return s;
                         });

class DefaultFaultTest : public FaultTest {};

// The example: the sensor dies at 96 C in the default policy. CRITICAL keeps
// the critical band's W4A8, 1 thread, drop 2 instead of the conservative W8A16 x2.
TEST_P(DefaultFaultTest, SensorDiesAt96C) {
  Step(0, 60.0, true, Urgency::kCritical);
  ASSERT_EQ(Step(1000, 96.0, true, Urgency::kCritical).thermal_band, 3);  // last band: at once
  const Decision& d = Step(1500, 0.0, /*ok=*/false, Urgency::kCritical);
  EXPECT_TRUE(d.conservative);
  EXPECT_EQ(d.knobs.precision, WeightPrecision::kW4A8);
  EXPECT_EQ(d.knobs.threads, 1u);
  EXPECT_EQ(d.knobs.layer_drop, 2u);
  EXPECT_EQ(d.knobs.core_class, CoreClass::kPerformance);
  EXPECT_NE(d.Reason().find("at least as throttled as band critical"), std::string::npos)
      << d.Reason();
}

// Held in warm by its dwell while the reading is already hot: the floor is hot.
TEST_P(DefaultFaultTest, ReadingAboveTheBandHeldByDwellCounts) {
  Step(0, 60.0);
  ASSERT_EQ(Step(3000, 72.0).thermal_band, 1);  // warm, dwell 5 s
  ASSERT_EQ(Step(4000, 90.0).thermal_band, 1);  // hot reading, held
  EXPECT_EQ(Step(4100, 0.0, false).fault_floor_band, 2);
}

TEST_P(DefaultFaultTest, ZeroWindowIsTheBandInForceOnly) {
  policy_.fault_window_ms = 0;
  int64_t t = ClimbTo(3);
  for (int k = 3; k >= 1; --k) Step(t += policy_.thermal_bands[k].min_dwell_ms + 1, 40.0);
  ASSERT_EQ(state_.thermal_band, 0);
  EXPECT_EQ(Step(t + 1, 0.0, false).fault_floor_band, 0);
}

TEST_P(DefaultFaultTest, NoGoodReadingYetMeansConservativeKnobsOnly) {
  for (Urgency u : kAllUrgencies) {
    state_ = {};
    const Decision& d = Step(0, 0.0, false, u);
    EXPECT_EQ(d.fault_floor_band, -1);
    EXPECT_EQ(d.knobs, policy_.conservative[Rank(u)]);
  }
}

INSTANTIATE_TEST_SUITE_P(Default, DefaultFaultTest, ::testing::Values("policy_default.textproto"));

TEST(MoreThrottled, EachKnobIndependently) {
  Knobs a{CoreClass::kPerformance, 2, WeightPrecision::kW8A16, 64, 2, 20,
          IsaTier::kAvx2,          0, KvPrecision::kInt8};
  Knobs b{CoreClass::kAny,  1, WeightPrecision::kW4A8, 16, 8, 5,
          IsaTier::kAvx512, 3, KvPrecision::kFp16};
  const Knobs want{CoreClass::kPerformance, 1, WeightPrecision::kW4A8, 16, 2, 20,
                   IsaTier::kAvx2,          3, KvPrecision::kInt8};
  EXPECT_EQ(MoreThrottled(a, b), want);
  EXPECT_EQ(MoreThrottled(b, a), want);
  EXPECT_EQ(MoreThrottled(a, a), a);
  b.core_class = CoreClass::kEfficiency;
  EXPECT_EQ(MoreThrottled(a, b).core_class, CoreClass::kEfficiency);
}

TEST(MoreThrottled, IsaCapsWithinAndAcrossFamilies) {
  auto isa = [](IsaTier x, IsaTier y) {
    Knobs a, b;
    a.isa = x;
    b.isa = y;
    return MoreThrottled(a, b).isa;
  };
  EXPECT_EQ(isa(IsaTier::kBest, IsaTier::kAvx512), IsaTier::kAvx512);
  EXPECT_EQ(isa(IsaTier::kAvx2, IsaTier::kAvx512), IsaTier::kAvx2);
  EXPECT_EQ(isa(IsaTier::kNeonDotprod, IsaTier::kNeon), IsaTier::kNeon);
  EXPECT_EQ(isa(IsaTier::kBest, IsaTier::kNeonDotprod), IsaTier::kNeonDotprod);
  EXPECT_EQ(isa(IsaTier::kAvx2, IsaTier::kNeon), IsaTier::kScalar);  // no common order
  EXPECT_EQ(isa(IsaTier::kNeonDotprod, IsaTier::kAvx512), IsaTier::kScalar);
  EXPECT_EQ(isa(IsaTier::kScalar, IsaTier::kBest), IsaTier::kScalar);
}

}  // namespace
}  // namespace ari::qos
