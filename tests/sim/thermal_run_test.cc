// Closed-loop thermal run (sim/thermal_run.h): the RC model heated by the chunks a
// (fake, deterministic) engine reports, read back by the real governor + scheduler.
// Checks structure only (bands vs thresholds, dwell between changes, knobs = the
// policy's cell), never wall-clock time.
#include "sim/thermal_run.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/common/test_util.h"
#include "tests/qos/sched_fixture.h"

namespace ari::sim {
namespace {

using qos::LoadPolicyFile;
using qos::Policy;
using qos::Rank;
using qos::ThermalBand;
using qos::testing::FakeEngine;

// FakeEngine with realistic chunk costs: 1 ms per prompt token, 15 ms per generated one.
class CostlyEngine final : public runtime::ChunkRunner {
 public:
  CostlyEngine() : inner_(2) {}
  int32_t num_slots() const override { return inner_.num_slots(); }
  runtime::Result<void> StartTurn(int32_t slot, const runtime::TurnSpec& t) override {
    return inner_.StartTurn(slot, t);
  }
  runtime::Result<runtime::ChunkResult> RunChunk(int32_t slot,
                                                 const runtime::ChunkKnobs& k) override {
    auto r = inner_.RunChunk(slot, k);
    if (r) {
      r->compute_ns = r->phase == runtime::ChunkPhase::kPrefill
                          ? int64_t{r->prompt_tokens} * 1'000'000
                          : static_cast<int64_t>(r->tokens.size()) * 15'000'000;
    }
    return r;
  }

