// Cost model: fit from benchmark JSON, file round trip, scaling rules, errors.
#include "sim/cost_model.h"

#include <gtest/gtest.h>

namespace ari::sim {
namespace {

constexpr double kTol = 1e-9;

// A benchmark object as runtime::BenchResult::ToJson writes it. The prompt points lie
// on t_ms = 10 + 2 * n (overhead 10 ms, 500 tok/s).
std::string BenchJson(const char* precision, int threads, double decode_tps) {
  auto tps = [](double n) { return n / ((10 + 2 * n) / 1000.0); };
  char b[600];
  std::snprintf(
      b, sizeof(b),
      "{\"model\":\"m.gguf\",\"precision\":\"%s\",\"threads\":%d,\"time_to_ready_ms\":1,"
      "\"prompt\":[{\"tokens\":64,\"tps\":{\"median\":%.9f,\"min\":0,\"max\":0,\"values\":[]},"
      "\"ttft_ms\":{\"median\":1}},{\"tokens\":128,\"tps\":{\"median\":%.9f}}],"
      "\"decode_tps\":{\"median\":%g,\"min\":1,\"max\":1,\"values\":[1]},\"peak_rss_bytes\":1}",
      precision, threads, tps(64), tps(128), decode_tps);
  return b;
}

TEST(CostModel, FitsPrefillLineFromBench) {
  BenchCalibration cal;
  cal.layers = 20;
  auto m =
      BuildCostModelFromBench({BenchJson("w8a16", 1, 9) + "\n" + BenchJson("w4a8", 1, 18)}, cal);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  ASSERT_EQ(m->entries.size(), 2u);
  const CostEntry& e = m->entries[0];
  EXPECT_EQ(e.precision, runtime::Precision::kW8A16);
  EXPECT_NEAR(e.prefill_tps, 500.0, 1e-6);
  EXPECT_NEAR(e.chunk_overhead_ms, 10.0, 1e-6);
  EXPECT_NEAR(e.decode_tps, 9.0, kTol);
  EXPECT_EQ(m->layers, 20);
  // Round trip through the file format.
  auto again = ParseCostModelJson(CostModelToJson(*m));
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->entries.size(), 2u);
  EXPECT_NEAR(again->entries[1].decode_tps, 18.0, 1e-4);
  EXPECT_EQ(again->layers, 20);
}

TEST(CostModel, ScalingRules) {
  CostModel m;
  m.layers = 10;
  m.best_isa = "avx2";
  m.isa_speed = DefaultIsaSpeed();
  m.thread_scaling = 1.0;
  m.efficiency_core_speed = 0.5;
  CostEntry e;
  e.threads = 1;
  e.precision = runtime::Precision::kW8A16;
  e.prefill_tps = 100;
  e.chunk_overhead_ms = 10;
  e.decode_tps = 10;
  m.entries = {e};
  runtime::ChunkKnobs k;
  k.precision = runtime::Precision::kW8A16;
  k.threads = 1;
  k.max_isa = runtime::kernels::IsaTier::kAvx2;
  using runtime::ChunkPhase;
  EXPECT_NEAR(m.ChunkSeconds(k, ChunkPhase::kPrefill, 50, false), 0.01 + 0.5, kTol);
  EXPECT_NEAR(m.ChunkSeconds(k, ChunkPhase::kDecode, 4, false), 0.4, kTol);
  k.threads = 2;  // thread_scaling 1: twice as fast
  EXPECT_NEAR(m.ChunkSeconds(k, ChunkPhase::kDecode, 4, false), 0.2, kTol);
  EXPECT_NEAR(m.ChunkSeconds(k, ChunkPhase::kDecode, 4, true), 0.4, kTol);  // efficiency x0.5
  k.threads = 1;
  k.layer_drop = 2;  // 8 of 10 layers
  EXPECT_NEAR(m.ChunkSeconds(k, ChunkPhase::kDecode, 4, false), 0.32, kTol);
  k.layer_drop = 0;
  k.max_isa = runtime::kernels::IsaTier::kScalar;
  EXPECT_NEAR(m.ChunkSeconds(k, ChunkPhase::kDecode, 4, false), 0.4 / 0.15, 1e-9);
  // A faster tier than the machine has runs at the machine's best.
  k.max_isa = runtime::kernels::IsaTier::kAvx512Vnni;
  EXPECT_NEAR(m.ChunkSeconds(k, ChunkPhase::kDecode, 4, false), 0.4, kTol);
}

TEST(CostModel, BuiltinParses) {
  auto m = BuiltinCostModel();
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_FALSE(m->entries.empty());
  EXPECT_FALSE(m->source.empty());
}

// Constrained decoding's mask: per token, slower on efficiency cores and a capped clock,
// read from and written to the JSON, validated.
TEST(CostModel, MaskCost) {
  auto m = BuiltinCostModel();
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_GT(m->mask_us_per_token, 0.0);  // measured (docs/structured_output.md)
  CostModel c = *m;
  c.mask_us_per_token = 100;
  c.efficiency_core_speed = 0.5;
  c.nominal_khz_performance = 2000000;
  EXPECT_NEAR(c.MaskSeconds(10, false, 0), 1e-3, kTol);
  EXPECT_NEAR(c.MaskSeconds(10, true, 0), 2e-3, kTol);
  EXPECT_NEAR(c.MaskSeconds(10, false, 1000000), 2e-3, kTol);  // half clock, compute-bound
  EXPECT_EQ(c.MaskSeconds(0, false, 0), 0.0);
  auto back = ParseCostModelJson(CostModelToJson(c), "rt.json");
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->mask_us_per_token, 100);
  c.mask_us_per_token = -1;
  auto bad = ParseCostModelJson(CostModelToJson(c), "bad.json");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("mask_us_per_token"), std::string::npos);
}

