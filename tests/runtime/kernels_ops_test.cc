// Activation conversion/quantization, fused RMSNorm/SwiGLU and attention helpers: every
// ISA path against the scalar reference, and the reference against plain formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>

#include "runtime/core/tensor_types.h"
#include "runtime/kernels/kernels.h"
#include "tests/runtime/kernels_test_util.h"

namespace ari::runtime::kernels {
namespace {

using testing::Nmse;
using testing::RandomVec;
using testing::TestBuffer;

// ---- Named tolerances ----
// Conversions and Q8A quantization are exact roundings (same IEEE operations) on every
// path: bit-identical output.
// RMSNorm: SIMD sums squares in fp32 lanes, the reference in double: the scale differs by
// a few ulp (rel. ~1e-7), NMSE ~1e-13.
constexpr double kRmsNormNmse = 1e-11;
// Fused RMSNorm -> Q8A: a few ulp in a normalized value may flip a rounding of
// x / d by one step (|error| <= d); compare dequantized values. NMSE of a rare one-step
// flip per row is < 1e-6.
constexpr double kRmsNormQ8ANmse = 1e-6;
// SwiGLU / softmax: vectorized exp (about 2 ulp) vs libm expf, NMSE ~1e-13; softmax adds
// the fp32 lane sums of up to 5632 terms (rel. error ~1e-6) against the reference's double
// sum.
constexpr double kExpNmse = 1e-10;
// Attention dot products / weighted sums: fp32 reassociation over head_dim / positions.
constexpr double kAttnNmse = 1e-11;
// Reference softmax / SwiGLU vs double-precision formulas.
constexpr double kRefVsDoubleNmse = 1e-12;

constexpr int64_t kSizes[] = {1, 7, 8, 31, 32, 33, 64, 172, 2048, 5632};

class OpsPathTest : public ::testing::TestWithParam<IsaTier> {
 protected:
  const KernelTable& ref_ = KernelsFor(IsaTier::kScalar);
};

std::vector<float> Dequant(const BlockQ8A* b, int64_t cols) {
  std::vector<float> v(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) {
    const BlockQ8A& blk = b[c / 32];
    v[static_cast<size_t>(c)] = blk.d * blk.qs[c % 32];
  }
  return v;
}

// Q16 rows of `cols` values equal byte for byte: quants, scale bits and the zeroed padding.
bool SameQ16Rows(const BlockQ16A* a, const BlockQ16A* b, int64_t cols) {
  return std::memcmp(a, b, static_cast<size_t>(ActQ16ABlocks(cols)) * sizeof(BlockQ16A)) == 0;
}

TEST_P(OpsPathTest, QuantizeAndConvertAreBitExact) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& k = KernelsFor(GetParam());
  std::mt19937 rng(11);
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x = RandomVec(rng, static_cast<size_t>(n), 3.0f);
    x[0] = 1e6f;  // saturates in fp16
    if (n > 2) x[1] = -7e4f;
    if (n > 40) std::fill(x.begin() + 32, x.begin() + 40, 0.0f);
    TestBuffer b1(static_cast<size_t>(Groups(n)) * 40), b2(static_cast<size_t>(Groups(n)) * 40);
    auto* q_ref = reinterpret_cast<BlockQ8A*>(b1.At(4));
    auto* q_simd = reinterpret_cast<BlockQ8A*>(b2.At(8));
    QuantizeActQ8A(ref_, x.data(), n, q_ref);
    QuantizeActQ8A(k, x.data(), n, q_simd);
    EXPECT_EQ(std::memcmp(q_ref, q_simd, static_cast<size_t>(Groups(n)) * 40), 0);
    for (int64_t g = 0; g < Groups(n); ++g) {
      int32_t sum = 0;
      for (int j = 0; j < 32; ++j) sum += q_ref[g].qs[j];
      ASSERT_EQ(q_ref[g].sum, sum);
    }
    // Q16A (W8A16 activations): bit-identical, each value within half a step of x.
    TestBuffer c1(static_cast<size_t>(ActQ16ABlocks(n)) * sizeof(BlockQ16A)),
        c2(static_cast<size_t>(ActQ16ABlocks(n)) * sizeof(BlockQ16A));
    auto* h_ref = reinterpret_cast<BlockQ16A*>(c1.At(4));
    auto* h_simd = reinterpret_cast<BlockQ16A*>(c2.At(8));
    QuantizeActQ16A(ref_, x.data(), n, h_ref);
    QuantizeActQ16A(k, x.data(), n, h_simd);
    EXPECT_TRUE(SameQ16Rows(h_ref, h_simd, n));
    const float* d_ref = Q16Scales(h_ref, Groups(n));
    for (int64_t i = 0; i < PaddedCols(n); ++i) {
      const int64_t g = i / kGroup;
      const float d = d_ref[g];
      const float xi = i < n ? x[static_cast<size_t>(i)] : 0.0f;  // the tail is zero padded
      // Half a step, plus the fp32 rounding of x * (1 / d) (relative 2^-23, 1e-6 with margin).
      const double err = std::fabs(static_cast<double>(d) * h_ref[g].qs[i % kGroup] - xi);
      ASSERT_LE(err, 0.5 * d + 1e-6 * std::fabs(xi)) << "value " << i;
    }
    std::vector<uint16_t> f_ref(static_cast<size_t>(n)), f_simd = f_ref;
    ref_.convert_f16(x.data(), n, f_ref.data());
    k.convert_f16(x.data(), n, f_simd.data());
    EXPECT_EQ(f_ref, f_simd);
    EXPECT_EQ(f_ref[0], 0x7bff);  // 65504, not Inf
    std::vector<uint16_t> bf_ref(static_cast<size_t>(n)), bf_simd(static_cast<size_t>(n));
    x[0] = std::nanf("");
    k.convert_bf16(x.data(), n, bf_simd.data());
    ref_.convert_bf16(x.data(), n, bf_ref.data());
    EXPECT_EQ(bf_ref, bf_simd);
    for (int64_t i = 1; i < n; ++i)
      ASSERT_EQ(bf_ref[static_cast<size_t>(i)], Fp32ToBf16(x[static_cast<size_t>(i)]));
  }
}

