// Hardware profiles: the shipped ones load and convert; impossible values are refused
// with line-numbered errors; the SoC's protection throttles in model-mode replay.
#include "sim/hardware_profile.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/scenarios.h"
#include "tests/common/test_util.h"

namespace ari::sim {
namespace {

constexpr std::string_view kValid = R"(name: "t"
performance { core: "A76" count: 4 nominal_mhz: 2400 }
efficiency { core: "A55" count: 4 nominal_mhz: 1800 }
efficiency_speed: 0.4
thread_scaling: 0.8
memory_mb: 4096
cost { model: "1.5b" precision: "W4A8" decode_tps: 8 prefill_tps: 40 layers: 28 }
cost { model: "1.5b" precision: "W8A16" decode_tps: 4 prefill_tps: 35 layers: 28 }
thermal {
  nodes: 2
  r_die_pkg_k_per_w: 1 r_pkg_amb_k_per_w: 4 c_die_j_per_k: 5 c_pkg_j_per_k: 60
  idle_power_w: 1.5 w8a16_power_per_core_w: 2.6 w4a8_power_per_core_w: 2.3
  efficiency_core_power_scale: 0.25
}
protection {
  passive { celsius: 85 hysteresis_c: 5 clock_fraction: 0.6 }
  critical { celsius: 95 hysteresis_c: 5 clock_fraction: 0.4 }
  power_exponent: 2
}
)";

std::string Replace(std::string_view text, std::string_view from, std::string_view to) {
  std::string s(text);
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(HardwareProfile, ShippedProfilesLoadAndConvert) {
  for (const char* name : {"dev-vm", "a76-4gb", "rpi5", "a78ae-auto"}) {
    auto hp = FindHardwareProfile(name);
    ASSERT_TRUE(hp.has_value()) << name << ": " << hp.error().message;
    EXPECT_EQ(hp->name(), name);
    EXPECT_GE(hp->proto.source_size(), 1) << name << ": every profile names its sources";
    auto rc = thermal::RcModel::Create(ProfileRcParams(*hp));
    EXPECT_TRUE(rc.has_value()) << name;
    if (hp->proto.builtin_cost()) continue;
    for (const char* model : {"0.5b", "1.5b", "3b"}) {
      auto cost = ProfileCostModel(*hp, model);
      ASSERT_TRUE(cost.has_value()) << name << " " << model << ": " << cost.error().message;
      EXPECT_EQ(cost->entries.size(), 2u);
      EXPECT_GT(cost->nominal_khz_performance, 0);
    }
    // Bigger models are slower; W4A8 decodes faster than W8A16 (half the weight bytes).
    auto small = ProfileCostModel(*hp, "0.5b"), big = ProfileCostModel(*hp, "3b");
    runtime::ChunkKnobs k;
    k.threads = hp->proto.performance().count();
    k.precision = runtime::Precision::kW4A8;
    const double s4 = small->ChunkSeconds(k, runtime::ChunkPhase::kDecode, 8, false);
    const double b4 = big->ChunkSeconds(k, runtime::ChunkPhase::kDecode, 8, false);
    k.precision = runtime::Precision::kW8A16;
    const double b8 = big->ChunkSeconds(k, runtime::ChunkPhase::kDecode, 8, false);
    EXPECT_LT(s4, b4) << name;
    EXPECT_LT(b4, b8) << name;
    EXPECT_GT(big->mask_us_per_token, 0.0) << name << ": constrained decoding has a cost";
  }
  EXPECT_FALSE(ProfileCostModel(*FindHardwareProfile("a76-4gb"), "7b").has_value());
  EXPECT_FALSE(FindHardwareProfile("no-such-board").has_value());
}

TEST(HardwareProfile, ValidProfileParses) {
  auto hp = ParseHardwareProfileText(kValid, "t.textproto");
  ASSERT_TRUE(hp.has_value()) << hp.error().message;
  ReplayOptions o;
  ApplyHardwareProfile(*hp, o);
  EXPECT_EQ(o.performance_cpus, 4);
  EXPECT_EQ(o.efficiency_cpus, 4);
  EXPECT_TRUE(o.protection.enabled);
  EXPECT_DOUBLE_EQ(o.protection.passive_c, 85);
  EXPECT_DOUBLE_EQ(o.protection.critical_fraction, 0.4);
  EXPECT_EQ(o.hardware_name, "t");
}

struct BadCase {
  std::string_view from, to, expect;  // expect: "line: field" in the message
};

TEST(HardwareProfile, ImpossibleValuesAreRefusedWithTheirLine) {
  const BadCase cases[] = {
      {"c_pkg_j_per_k: 60", "c_pkg_j_per_k: -60", "t.textproto:11: thermal.c_pkg_j_per_k"},
      {"memory_mb: 4096", "memory_mb: -1", "t.textproto:6: memory_mb"},
      {"core: \"A76\" count: 4", "core: \"A76\" count: 0", "t.textproto:2: performance.count"},
      {"passive { celsius: 85", "passive { celsius: 30",
       "t.textproto:16: protection.passive.celsius"},
      {"critical { celsius: 95", "critical { celsius: 80",
       "t.textproto:17: protection.critical.celsius: must be above"},
      {"decode_tps: 4 ", "decode_tps: 0 ", "t.textproto:8: cost[1].decode_tps"},
      {"decode_tps: 4 ", "mask_us_per_token: -5 decode_tps: 4 ",
       "t.textproto:8: cost[1].mask_us_per_token"},
      {"clock_fraction: 0.4", "clock_fraction: 1.5", "t.textproto:17: protection.critical.clock"},
  };
  for (const BadCase& c : cases) {
    auto hp = ParseHardwareProfileText(Replace(kValid, c.from, c.to), "t.textproto");
    ASSERT_FALSE(hp.has_value()) << c.to;
    EXPECT_NE(hp.error().message.find(c.expect), std::string::npos)
        << c.to << " -> " << hp.error().message;
  }
  // A model with one precision only; a syntax error names line and column.
  auto one = ParseHardwareProfileText(Replace(kValid, "cost { model: \"1.5b\" precision: \"W8A16\"",
                                              "cost { model: \"3b\" precision: \"W8A16\""),
                                      "t.textproto");
  ASSERT_FALSE(one.has_value());
  EXPECT_NE(one.error().message.find("no W8A16"), std::string::npos) << one.error().message;
  auto syntax = ParseHardwareProfileText(Replace(kValid, "memory_mb: 4096", "memory_mb: {"), "t");
  ASSERT_FALSE(syntax.has_value());
  EXPECT_NE(syntax.error().message.find("t:6:"), std::string::npos) << syntax.error().message;
}

// The same load with and without the SoC's protection: the protected SoC throttles
// (time at a trip > 0), runs cooler and slower.
TEST(HardwareProfile, ProtectionThrottlesInReplay) {
  ScenarioOptions so;
  so.scenario = "traffic-jam-heat";
  so.duration_ms = uint64_t{20} * 60 * 1000;
  auto log = GenerateScenario(so);
  ASSERT_TRUE(log.has_value());
  auto policy = qos::LoadPolicyFile(ari::testing::SourceDir() / "config" /
                                    "policy_static_performance.textproto");
  ASSERT_TRUE(policy.has_value()) << policy.error().ToString();
  auto hp = FindHardwareProfile("a76-4gb");
  ASSERT_TRUE(hp.has_value());
  auto cost = ProfileCostModel(*hp, "1.5b");
  ASSERT_TRUE(cost.has_value());
  ReplayOptions o;
  ApplyHardwareProfile(*hp, o);
  o.policy = &*policy;
  o.cost = &*cost;
  auto on = ReplayModel(*log, o);
  o.protection.enabled = false;
  auto off = ReplayModel(*log, o);
  ASSERT_TRUE(on.has_value() && off.has_value());
  EXPECT_GT(on->summary.hw_throttle_s, 0);
  EXPECT_GT(on->summary.hw_throttle_events, 0);
  EXPECT_EQ(off->summary.hw_throttle_s, 0);
  EXPECT_GT(off->summary.peak_die_c, hp->proto.protection().passive().celsius());
  EXPECT_LT(on->summary.peak_die_c, off->summary.peak_die_c);
  EXPECT_GT(on->summary.capped_busy_s[0], 0);  // chunks ran slower under the trip
  EXPECT_EQ(on->hardware, "a76-4gb");
}

}  // namespace
}  // namespace ari::sim
