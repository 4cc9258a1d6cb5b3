// CPU feature detection, ISA tier ordering and runtime lowering of the dispatch tier.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/kernels/cpu_features.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/pack.h"
#include "runtime/kernels/tier_choice.h"
#include "tests/runtime/kernels_test_util.h"

namespace ari::runtime::kernels {
namespace {

// Restores the max tier after each test (the setting is process-global).
class DispatchTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(SetMaxIsaTier(BestIsaTier())); }
};

TEST_F(DispatchTest, DetectsConsistentFeatures) {
  const CpuFeatures& f = DetectCpuFeatures();
  EXPECT_TRUE(!f.avx2 || f.avx);
  EXPECT_TRUE(!f.avx512vnni || f.avx512f);
  EXPECT_TRUE(!(f.avx512bw || f.avx512vl || f.avx512dq) || f.avx512f);
  EXPECT_TRUE(!f.amx_int8 || f.amx_tile);
  EXPECT_TRUE(!f.amx_permitted || f.amx_int8);
  const auto tiers = SupportedIsaTiers();
  ASSERT_FALSE(tiers.empty());
  EXPECT_EQ(tiers.front(), IsaTier::kScalar);
  EXPECT_EQ(tiers.back(), BestIsaTier());
  for (size_t i = 1; i < tiers.size(); ++i) {
    EXPECT_LT(IsaTierRank(tiers[i - 1]), IsaTierRank(tiers[i]));
  }
#if defined(__x86_64__)
  EXPECT_EQ(IsaTierSupported(IsaTier::kAvx2), f.avx2 && f.fma && f.f16c);
  EXPECT_FALSE(IsaTierSupported(IsaTier::kNeon));
  // AMX needs the AVX-512 tier, the CPU's tiles and INT8 dot products, and the kernel's
  // grant of the tile data (arch_prctl, asked once at detection).
  EXPECT_EQ(IsaTierSupported(IsaTier::kAmx),
            IsaTierSupported(IsaTier::kAvx512Vnni) && f.amx_int8 && f.amx_permitted);
  EXPECT_TRUE(!f.amx_int8 || f.amx_permitted || f.amx_errno != 0);  // a refusal says why
  std::printf(
      "CPU: best tier %s; avx2=%d fma=%d f16c=%d avx512f=%d bw=%d vl=%d dq=%d vnni=%d amx-tile=%d "
      "amx-int8=%d amx granted=%d (errno %d)\n",
      std::string(IsaTierName(BestIsaTier())).c_str(), f.avx2, f.fma, f.f16c, f.avx512f, f.avx512bw,
      f.avx512vl, f.avx512dq, f.avx512vnni, f.amx_tile, f.amx_int8, f.amx_permitted, f.amx_errno);
#elif defined(__aarch64__)
  // ASIMD is architectural on AArch64; dotprod / i8mm come from HWCAP / HWCAP2.
  EXPECT_TRUE(f.neon);
  EXPECT_TRUE(IsaTierSupported(IsaTier::kNeon));
  EXPECT_FALSE(IsaTierSupported(IsaTier::kAvx2));
  EXPECT_EQ(IsaTierSupported(IsaTier::kNeonDotprod), f.neon_dotprod);
  EXPECT_EQ(IsaTierSupported(IsaTier::kNeonI8mm), f.neon_dotprod && f.neon_i8mm);
  std::printf("CPU: best tier %s; neon=%d dotprod=%d i8mm=%d (kernels for best tier: %s)\n",
              std::string(IsaTierName(BestIsaTier())).c_str(), f.neon, f.neon_dotprod, f.neon_i8mm,
              std::string(IsaTierName(KernelsFor(BestIsaTier()).tier)).c_str());
#endif
}

TEST_F(DispatchTest, NamesRoundTrip) {
  for (int i = 0; i < kNumIsaTiers; ++i) {
    const auto t = static_cast<IsaTier>(i);
    auto parsed = ParseIsaTier(IsaTierName(t));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(*parsed, t);
  }
  EXPECT_FALSE(ParseIsaTier("avx1024"));
  EXPECT_FALSE(ParseIsaCeiling("avx1024"));
  EXPECT_EQ(ParseIsaCeiling(IsaTierName(kTopIsaTier)).value_or(IsaTier::kScalar), kTopIsaTier);
#if defined(__aarch64__)
  EXPECT_FALSE(ParseIsaCeiling("avx2"));
#else
  EXPECT_FALSE(ParseIsaCeiling("neon"));
#endif
}