// Q16A edge groups: all zero, below FLT_MIN * 32767 (1 / d would overflow), one value at
// the maximum with the others tiny, and values that round exactly half way.
TEST_P(OpsPathTest, QuantizeQ16AEdgeGroups) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& k = KernelsFor(GetParam());
  std::vector<float> x(size_t{128}, 0.0f);
  for (size_t j = 0; j < 32; ++j) x[32 + j] = (j % 2 ? -1.0f : 1.0f) * 1e-36f;
  x[64] = 3.0f;
  for (size_t j = 1; j < 32; ++j) x[64 + j] = 1e-9f * static_cast<float>(j);
  for (size_t j = 0; j < 32; ++j) x[96 + j] = (static_cast<float>(j) - 16.0f) * 0.5f;
  x[96] = 32767.0f;  // d = 1: the other values are k + 0.5 halves, rounded to even
  std::vector<BlockQ16A> r(static_cast<size_t>(ActQ16ABlocks(128))), s = r;
  QuantizeActQ16A(ref_, x.data(), 128, r.data());
  QuantizeActQ16A(k, x.data(), 128, s.data());
  EXPECT_TRUE(SameQ16Rows(r.data(), s.data(), 128));
  const float* d = Q16Scales(r.data(), 4);
  EXPECT_EQ(d[0], 0.0f);
  EXPECT_EQ(d[1], 0.0f);  // subnormal scale: the group reads as zero
  for (int j = 0; j < 32; ++j) EXPECT_EQ(r[1].qs[j], 0);
  EXPECT_EQ(r[2].qs[0], 32767);
  EXPECT_EQ(d[3], 1.0f);
  EXPECT_EQ(r[3].qs[0], 32767);
  EXPECT_EQ(r[3].qs[1], -8);  // -7.5 -> -8 (even)
  EXPECT_EQ(r[3].qs[2], -7);  // -7.0
  EXPECT_EQ(r[3].qs[3], -6);  // -6.5 -> -6 (even)
}

