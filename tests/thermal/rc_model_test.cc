// RC thermal model against its analytic solutions.
#include "thermal/rc_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ari::thermal {
namespace {

constexpr double kTolC = 1e-6;  // exact integration: only rounding error

RcModel Make(const RcParams& p) {
  auto m = RcModel::Create(p);
  EXPECT_TRUE(m.has_value()) << m.error().ToString();
  return *m;
}

RcLoad FullLoad(int cores, PowerPrecision prec = PowerPrecision::kW8A16) {
  return RcLoad{1.0, cores, prec, CoreClass::kPerformance};
}

TEST(RcModelTest, PowerFormula) {
  RcModel m = Make(RcParams{});
  EXPECT_DOUBLE_EQ(m.PowerW(RcLoad{}), 1.5);
  EXPECT_DOUBLE_EQ(m.PowerW(FullLoad(4)), 1.5 + 4 * 3.0);
  EXPECT_DOUBLE_EQ(m.PowerW(RcLoad{0.5, 2, PowerPrecision::kW4A8, CoreClass::kPerformance}),
                   1.5 + 0.5 * 2 * 2.0);
  EXPECT_DOUBLE_EQ(m.PowerW(RcLoad{1.0, 2, PowerPrecision::kW8A16, CoreClass::kEfficiency}),
                   1.5 + 2 * 3.0 * 0.4);
  EXPECT_DOUBLE_EQ(m.PowerW(RcLoad{7.0, 1, PowerPrecision::kW8A16, CoreClass::kPerformance}),
                   1.5 + 3.0);  // busy clamped to 1
  EXPECT_DOUBLE_EQ(m.PowerW(RcLoad{NAN, -3, PowerPrecision::kW8A16, CoreClass::kPerformance}), 1.5);
}

TEST(RcModelTest, OneNodeSteadyStateAndTimeConstant) {
  RcParams p;
  p.nodes = 1;
  p.r_die_pkg_k_per_w = 0.5;
  p.r_pkg_amb_k_per_w = 1.5;  // R = 2 K/W
  p.c_die_j_per_k = 4.0;
  p.c_pkg_j_per_k = 6.0;  // C = 10 J/K -> tau = 20 s
  p.idle_power_w = 0.0;
  p.w8a16_power_per_core_w = 5.0;
  RcModel m = Make(p);
  const RcLoad load = FullLoad(2);  // 10 W
  const double steady = 25.0 + 10.0 * 2.0;
  EXPECT_DOUBLE_EQ(m.SteadyStateDie(load), steady);
  EXPECT_DOUBLE_EQ(m.slow_time_constant_s(), 20.0);
  ASSERT_TRUE(m.Step(20.0, load).has_value());
  // At t = tau the rise is 1 - 1/e ~ 63.2 % of the way.
  const double frac = (m.die_celsius() - 25.0) / (steady - 25.0);
  EXPECT_NEAR(frac, 1.0 - std::exp(-1.0), 1e-12);
  ASSERT_TRUE(m.Step(2000.0, load).has_value());
  EXPECT_NEAR(m.die_celsius(), steady, kTolC);
  EXPECT_DOUBLE_EQ(m.package_celsius(), m.die_celsius());
  EXPECT_DOUBLE_EQ(m.time_s(), 2020.0);
}

TEST(RcModelTest, StepSizeDoesNotMatter) {
  for (int nodes : {1, 2}) {
    RcParams p;
    p.nodes = nodes;
    RcModel coarse = Make(p);
    RcModel fine = Make(p);
    const RcLoad load = FullLoad(4);
    ASSERT_TRUE(coarse.Step(37.0, load).has_value());
    for (int i = 0; i < 3700; ++i) ASSERT_TRUE(fine.Step(0.01, load).has_value());
    EXPECT_NEAR(coarse.die_celsius(), fine.die_celsius(), 1e-8) << nodes;
    EXPECT_NEAR(coarse.package_celsius(), fine.package_celsius(), 1e-8) << nodes;
  }
}

// Forward Euler with a tiny step as an independent oracle for the 2-node solution.
TEST(RcModelTest, TwoNodeMatchesFineEuler) {
  RcParams p;  // defaults: R_dp 1, R_pa 4, C_d 5, C_p 60
  RcModel m = Make(p);
  const RcLoad load = FullLoad(3);
  const double power = m.PowerW(load);
  double td = p.initial_celsius, tp = p.initial_celsius;
  const double h = 1e-4;
  for (int i = 0; i < 300000; ++i) {  // 30 s
    const double q_dp = (td - tp) / p.r_die_pkg_k_per_w;
    const double q_pa = (tp - p.ambient_celsius) / p.r_pkg_amb_k_per_w;
    td += h * (power - q_dp) / p.c_die_j_per_k;
    tp += h * (q_dp - q_pa) / p.c_pkg_j_per_k;
  }
  ASSERT_TRUE(m.Step(30.0, load).has_value());
  EXPECT_NEAR(m.die_celsius(), td, 2e-3);
  EXPECT_NEAR(m.package_celsius(), tp, 2e-3);
}

TEST(RcModelTest, TwoNodeBehaviour) {
  RcParams p;
  RcModel m = Make(p);
  const RcLoad load = FullLoad(4);  // 13.5 W
  const double power = m.PowerW(load);
  // Die heats fast, package slowly: after a few die time constants the die sits
  // about P * R_dp above the package.
  ASSERT_TRUE(m.Step(25.0, load).has_value());
  EXPECT_GT(m.die_celsius(), m.package_celsius());
  EXPECT_NEAR(m.die_celsius() - m.package_celsius(), power * p.r_die_pkg_k_per_w, 1.5);
  EXPECT_LT(m.package_celsius() - 25.0, 0.5 * power * p.r_pkg_amb_k_per_w);
  EXPECT_LT(m.fast_time_constant_s(), 10.0);
  EXPECT_GT(m.slow_time_constant_s(), 100.0);
  // Steady state: T_p = Ta + P R_pa, T_d = T_p + P R_dp.
  ASSERT_TRUE(m.Step(1e5, load).has_value());
  EXPECT_NEAR(m.package_celsius(), 25.0 + power * 4.0, kTolC);
  EXPECT_NEAR(m.die_celsius(), 25.0 + power * 5.0, kTolC);
  EXPECT_NEAR(m.SteadyStateDie(load), 25.0 + power * 5.0, 1e-12);
  // Load off: the die cools quickly toward the (still warm) package.
  const double pkg_before = m.package_celsius();
  ASSERT_TRUE(m.Step(25.0, RcLoad{}).has_value());
  EXPECT_LT(m.die_celsius() - m.package_celsius(), 1.5 * 1.0 + 1.0);
  EXPECT_GT(m.package_celsius(), 25.0 + 0.5 * (pkg_before - 25.0));
}

TEST(RcModelTest, MonotonicHeatingUnderLoad) {
  for (int nodes : {1, 2}) {
    RcParams p;
    p.nodes = nodes;
    RcModel m = Make(p);
    double prev = m.die_celsius();
    for (int i = 0; i < 2000; ++i) {
      ASSERT_TRUE(m.Step(0.5, FullLoad(4)).has_value());
      EXPECT_GE(m.die_celsius(), prev) << "nodes " << nodes << " step " << i;
      EXPECT_LE(m.die_celsius(), m.SteadyStateDie(FullLoad(4)) + kTolC);
      prev = m.die_celsius();
    }
  }
}

TEST(RcModelTest, AmbientChange) {
  RcParams p;
  p.nodes = 1;
  RcModel m = Make(p);
  const RcLoad idle{};
  ASSERT_TRUE(m.Step(1e5, idle).has_value());
  EXPECT_NEAR(m.die_celsius(), 25.0 + 1.5 * 5.0, kTolC);
  ASSERT_TRUE(m.SetAmbient(45.0).has_value());
  const double tau = m.slow_time_constant_s();
  ASSERT_TRUE(m.Step(tau, idle).has_value());
  EXPECT_NEAR(m.die_celsius(), 32.5 + 20.0 * (1.0 - std::exp(-1.0)), 1e-9);
  ASSERT_TRUE(m.Step(1e5, idle).has_value());
  EXPECT_NEAR(m.die_celsius(), 45.0 + 7.5, kTolC);
  EXPECT_FALSE(m.SetAmbient(NAN).has_value());
}

TEST(RcModelTest, RejectsBadInput) {
  RcParams p;
  p.nodes = 3;
  EXPECT_FALSE(RcModel::Create(p).has_value());
  p = RcParams{};
  p.c_die_j_per_k = 0;
  EXPECT_FALSE(RcModel::Create(p).has_value());
  p = RcParams{};
  p.r_pkg_amb_k_per_w = -1;
  EXPECT_FALSE(RcModel::Create(p).has_value());
  p = RcParams{};
  p.w4a8_power_per_core_w = NAN;
  EXPECT_FALSE(RcModel::Create(p).has_value());
  p = RcParams{};
  p.efficiency_core_power_scale = 1.5;
  EXPECT_FALSE(RcModel::Create(p).has_value());
  RcModel m = Make(RcParams{});
  const double before = m.die_celsius();
  auto r = m.Step(-1.0, FullLoad(1));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_FALSE(m.Step(INFINITY, FullLoad(1)).has_value());
  EXPECT_EQ(m.die_celsius(), before);
  EXPECT_TRUE(m.Step(0.0, FullLoad(1)).has_value());
}

TEST(RcModelSourceTest, FollowsClockAndLoad) {
  ManualClock clock(5 * kNsPerSecond);
  RcParams p;
  p.nodes = 1;
  auto model = RcModel::Create(p);
  ASSERT_TRUE(model.has_value());
  RcModelSource src(*model, clock);
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kOk);
  EXPECT_DOUBLE_EQ(r.celsius, 25.0);
  EXPECT_EQ(r.source, "rc-model");
  src.SetLoad(FullLoad(4));
  clock.AdvanceSeconds(30.0);
  src.SetLoad(RcLoad{});  // 30 s under full load, then idle
  // Same as a model stepped by hand.
  RcModel ref = *model;
  ASSERT_TRUE(ref.Step(30.0, FullLoad(4)).has_value());
  clock.AdvanceSeconds(10.0);
  ASSERT_TRUE(ref.Step(10.0, RcLoad{}).has_value());
  r = src.Read();
  EXPECT_NEAR(r.celsius, ref.die_celsius(), 1e-9);
  EXPECT_EQ(r.time_ns, clock.NowNs());
  EXPECT_NEAR(src.model().time_s(), 40.0, 1e-9);
  ASSERT_TRUE(src.SetAmbient(30.0).has_value());
  EXPECT_DOUBLE_EQ(src.model().ambient_celsius(), 30.0);
}

TEST(RcModelSourceTest, OverheatReadsInvalid) {
  ManualClock clock;
  RcParams p;
  p.nodes = 1;
  p.initial_celsius = 149.0;
  p.ambient_celsius = 149.0;
  p.w8a16_power_per_core_w = 20.0;
  auto model = RcModel::Create(p);
  ASSERT_TRUE(model.has_value());
  RcModelSource src(*model, clock);
  EXPECT_EQ(src.Read().state, SensorState::kOk);
  src.SetLoad(FullLoad(4));
  clock.AdvanceSeconds(1000.0);
  Reading r = src.Read();
  EXPECT_EQ(r.state, SensorState::kInvalid);  // > 150 C is not believed
  EXPECT_GT(src.model().die_celsius(), 150.0);
  EXPECT_DOUBLE_EQ(r.celsius, 149.0);
}

}  // namespace
}  // namespace ari::thermal