 private:
  FakeEngine inner_;
};

thermal::CpuTopology TwoPerformanceCpus() {
  thermal::CpuTopology t;
  t.cpus = {thermal::CpuInfo{0, thermal::CoreClass::kPerformance, 0, 0},
            thermal::CpuInfo{1, thermal::CoreClass::kPerformance, 0, 0}};
  t.performance = {0, 1};
  t.basis = thermal::TopologyBasis::kConfig;
  return t;
}

Policy DefaultPolicy() {
  auto p = LoadPolicyFile(ari::testing::SourceDir() / "config" / "policy_default.textproto");
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().ToString());
  return p ? *p : Policy{};
}

int BandIndex(const Policy& p, const std::string& name) {
  for (size_t i = 0; i < p.thermal_bands.size(); ++i) {
    if (p.thermal_bands[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

ThermalRunOptions Options(const Policy& policy, runtime::ChunkRunner& engine) {
  ThermalRunOptions o;
  o.policy = &policy;
  o.engine = &engine;
  o.vocab_size = 500;
  o.topology = TwoPerformanceCpus();
  o.duration_s = 60;
  o.speedup = 40;
  o.ambient_c = 45;
  o.ambient_peak_c = 65;
  return o;
}

TEST(ThermalRun, SummerRampChangesBandsWithinHysteresisAndDwell) {
  const Policy policy = DefaultPolicy();
  CostlyEngine engine;
  auto r = RunThermal(Options(policy, engine));
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_FALSE(r->rows.empty());
  EXPECT_GE(r->band_changes, 3) << ThermalRunTable(*r);
  EXPECT_GT(r->max_die_c, 85.0) << "the ramp should reach the hot band";
  EXPECT_GT(r->critical_done, 3);
  EXPECT_GT(r->normal_done, 3);
  EXPECT_EQ(r->other_terminals, 0) << ThermalRunTable(*r);
  EXPECT_GT(r->busy_fraction, 0.2);
  EXPECT_LE(r->busy_fraction, 1.0);

  bool went_down = false;
  int prev_band = BandIndex(policy, r->rows.front().band);
  double prev_change_s = r->rows.front().t_s;
  const int last_band = static_cast<int>(policy.thermal_bands.size()) - 1;
  for (size_t i = 0; i < r->rows.size(); ++i) {
    const ThermalRunRow& row = r->rows[i];
    const int band = BandIndex(policy, row.band);
    ASSERT_GE(band, 0) << row.band;
    // The knobs are the policy's cell for (class, band): no memory ladder here.
    EXPECT_EQ(row.knobs,
              policy.knobs[static_cast<size_t>(band)][static_cast<size_t>(Rank(row.urgency))])
        << "row " << i << ": " << row.reason;
    EXPECT_FALSE(row.conservative);
    EXPECT_EQ(row.band_changed, i > 0 && band != prev_band);
    if (i > 0 && band != prev_band) {
      const ThermalBand& left = policy.thermal_bands[static_cast<size_t>(prev_band)];
      if (band > prev_band) {  // up: at or above the new band's enter threshold
        EXPECT_GE(row.die_c, policy.thermal_bands[static_cast<size_t>(band)].enter_c - 1e-9)
            << row.reason;
      } else {  // down: one band at a time, below the left band's exit threshold
        EXPECT_EQ(band, prev_band - 1);
        EXPECT_LT(row.die_c, left.exit_c) << row.reason;
        went_down = true;
      }
      if (band != last_band) {  // only entering the last band skips the dwell
        EXPECT_GE(row.t_s - prev_change_s, left.min_dwell_ms / 1000.0 - 1e-6)
            << "row " << i << " left " << left.name << " too early: " << row.reason;
      }
      prev_change_s = row.t_s;
    }
    prev_band = band;
  }
  EXPECT_TRUE(went_down) << "the ambient ramps back down: a band should be left downward\n"
                         << ThermalRunTable(*r);
}

TEST(ThermalRun, DeterministicWithADeterministicEngine) {
  const Policy policy = DefaultPolicy();
  CostlyEngine e1, e2;
  auto a = RunThermal(Options(policy, e1));
  auto b = RunThermal(Options(policy, e2));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(ThermalRunJson(*a), ThermalRunJson(*b));
}

TEST(ThermalRun, CoolAmbientStaysInTheNormalBand) {
  const Policy policy = DefaultPolicy();
  CostlyEngine engine;
  ThermalRunOptions o = Options(policy, engine);
  o.ambient_c = o.ambient_peak_c = 20;
  o.duration_s = 20;
  auto r = RunThermal(o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->band_changes, 0) << ThermalRunTable(*r);
  EXPECT_LT(r->max_die_c, 70.0);
  for (const auto& row : r->rows) EXPECT_EQ(row.band, "normal");
}

TEST(ThermalRun, TableAndJsonCarryEveryRow) {
  const Policy policy = DefaultPolicy();
  CostlyEngine engine;
  ThermalRunOptions o = Options(policy, engine);
  o.duration_s = 10;
  auto r = RunThermal(o);
  ASSERT_TRUE(r.has_value());
  const std::string table = ThermalRunTable(*r);
  const std::string json = ThermalRunJson(*r);
  size_t lines = 0;
  for (char c : table) lines += c == '\n';
  EXPECT_EQ(lines, r->rows.size() + 2);  // header + rows + summary
  size_t objs = 0;
  for (size_t p = json.find("{\"t_s\""); p != std::string::npos; p = json.find("{\"t_s\"", p + 1)) {
    ++objs;
  }
  EXPECT_EQ(objs, r->rows.size());
  EXPECT_NE(json.find("\"scenario\":\"thermal\""), std::string::npos);
  EXPECT_NE(table.find("band"), std::string::npos);
}

TEST(ThermalRun, BadOptionsAreErrors) {
  const Policy policy = DefaultPolicy();
  CostlyEngine engine;
  ThermalRunOptions o = Options(policy, engine);
  o.engine = nullptr;
  EXPECT_EQ(RunThermal(o).error().code, ErrorCode::kInvalidArgument);
  o = Options(policy, engine);
  o.speedup = 0.5;
  EXPECT_EQ(RunThermal(o).error().code, ErrorCode::kInvalidArgument);
  o = Options(policy, engine);
  o.duration_s = 0;
  EXPECT_EQ(RunThermal(o).error().code, ErrorCode::kInvalidArgument);
  o = Options(policy, engine);
  o.rc.r_pkg_amb_k_per_w = -1;
  EXPECT_EQ(RunThermal(o).error().code, ErrorCode::kInvalidArgument);
  runtime::ChunkRunner* one_slot = nullptr;
  FakeEngine single(1);
  one_slot = &single;
  o = Options(policy, *one_slot);
  EXPECT_EQ(RunThermal(o).error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace ari::sim