TEST_P(OpsPathTest, RmsNormFusedMatchesReference) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& k = KernelsFor(GetParam());
  std::mt19937 rng(12);
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n " + std::to_string(n));
    const std::vector<float> x = RandomVec(rng, static_cast<size_t>(n), 2.0f);
    const std::vector<float> w = RandomVec(rng, static_cast<size_t>(n), 1.0f);
    std::vector<float> f_ref(static_cast<size_t>(n)), f_simd(static_cast<size_t>(n));
    RmsNorm(ref_, x.data(), w.data(), n, 1e-5f, f_ref.data());
    RmsNorm(k, x.data(), w.data(), n, 1e-5f, f_simd.data());
    EXPECT_LE(Nmse(f_simd, f_ref), kRmsNormNmse);
    // Reference vs the formula in double.
    double ss = 0.0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double s = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-5);
    std::vector<float> exact(static_cast<size_t>(n));
    for (size_t i = 0; i < exact.size(); ++i) exact[i] = static_cast<float>(x[i] * s * w[i]);
    EXPECT_LE(Nmse(f_ref, exact), kRmsNormNmse);

    std::vector<BlockQ8A> q_ref(static_cast<size_t>(Groups(n))), q_simd = q_ref;
    RmsNormToQ8A(ref_, x.data(), w.data(), n, 1e-5f, q_ref.data());
    RmsNormToQ8A(k, x.data(), w.data(), n, 1e-5f, q_simd.data());
    EXPECT_LE(Nmse(Dequant(q_simd.data(), n), Dequant(q_ref.data(), n)), kRmsNormQ8ANmse);
    // Fused == unfused (same table): quantize(RmsNorm(x)).
    std::vector<BlockQ8A> q_unfused(q_ref.size());
    QuantizeActQ8A(k, f_simd.data(), n, q_unfused.data());
    EXPECT_EQ(std::memcmp(q_unfused.data(), q_simd.data(), q_ref.size() * sizeof(BlockQ8A)), 0);

    // Different garbage first, so the zeroed padding is checked too.
    std::vector<BlockQ16A> h_simd(static_cast<size_t>(ActQ16ABlocks(n)), BlockQ16A{{1}});
    std::vector<BlockQ16A> h_unfused(h_simd.size(), BlockQ16A{{2}});
    RmsNormToQ16A(k, x.data(), w.data(), n, 1e-5f, h_simd.data());
    QuantizeActQ16A(k, f_simd.data(), n, h_unfused.data());
    EXPECT_TRUE(SameQ16Rows(h_simd.data(), h_unfused.data(), n));
  }
}

TEST_P(OpsPathTest, SwiGluMatchesReference) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& k = KernelsFor(GetParam());
  std::mt19937 rng(13);
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> g = RandomVec(rng, static_cast<size_t>(n), 4.0f);
    const std::vector<float> u = RandomVec(rng, static_cast<size_t>(n), 1.0f);
    g[0] = -120.0f;  // exp(-g) beyond the float range
    if (n > 1) g[1] = 95.0f;
    std::vector<float> r(static_cast<size_t>(n)), s(static_cast<size_t>(n), -1.0f);
    ref_.swiglu(g.data(), u.data(), n, r.data());
    k.swiglu(g.data(), u.data(), n, s.data());
    EXPECT_LE(Nmse(s, r), kExpNmse);
    std::vector<float> exact(static_cast<size_t>(n));
    for (size_t i = 0; i < exact.size(); ++i) {
      exact[i] = static_cast<float>(g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i]);
    }
    EXPECT_LE(Nmse(r, exact), kRefVsDoubleNmse);
    // Fused forms equal SwiGLU then convert (same table).
    std::vector<BlockQ8A> q(static_cast<size_t>(Groups(n))), q2 = q;
    SwiGluToQ8A(k, g.data(), u.data(), n, q.data());
    QuantizeActQ8A(k, s.data(), n, q2.data());
    EXPECT_EQ(std::memcmp(q.data(), q2.data(), q.size() * sizeof(BlockQ8A)), 0);
    std::vector<BlockQ16A> h(static_cast<size_t>(ActQ16ABlocks(n)), BlockQ16A{{1}});
    std::vector<BlockQ16A> h2(h.size(), BlockQ16A{{2}});
    SwiGluToQ16A(k, g.data(), u.data(), n, h.data());
    QuantizeActQ16A(k, s.data(), n, h2.data());
    EXPECT_TRUE(SameQ16Rows(h.data(), h2.data(), n));
  }
}