TEST_F(DispatchTest, DefaultIsBestAndLoweringClamps) {
  EXPECT_EQ(ActiveIsaTier(), BestIsaTier());
  EXPECT_EQ(ActiveKernels().tier, BestIsaTier());
  ASSERT_TRUE(SetMaxIsaTier(IsaTier::kScalar));
  EXPECT_EQ(MaxIsaTier(), IsaTier::kScalar);
  EXPECT_EQ(ActiveIsaTier(), IsaTier::kScalar);
  EXPECT_EQ(ActiveKernels().tier, IsaTier::kScalar);
#if defined(__x86_64__)
  // Asking for more than the CPU has clamps to the best supported tier below it.
  ASSERT_TRUE(SetMaxIsaTier(IsaTier::kAvx512Vnni));
  EXPECT_EQ(MaxIsaTier(), IsaTier::kAvx512Vnni);
  EXPECT_EQ(ActiveIsaTier(), BestIsaTier() == IsaTier::kAmx ? IsaTier::kAvx512Vnni : BestIsaTier());
  EXPECT_TRUE(IsaTierInFamily(IsaTier::kAvx2));
  EXPECT_FALSE(IsaTierInFamily(IsaTier::kNeon));
  EXPECT_FALSE(SetMaxIsaTier(IsaTier::kNeonDotprod));  // other architecture
  EXPECT_EQ(MaxIsaTier(), IsaTier::kAvx512Vnni);       // unchanged on error
  // AMX sits above AVX-512 VNNI: a ceiling of kAvx512Vnni turns the tiles off.
  ASSERT_TRUE(SetMaxIsaTier(IsaTier::kAmx));
  EXPECT_EQ(ActiveIsaTier(), BestIsaTier());
  EXPECT_TRUE(IsaTierInFamily(IsaTier::kAmx));
  EXPECT_GT(IsaTierRank(IsaTier::kAmx), IsaTierRank(IsaTier::kAvx512Vnni));
  ASSERT_TRUE(SetMaxIsaTier(IsaTier::kAvx512Vnni));
  EXPECT_NE(ActiveIsaTier(), IsaTier::kAmx);
#elif defined(__aarch64__)
  ASSERT_TRUE(SetMaxIsaTier(IsaTier::kNeonI8mm));
  EXPECT_EQ(MaxIsaTier(), IsaTier::kNeonI8mm);
  EXPECT_EQ(ActiveIsaTier(), BestIsaTier());
  ASSERT_TRUE(SetMaxIsaTier(IsaTier::kNeon));
  EXPECT_EQ(ActiveIsaTier(), IsaTier::kNeon);
  EXPECT_TRUE(IsaTierInFamily(IsaTier::kNeonI8mm));
  EXPECT_TRUE(IsaTierInFamily(IsaTier::kScalar));
  EXPECT_FALSE(IsaTierInFamily(IsaTier::kAvx512Vnni));
  EXPECT_FALSE(IsaTierInFamily(IsaTier::kAmx));
  EXPECT_FALSE(SetMaxIsaTier(IsaTier::kAvx2));  // other architecture
  EXPECT_EQ(MaxIsaTier(), IsaTier::kNeon);      // unchanged on error
#endif
}

TEST_F(DispatchTest, UncompiledTiersFallBack) {
  EXPECT_TRUE(IsaTierCompiled(IsaTier::kScalar));
#if defined(__aarch64__)
  EXPECT_TRUE(IsaTierCompiled(IsaTier::kNeon));
  EXPECT_TRUE(IsaTierCompiled(IsaTier::kNeonDotprod));
  EXPECT_FALSE(IsaTierCompiled(IsaTier::kAvx2));
#elif defined(__x86_64__)
  EXPECT_FALSE(IsaTierCompiled(IsaTier::kNeon));
  EXPECT_TRUE(IsaTierCompiled(IsaTier::kAmx));
  // The AMX tier is the AVX-512 table with the prefill GEMMs on tiles.
  const KernelTable& amx = KernelsFor(IsaTier::kAmx);
  const KernelTable& avx512 = KernelsFor(IsaTier::kAvx512Vnni);
  EXPECT_NE(amx.gemm_w8a16, avx512.gemm_w8a16);
  EXPECT_NE(amx.gemm_w4a8, avx512.gemm_w4a8);
  EXPECT_EQ(amx.gemv_w8a16, avx512.gemv_w8a16);
  EXPECT_EQ(amx.gemv_w4a8, avx512.gemv_w4a8);
  EXPECT_EQ(amx.quantize_q16a, avx512.quantize_q16a);
#endif
  for (int i = 0; i < kNumIsaTiers; ++i) {
    const auto t = static_cast<IsaTier>(i);
    const KernelTable& k = KernelsFor(t);
    if (IsaTierCompiled(t)) {
      EXPECT_EQ(k.tier, t);
    } else {
      EXPECT_LT(IsaTierRank(k.tier), IsaTierRank(t)) << IsaTierName(t);
    }
  }
}

