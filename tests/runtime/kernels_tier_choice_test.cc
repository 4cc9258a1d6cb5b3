// Tier choice by measurement (runtime/kernels/tier_choice.h): the pure rule, the candidate
// sets, and that the table the engine dispatches to is made of the chosen kernels and never
// exceeds the ISA ceiling the governor sets. No speed assertion except scalar vs SIMD,
// which differ by far more than any load on the machine.
#include <gtest/gtest.h>

#include <cstdio>

#include "runtime/kernels/tier_choice.h"

namespace ari::runtime::kernels {
namespace {

constexpr auto kW4Gemm = MatmulFamily::kGemmW4A8;

TEST(TierChoice, TheFastestMeasuredCandidateWins) {
  TierTimings t;
  const IsaTier cand[] = {IsaTier::kAvx512Vnni, IsaTier::kAvx2};
  t.us[static_cast<size_t>(kW4Gemm)][static_cast<size_t>(IsaTier::kAvx512Vnni)] = 15.4;
  t.us[static_cast<size_t>(kW4Gemm)][static_cast<size_t>(IsaTier::kAvx2)] = 14.3;
  EXPECT_EQ(ChooseTier(t, kW4Gemm, cand), IsaTier::kAvx2);
  t.us[static_cast<size_t>(kW4Gemm)][static_cast<size_t>(IsaTier::kAvx2)] = 15.4;  // tie
  EXPECT_EQ(ChooseTier(t, kW4Gemm, cand), IsaTier::kAvx512Vnni);
  t.us[static_cast<size_t>(kW4Gemm)][static_cast<size_t>(IsaTier::kAvx512Vnni)] = -1;
  EXPECT_EQ(ChooseTier(t, kW4Gemm, cand), IsaTier::kAvx2);                    // unmeasured loses
  EXPECT_EQ(ChooseTier(TierTimings{}, kW4Gemm, cand), IsaTier::kAvx512Vnni);  // none: highest
  EXPECT_EQ(ChooseTier(t, kW4Gemm, {}), IsaTier::kScalar);
}

TEST(TierChoice, CandidatesStayAtOrBelowTheCeilingAndSkipScalarWhenSimdExists) {
  std::array<IsaTier, kNumIsaTiers> st{};
  for (IsaTier ceiling : SupportedIsaTiers()) {
    for (int fi = 0; fi < kNumMatmulFamilies; ++fi) {
      const auto f = static_cast<MatmulFamily>(fi);
      const auto c = CandidateTiers(f, ceiling, false, st);
      ASSERT_FALSE(c.empty());
      for (IsaTier t : c) {
        EXPECT_LE(IsaTierRank(t), IsaTierRank(ceiling));
        EXPECT_TRUE(IsaTierSupported(t));
        if (c.size() > 1) {
          EXPECT_NE(t, IsaTier::kScalar);
        }
      }
      if (ceiling == IsaTier::kScalar) {
        EXPECT_EQ(c.size(), 1u);
      } else {
        EXPECT_NE(c.front(), IsaTier::kScalar);  // a SIMD tier's own kernel is a candidate
      }
      std::array<IsaTier, kNumIsaTiers> st2{};
      const auto with_scalar = CandidateTiers(f, ceiling, true, st2);
      EXPECT_EQ(with_scalar.back(), IsaTier::kScalar);
    }
  }
}

TEST(TierChoice, DispatchTableIsMadeOfTheChosenKernelsUnderEveryCeiling) {
  for (IsaTier ceiling : SupportedIsaTiers()) {
    const auto chosen = ChosenTiers(ceiling);
    const KernelTable& k = ChosenKernelsFor(ceiling);
    for (IsaTier c : chosen) EXPECT_LE(IsaTierRank(c), IsaTierRank(ceiling));
    EXPECT_EQ(k.gemv_w8a16, KernelsFor(chosen[0]).gemv_w8a16);
    EXPECT_EQ(k.gemm_w8a16, KernelsFor(chosen[1]).gemm_w8a16);
    EXPECT_EQ(k.gemv_w4a8, KernelsFor(chosen[2]).gemv_w4a8);
    EXPECT_EQ(k.gemm_w4a8, KernelsFor(chosen[3]).gemm_w4a8);
    // The element-wise and attention kernels stay the ceiling's own.
    EXPECT_EQ(k.tier, KernelsFor(ceiling).tier);
    EXPECT_EQ(k.quantize_q8a, KernelsFor(ceiling).quantize_q8a);
    EXPECT_EQ(k.attn_scores_f16, KernelsFor(ceiling).attn_scores_f16);
  }
  std::printf("[ measure  ] this host's choice:\n%s", TierChoiceReport().c_str());
}

TEST(TierChoice, ActiveKernelsFollowTheGovernorsCeiling) {
  const IsaTier before = MaxIsaTier();
  ASSERT_TRUE(SetMaxIsaTier(IsaTier::kScalar).has_value());
  EXPECT_EQ(ActiveKernels().gemm_w4a8, KernelsFor(IsaTier::kScalar).gemm_w4a8);
  EXPECT_EQ(ActiveKernels().gemv_w8a16, KernelsFor(IsaTier::kScalar).gemv_w8a16);
  ASSERT_TRUE(SetMaxIsaTier(before).has_value());
  EXPECT_EQ(&ActiveKernels(), &ChosenKernelsFor(ActiveIsaTier()));
}

// Which tier wins is a speed figure (benchmarks, docs/benchmarks.md), not asserted here:
// under qemu-user (the aarch64 CI step) emulated NEON can be slower than scalar code.
TEST(TierChoice, MeasurementTimesEveryCandidateAndTheFastestIsChosen) {
  if (BestIsaTier() == IsaTier::kScalar) {
    GTEST_SKIP() << "no SIMD tier on this CPU: nothing to choose between";
  }
  MeasureOptions o;
  o.rows = 256;
  o.cols = 512;
  o.gemm_n = 16;  // one AMX token tile
  o.reps = 3;
  o.include_scalar = true;
  const TierTimings t = MeasureTierTimings(o);
  std::array<IsaTier, kNumIsaTiers> st{};
  for (int fi = 0; fi < kNumMatmulFamilies; ++fi) {
    const auto f = static_cast<MatmulFamily>(fi);
    const auto cand = CandidateTiers(f, BestIsaTier(), true, st);
    ASSERT_GE(cand.size(), 2u);
    IsaTier fastest = cand.front();
    for (IsaTier c : cand) {
      const double us = t.us[static_cast<size_t>(fi)][static_cast<size_t>(c)];
      if (us < t.us[static_cast<size_t>(fi)][static_cast<size_t>(fastest)]) fastest = c;
      EXPECT_GT(us, 0.0) << MatmulFamilyName(f) << " " << IsaTierName(c);
      std::printf("[ measure  ] %s %s: %.1f us (256 x 512, a functional run)\n",
                  std::string(MatmulFamilyName(f)).c_str(), std::string(IsaTierName(c)).c_str(),
                  us);
    }
    EXPECT_EQ(ChooseTier(t, f, cand), fastest) << MatmulFamilyName(f);
  }
}

}  // namespace
}  // namespace ari::runtime::kernels