TEST_P(OpsPathTest, SoftmaxMatchesReference) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& k = KernelsFor(GetParam());
  std::mt19937 rng(14);
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n " + std::to_string(n));
    std::vector<float> x = RandomVec(rng, static_cast<size_t>(n), 5.0f);
    if (n > 3) x[3] = -1e4f;  // underflows to ~0
    std::vector<float> r = x, s = x;
    ref_.softmax(r.data(), n);
    k.softmax(s.data(), n);
    EXPECT_LE(Nmse(s, r), kExpNmse);
    const float mx = *std::max_element(x.begin(), x.end());
    double sum = 0.0;
    for (float v : x) sum += std::exp(static_cast<double>(v) - mx);
    std::vector<float> exact(static_cast<size_t>(n));
    for (size_t i = 0; i < exact.size(); ++i)
      exact[i] = static_cast<float>(std::exp(static_cast<double>(x[i]) - mx) / sum);
    EXPECT_LE(Nmse(r, exact), kRefVsDoubleNmse);
  }
}

TEST_P(OpsPathTest, AttentionHelpersMatchReference) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& k = KernelsFor(GetParam());
  std::mt19937 rng(15);
  for (int64_t d : {8L, 12L, 64L, 100L, 128L}) {
    for (int64_t nt : {1L, 5L, 37L, 300L}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + " positions " + std::to_string(nt));
      const int64_t ld = d + 5;  // KV rows with a stride (e.g. all heads of a position)
      const std::vector<float> q = RandomVec(rng, static_cast<size_t>(d));
      const std::vector<float> kv = RandomVec(rng, static_cast<size_t>(nt * ld));
      std::vector<uint16_t> kv16(kv.size());
      ref_.convert_f16(kv.data(), static_cast<int64_t>(kv.size()), kv16.data());
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      std::vector<float> r(static_cast<size_t>(nt)), s(static_cast<size_t>(nt));
      ref_.attn_scores_f32(q.data(), kv.data(), ld, d, nt, scale, r.data());
      k.attn_scores_f32(q.data(), kv.data(), ld, d, nt, scale, s.data());
      EXPECT_LE(Nmse(s, r), kAttnNmse);
      ref_.attn_scores_f16(q.data(), kv16.data(), ld, d, nt, scale, r.data());
      k.attn_scores_f16(q.data(), kv16.data(), ld, d, nt, scale, s.data());
      EXPECT_LE(Nmse(s, r), kAttnNmse);
      // Reference scores vs the plain formula on the fp16 keys.
      std::vector<float> exact(static_cast<size_t>(nt));
      for (int64_t t = 0; t < nt; ++t) {
        double dot = 0.0;
        for (int64_t i = 0; i < d; ++i) {
          dot += static_cast<double>(q[static_cast<size_t>(i)]) *
                 Fp16ToFp32(kv16[static_cast<size_t>(t * ld + i)]);
        }
        exact[static_cast<size_t>(t)] = static_cast<float>(dot * scale);
      }
      EXPECT_LE(Nmse(r, exact), kAttnNmse);
      ref_.softmax(r.data(), nt);
      std::vector<float> o_ref(static_cast<size_t>(d)), o(static_cast<size_t>(d), 9.0f);
      ref_.attn_values_f32(r.data(), kv.data(), ld, d, nt, o_ref.data());
      k.attn_values_f32(r.data(), kv.data(), ld, d, nt, o.data());
      EXPECT_LE(Nmse(o, o_ref), kAttnNmse);
      std::fill(o.begin(), o.end(), 9.0f);
      ref_.attn_values_f16(r.data(), kv16.data(), ld, d, nt, o_ref.data());
      k.attn_values_f16(r.data(), kv16.data(), ld, d, nt, o.data());
      EXPECT_LE(Nmse(o, o_ref), kAttnNmse);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiers, OpsPathTest, ::testing::ValuesIn(testing::SimdTiers()),
                         testing::TierParamName);

}  // namespace
}  // namespace ari::runtime::kernels