// Each matmul entry names the tier whose own kernel it holds (what the forward pass
// reports per chunk as the kernels that ran): that tier's table holds the same kernel, no
// lower compiled tier does, and it is not above the table's. Also for the tables with the
// measured choice (ChosenKernelsFor).
template <class Fn>
void ExpectOwnTier(const KernelTable& k, Fn KernelTable::*fn, IsaTier KernelTable::*tier,
                   const char* what) {
  SCOPED_TRACE(std::string(IsaTierName(k.tier)) + " " + what);
  const IsaTier e = k.*tier;
  ASSERT_TRUE(IsaTierCompiled(e)) << IsaTierName(e);
  EXPECT_LE(IsaTierRank(e), IsaTierRank(k.tier)) << IsaTierName(e);
  EXPECT_EQ(KernelsFor(e).*fn, k.*fn) << IsaTierName(e);
  for (int i = 0; i < kNumIsaTiers; ++i) {
    const auto u = static_cast<IsaTier>(i);
    if (IsaTierCompiled(u) && IsaTierInFamily(u) && IsaTierRank(u) < IsaTierRank(e)) {
      EXPECT_NE(KernelsFor(u).*fn, k.*fn) << IsaTierName(e) << " inherits from " << IsaTierName(u);
    }
  }
}

void ExpectOwnTiers(const KernelTable& k) {
  ExpectOwnTier(k, &KernelTable::gemv_w8a16, &KernelTable::gemv_w8a16_tier, "gemv_w8a16");
  ExpectOwnTier(k, &KernelTable::gemm_w8a16, &KernelTable::gemm_w8a16_tier, "gemm_w8a16");
  ExpectOwnTier(k, &KernelTable::gemv_w4a8, &KernelTable::gemv_w4a8_tier, "gemv_w4a8");
  ExpectOwnTier(k, &KernelTable::gemm_w4a8, &KernelTable::gemm_w4a8_tier, "gemm_w4a8");
}

TEST_F(DispatchTest, MatmulEntriesNameTheirOwnTier) {
  for (int i = 0; i < kNumIsaTiers; ++i) {
    const auto t = static_cast<IsaTier>(i);
    if (!IsaTierInFamily(t)) continue;
    ExpectOwnTiers(KernelsFor(t));
    if (IsaTierSupported(t)) ExpectOwnTiers(ChosenKernelsFor(t));
  }
#if defined(__x86_64__)
  EXPECT_EQ(KernelsFor(IsaTier::kAmx).gemv_w8a16_tier, IsaTier::kAvx512Vnni);  // shared
  EXPECT_EQ(KernelsFor(IsaTier::kAmx).gemm_w4a8_tier, IsaTier::kAmx);
#endif
}

// The governor lowers the tier between chunks: the dispatching entry points switch paths
// at once, and results stay within the path tolerance (W4A8: bit-identical).
TEST_F(DispatchTest, LoweringTierAtRuntimeSwitchesPaths) {
  std::mt19937 rng(31);
  const int64_t rows = 40, cols = 2048;
  const auto w = testing::RandomVec(rng, static_cast<size_t>(rows * cols), 0.05f);
  std::vector<std::byte> p4(static_cast<size_t>(PackedBytes(PackedPrecision::kW4, rows, cols)));
  ASSERT_TRUE(PackF32(PackedPrecision::kW4, w.data(), rows, cols, p4));
  const PackedMatrix m{PackedPrecision::kW4, p4.data(), rows, cols};
  const auto x = testing::RandomVec(rng, static_cast<size_t>(cols));
  std::vector<BlockQ8A> xq(static_cast<size_t>(Groups(cols)));
  QuantizeActQ8A(x.data(), cols, xq.data());
  std::vector<float> y_best(rows), y_low(rows);
  GemvW4A8(m, xq.data(), y_best.data(), 0, rows);
  std::vector<IsaTier> seen;
  for (auto it = SupportedIsaTiers().rbegin(); it != SupportedIsaTiers().rend(); ++it) {
    ASSERT_TRUE(SetMaxIsaTier(*it));
    seen.push_back(ActiveKernels().tier);
    GemvW4A8(m, xq.data(), y_low.data(), 0, rows);
    EXPECT_EQ(y_low, y_best) << "tier " << IsaTierName(*it);
  }
  EXPECT_EQ(seen.back(), IsaTier::kScalar);
  EXPECT_EQ(seen.size(), SupportedIsaTiers().size());
}

// Setting the tier from one thread while others dispatch is race-free (TSan/ASan food).
TEST_F(DispatchTest, ConcurrentLoweringIsSafe) {
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    int n = 0;
    while (!stop.load()) n += static_cast<int>(ActiveKernels().tier);
    EXPECT_GE(n, 0);
  });
  for (int i = 0; i < 2000; ++i)
    ASSERT_TRUE(SetMaxIsaTier(i % 2 ? IsaTier::kScalar : BestIsaTier()));
  stop = true;
  reader.join();
}

}  // namespace
}  // namespace ari::runtime::kernels
