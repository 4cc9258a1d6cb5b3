// RunModelBench (what ari-bench / ari-perf print): structure of the result, not speed (no
// timing assertions: the machine is shared).
#include "runtime/eval/perf_bench.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/kernels/tier_choice.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

TEST(PerfBench, ReportsEveryFigureOnStories260KPack) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  for (Precision p : {Precision::kW4A8, Precision::kW8A16}) {
    BenchOptions o;
    o.model = mp.pack;
    o.precision = p;
    o.threads = 2;
    o.prompt_sizes = {8, 16};
    o.n_gen = 4;
    o.reps = 2;
    o.measure_bandwidth = false;
    auto r = RunModelBench(o);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->precision, std::string(PrecisionName(p)));
    EXPECT_EQ(r->isa, std::string(kernels::IsaTierName(kernels::BestIsaTier())));
    ASSERT_EQ(r->prompt_tps.size(), 2u);
    ASSERT_EQ(r->ttft_ms.size(), 2u);
    for (const Stat& s : r->prompt_tps) {
      ASSERT_EQ(s.values.size(), 2u);
      EXPECT_GT(s.median, 0.0);
      EXPECT_LE(s.min, s.median);
      EXPECT_LE(s.median, s.max);
    }
    EXPECT_EQ(r->decode_tps.values.size(), 2u);
    EXPECT_GT(r->decode_tps.median, 0.0);
    // 5 layers x (QKV, attention, O, gate/up+SwiGLU, down) + classifier per decoded token.
    EXPECT_DOUBLE_EQ(r->dispatches_per_decode_token, 5.0 * 5 + 1);
    EXPECT_GT(r->dispatches_per_prefill_token, 0.0);
    EXPECT_LT(r->dispatches_per_prefill_token, 26.0);  // a chunk shares its dispatches
    EXPECT_GT(r->peak_rss_bytes, 0u);
    EXPECT_GT(r->embd_table_bytes, 0u);
    EXPECT_GT(r->weight_bytes_per_token, 0u);
    EXPECT_GT(r->time_to_ready_ms, 0.0);
    // Page granular: at most the page cover of the table is resident.
    EXPECT_LE(r->embd_resident_bytes, r->embd_table_bytes + uint64_t{2} * 65536);
    EXPECT_EQ(r->bandwidth_gbs, 0.0);  // probe off
    EXPECT_TRUE(r->paired_fraction.values.empty());
    ASSERT_EQ(r->decode_cpu_share.values.size(), 2u);  // one per decode run
    EXPECT_GT(r->decode_cpu_share.median, 0.0);
    const std::string json = r->ToJson();
    for (const char* key :
         {"\"decode_tps\"", "\"time_to_ready_ms\"", "\"peak_rss_bytes\"", "\"roofline_fraction\"",
          "\"embd_resident_bytes\"", "\"dispatches_per_decode_token\"", "\"ttft_ms\"",
          "\"decode_cpu_share\"", "\"paired_roofline_fraction\""}) {
      EXPECT_NE(json.find(key), std::string::npos) << key;
    }
    EXPECT_NE(r->ToTable().find("decode t/s"), std::string::npos);
  }
}

// --isa: the chunks run on the ceiling's tier (the best supported at or below it), and the
// result says which one ran.
TEST(PerfBench, RunsAndReportsTheIsaCeiling) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  for (kernels::IsaTier ceiling : kernels::SupportedIsaTiers()) {
    BenchOptions o;
    o.model = mp.pack;
    o.precision = Precision::kW4A8;
    o.max_isa = ceiling;
    o.prompt_sizes = {20};
    o.n_gen = 2;
    o.reps = 1;
    o.measure_bandwidth = false;
    auto r = RunModelBench(o);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_EQ(r->isa, std::string(kernels::IsaTierName(ceiling)));
    EXPECT_NE(r->ToJson().find("\"isa\":\"" + r->isa + "\""), std::string::npos);
    // The kernels the chunks called: the tier choice's for W4A8 under this ceiling, and the
    // GEMV a tier at or below it.
    const auto chosen = kernels::ChosenTiers(ceiling);
    const auto gemm = chosen[static_cast<size_t>(kernels::MatmulFamily::kGemmW4A8)];
    EXPECT_EQ(r->gemm_isas, std::string(kernels::IsaTierName(gemm)));
    auto gemv = kernels::ParseIsaTier(r->gemv_isas);
    ASSERT_TRUE(gemv.has_value()) << r->gemv_isas;
    EXPECT_LE(kernels::IsaTierRank(*gemv), kernels::IsaTierRank(ceiling));
    EXPECT_NE(r->ToTable().find("GEMM kernels " + r->gemm_isas), std::string::npos);
  }
  ASSERT_TRUE(kernels::SetMaxIsaTier(kernels::BestIsaTier()).has_value());
}

// With the probe on: a bandwidth figure and one paired (probe, decode, probe) fraction per
// paired run, taken after peak RSS was read.
TEST(PerfBench, PairsBandwidthProbesWithDecodeRuns) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  BenchOptions o;
  o.model = mp.pack;
  o.precision = Precision::kW4A8;
  o.threads = 2;
  o.prompt_sizes = {8};
  o.n_gen = 4;
  o.reps = 1;
  o.bandwidth_bytes = 8u << 20;
  o.paired_reps = 2;
  auto r = RunModelBench(o);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_GT(r->bandwidth_gbs, 0.0);
  EXPECT_GT(r->roofline_tps, 0.0);
  ASSERT_EQ(r->paired_fraction.values.size(), 2u);
  ASSERT_EQ(r->paired_bandwidth_gbs.values.size(), 2u);
  EXPECT_GT(r->paired_fraction.min, 0.0);
  EXPECT_GT(r->paired_bandwidth_gbs.min, 0.0);
  EXPECT_NE(r->ToTable().find("paired probe+decode runs (2)"), std::string::npos);
  // The probe says how it read; decode's own read rate sits next to it, and a fraction
  // above 1 is flagged (the probe too slow), never printed as if it were fine.
  EXPECT_NE(r->probe.find("GB/s"), std::string::npos) << r->probe;
  EXPECT_NE(r->ToTable().find("probe " + r->probe), std::string::npos) << r->ToTable();
  EXPECT_NEAR(r->decode_read_gbs,
              static_cast<double>(r->weight_bytes_per_token) * r->decode_tps.median / 1e9,
              1e-9 + r->decode_read_gbs * 1e-9);
  EXPECT_EQ(r->probe_too_slow, r->roofline_fraction > 1.0 || r->paired_fraction.median > 1.0);
  EXPECT_EQ(r->ToTable().find("WARNING: fraction above 1") != std::string::npos, r->probe_too_slow);
  EXPECT_NE(r->ToJson().find("\"probe_too_slow\":"), std::string::npos);
}

}  // namespace
}  // namespace ari::runtime