TEST(CostModel, ClearErrors) {
  auto e1 = ParseCostModelJson("{not json", "c.json");
  ASSERT_FALSE(e1.has_value());
  EXPECT_NE(e1.error().message.find("c.json"), std::string::npos);
  auto e2 = ParseCostModelJson(R"({"entries": []})", "c.json");
  ASSERT_FALSE(e2.has_value());
  EXPECT_NE(e2.error().message.find("format"), std::string::npos);
  auto e3 = ParseCostModelJson(
      R"({"format":"ari-sim-cost-1","entries":[{"precision":"fp64","threads":1,"prefill_tps":1,"decode_tps":1}]})");
  ASSERT_FALSE(e3.has_value());
  EXPECT_NE(e3.error().message.find("fp64"), std::string::npos);
  auto e4 = ParseCostModelJson(
      R"({"format":"ari-sim-cost-1","entries":[{"precision":"w8a16","threads":1,"prefill_tps":0,"decode_tps":1}]})");
  ASSERT_FALSE(e4.has_value());
  EXPECT_NE(e4.error().message.find("prefill_tps"), std::string::npos);
  EXPECT_FALSE(
      BuildCostModelFromBench({"{\"precision\":\"w8a16\",\"threads\":1}"}, {}).has_value());
  EXPECT_FALSE(BuildCostModelFromBench({"no json here"}, {}).has_value());
}

}  // namespace
}  // namespace ari::sim

namespace ari::sim {
namespace {

// A measured layer_drop_cost table replaces the "dropped blocks are free" assumption.
TEST(CostModel, MeasuredLayerDropCost) {
  auto m = ParseCostModelJson(R"({"format": "ari-sim-cost-1", "layers": 10,
      "layer_drop_cost": {"layers": 5, "source": "test", "prefill": [1, 0.9, 0.8, 0.7],
                          "decode": [1, 0.95, 0.9, 0.85]},
      "entries": [{"precision": "w8a16", "threads": 1, "isa": "avx2", "layer_drop": 0,
                   "prefill_tps": 100, "decode_tps": 10}]})");
  ASSERT_TRUE(m.has_value()) << m.error().message;
  using runtime::ChunkPhase;
  // The table was measured on 5 blocks, the model has 10: level 2 here = level 1 there.
  EXPECT_NEAR(m->DropFactor(ChunkPhase::kDecode, 2), 0.95, 1e-12);
  EXPECT_NEAR(m->DropFactor(ChunkPhase::kDecode, 3), 0.925, 1e-12);  // interpolated
  EXPECT_NEAR(m->DropFactor(ChunkPhase::kPrefill, 2), 0.9, 1e-12);
  EXPECT_NEAR(m->DropFactor(ChunkPhase::kPrefill, 8), 0.6, 1e-12);  // last step extrapolated
  EXPECT_DOUBLE_EQ(m->DropFactor(ChunkPhase::kDecode, 0), 1.0);
  runtime::ChunkKnobs k;
  k.threads = 1;
  k.max_isa = runtime::kernels::IsaTier::kAvx2;
  k.layer_drop = 2;
  EXPECT_NEAR(m->ChunkSeconds(k, ChunkPhase::kDecode, 4, false), 0.4 * 0.95, 1e-9);
  // Without the table: whole blocks free ((10 - 2) / 10).
  CostModel plain = *m;
  plain.drop_cost_prefill.clear();
  plain.drop_cost_decode.clear();
  EXPECT_NEAR(plain.ChunkSeconds(k, ChunkPhase::kDecode, 4, false), 0.4 * 0.8, 1e-9);
  // Round trip through JSON keeps the table.
  auto again = ParseCostModelJson(CostModelToJson(*m));
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(again->drop_cost_decode, m->drop_cost_decode);
  EXPECT_EQ(again->drop_cost_layers, 5);
  // Bad tables are refused with a message.
  auto bad = ParseCostModelJson(R"({"format": "ari-sim-cost-1",
      "layer_drop_cost": {"layers": 5, "prefill": [0.9, 0.8], "decode": [1, 0.9]},
      "entries": [{"precision": "w8a16", "threads": 1, "prefill_tps": 1, "decode_tps": 1}]})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("layer_drop_cost"), std::string::npos);
}

TEST(CostModel, BuiltinHasMeasuredDropCost) {
  auto m = BuiltinCostModel();
  ASSERT_TRUE(m.has_value()) << m.error().message;
  ASSERT_GE(m->drop_cost_decode.size(), 2u);
  EXPECT_FALSE(m->drop_cost_source.empty());
}

}  // namespace
}  // namespace ari::sim
