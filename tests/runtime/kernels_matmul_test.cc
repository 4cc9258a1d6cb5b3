// W8A16 / W4A8 GEMV and GEMM: every ISA path against the scalar reference (the spec), the
// spec against plain dequantized dot products, GEMM against N GEMVs, row ranges, odd
// sizes and misaligned pointers.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "runtime/core/tensor_types.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/pack.h"
#include "tests/runtime/kernels_test_util.h"

namespace ari::runtime::kernels {
namespace {

using testing::Nmse;
using testing::RandomVec;
using testing::TestBuffer;

// ---- Named tolerances ----
// SIMD vs scalar, both precisions: integer group dots are exact and the fp32 fma sequence
// is the same, so results must be bit-identical.
constexpr double kW8A16PathNmse = 0.0;
constexpr double kW4A8PathNmse = 0.0;
// Scalar spec vs a double-precision dot of the same dequantized weights and the same
// (int16- / int8-dequantized) activations: fp32 rounding only.
constexpr double kSpecVsExactNmse = 1e-10;
// Scalar W8A16 vs fp32 activations: adds per-32-group int16 activation quantization (step
// max|x|/32767, NMSE ~ (2.3 / 32767)^2 / 12 ~ 4e-10 for Gaussian data).
constexpr double kW8A16VsF32ActNmse = 1e-8;
// Scalar W4A8 vs fp32 activations: adds per-32-group int8 activation quantization (step
// max|x|/127, NMSE ~ (2.3 / 127)^2 / 12 ~ 3e-5 for Gaussian data).
constexpr double kW4A8VsF32ActNmse = 2e-4;

constexpr int64_t kCols[] = {32, 64, 96, 172, 2048, 5632};
constexpr int64_t kRows[] = {1, 5, 8, 9, 17, 67};

// A random matrix packed in both precisions at a misaligned address, plus its source.
struct Matrix {
  Matrix(std::mt19937& rng, int64_t r, int64_t c, size_t misalign)
      : rows(r),
        cols(c),
        src(RandomVec(rng, static_cast<size_t>(r * c), 0.05f)),
        buf8(static_cast<size_t>(PackedBytes(PackedPrecision::kW8, r, c))),
        buf4(static_cast<size_t>(PackedBytes(PackedPrecision::kW4, r, c))) {
    w8 = {PackedPrecision::kW8, buf8.At(misalign), rows, cols};
    w4 = {PackedPrecision::kW4, buf4.At(misalign), rows, cols};
    const auto n8 = static_cast<size_t>(PackedBytes(PackedPrecision::kW8, r, c));
    const auto n4 = static_cast<size_t>(PackedBytes(PackedPrecision::kW4, r, c));
    EXPECT_TRUE(PackF32(PackedPrecision::kW8, src.data(), r, c, {buf8.At(misalign), n8}));
    EXPECT_TRUE(PackF32(PackedPrecision::kW4, src.data(), r, c, {buf4.At(misalign), n4}));
  }
  int64_t rows, cols;
  std::vector<float> src;
  TestBuffer buf8, buf4;
  PackedMatrix w8, w4;
};

// n activation rows in both formats (prepared by the scalar table, so every path sees the
// same inputs), with row strides larger than needed and misaligned starts.
struct Acts {
  Acts(std::mt19937& rng, int64_t n_, int64_t c)
      : n(n_),
        cols(c),
        ld16(ActQ16ABlocks(c) + 2),
        ldq(Groups(c) + 1),
        x(RandomVec(rng, static_cast<size_t>(n_ * c))),
        buf16(static_cast<size_t>(n_ * ld16) * sizeof(BlockQ16A)),
        bufq(static_cast<size_t>(n_ * ldq) * sizeof(BlockQ8A)),
        q16(reinterpret_cast<BlockQ16A*>(buf16.At(4))),  // 4-byte aligned only
        q8a(reinterpret_cast<BlockQ8A*>(bufq.At(4))) {   // 4-byte aligned only
    const KernelTable& s = KernelsFor(IsaTier::kScalar);
    for (int64_t t = 0; t < n; ++t) {
      QuantizeActQ16A(s, x.data() + t * c, c, q16 + t * ld16);
      QuantizeActQ8A(s, x.data() + t * c, c, q8a + t * ldq);
    }
  }
  // Activation x[c] as the kernels consume it.
  float Consumed(bool w4, int64_t c) const {
    const int64_t g = c / 32, j = c % 32;
    return w4 ? q8a[g].d * static_cast<float>(q8a[g].qs[j])
              : Q16Scales(q16, Groups(cols))[g] * static_cast<float>(q16[g].qs[j]);
  }
  int64_t n, cols, ld16, ldq;
  std::vector<float> x;
  TestBuffer buf16, bufq;
  BlockQ16A* q16;
  BlockQ8A* q8a;
};

std::vector<float> Gemv(const KernelTable& k, const Matrix& m, const Acts& a, bool w4,
                        int64_t token = 0) {
  std::vector<float> y(static_cast<size_t>(m.rows), std::numeric_limits<float>::quiet_NaN());
  if (w4) {
    k.gemv_w4a8(m.w4, a.q8a + token * a.ldq, y.data(), 0, m.rows);
  } else {
    k.gemv_w8a16(m.w8, a.q16 + token * a.ld16, y.data(), 0, m.rows);
  }
  return y;
}

// GEMM output with ldy = rows + 3 (the extra columns must stay untouched).
std::vector<float> Gemm(const KernelTable& k, const Matrix& m, const Acts& a, bool w4, int64_t r0,
                        int64_t r1, std::vector<float> y = {}) {
  const int64_t ldy = m.rows + 3;
  if (y.empty()) y.assign(static_cast<size_t>(a.n * ldy), -7.0f);
  if (w4) {
    k.gemm_w4a8(m.w4, a.q8a, a.ldq, a.n, y.data(), ldy, r0, r1);
  } else {
    k.gemm_w8a16(m.w8, a.q16, a.ld16, a.n, y.data(), ldy, r0, r1);
  }
  return y;
}

class MatmulPathTest : public ::testing::TestWithParam<IsaTier> {};

TEST_P(MatmulPathTest, GemvMatchesScalarReference) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& ref = KernelsFor(IsaTier::kScalar);
  const KernelTable& simd = KernelsFor(GetParam());
  ASSERT_EQ(simd.tier, GetParam());
  std::mt19937 rng(1);
  size_t misalign = 0;
  for (int64_t cols : kCols) {
    for (int64_t rows : kRows) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols));
      const Matrix m(rng, rows, cols, misalign++ % 5);  // 0..4 bytes off 128-byte alignment
      const Acts a(rng, 1, cols);
      EXPECT_LE(Nmse(Gemv(simd, m, a, false), Gemv(ref, m, a, false)), kW8A16PathNmse);
      EXPECT_LE(Nmse(Gemv(simd, m, a, true), Gemv(ref, m, a, true)), kW4A8PathNmse);
    }
  }
}

TEST_P(MatmulPathTest, GemmMatchesScalarReference) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& ref = KernelsFor(IsaTier::kScalar);
  const KernelTable& simd = KernelsFor(GetParam());
  std::mt19937 rng(2);
  // 1100 columns: 35 groups, a W8A16 GEMM K slice (32 groups) and a 3-group tail (AMX: two
  // 12-group slices and an 11-group tail);
  // 2080: 65 groups, the AMX W4A8 K slice (64 groups) and a one-group tail.
  for (int64_t cols : {32L, 172L, 1100L, 2080L}) {
    for (int64_t rows : {3L, 16L, 67L}) {
      // W4A8: 6/4/1-3 token tiles (AVX2), 8/4/1-3 on pairs of row blocks (AVX-512); W8A16: 6 (AVX2)
      // / 12 (VNNI) token tiles (128 tokens per weight repack: LongGemmMatchesScalarReference).
      // AMX: 16-token tiles, fewer than 16 tokens on AVX-512, 19 / 50 / 61 end on an
      // overlapping tile.
      for (int64_t n : {1L, 4L, 7L, 10L, 13L, 16L, 19L, 50L, 61L}) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols) + " n " +
                     std::to_string(n));
        const Matrix m(rng, rows, cols, 3);
        const Acts a(rng, n, cols);
        EXPECT_LE(Nmse(Gemm(simd, m, a, false, 0, rows), Gemm(ref, m, a, false, 0, rows)),
                  kW8A16PathNmse);
        EXPECT_LE(Nmse(Gemm(simd, m, a, true, 0, rows), Gemm(ref, m, a, true, 0, rows)),
                  kW4A8PathNmse);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiers, MatmulPathTest, ::testing::ValuesIn(testing::SimdTiers()),
                         testing::TierParamName);

// Long prefill chunks: the AMX GEMM keeps at most 256 tokens' accumulators per row-block
// pair, so 300 tokens run as two blocks of 150 (each ending on an overlapping tile); the
// AVX2 / AVX-512 W8A16 GEMMs repack the weights per 128 tokens (three repacks).
TEST_P(MatmulPathTest, LongGemmMatchesScalarReference) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& ref = KernelsFor(IsaTier::kScalar);
  const KernelTable& simd = KernelsFor(GetParam());
  std::mt19937 rng(7);
  const Matrix m(rng, 40, 256, 1);
  const Acts a(rng, 300, 256);
  EXPECT_LE(Nmse(Gemm(simd, m, a, false, 0, 40), Gemm(ref, m, a, false, 0, 40)), kW8A16PathNmse);
  EXPECT_LE(Nmse(Gemm(simd, m, a, true, 0, 40), Gemm(ref, m, a, true, 0, 40)), kW4A8PathNmse);
  EXPECT_LE(Nmse(Gemm(simd, m, a, false, 9, 31), Gemm(ref, m, a, false, 9, 31)), kW8A16PathNmse);
  EXPECT_LE(Nmse(Gemm(simd, m, a, true, 9, 31), Gemm(ref, m, a, true, 9, 31)), kW4A8PathNmse);
}

// Properties every tier (scalar included) must have.
class MatmulTierTest : public ::testing::TestWithParam<IsaTier> {};

// A prefill chunk gives exactly the decode results (same tier): batch-invariant outputs.
TEST_P(MatmulTierTest, GemmEqualsNGemvsBitwise) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& k = KernelsFor(GetParam());
  std::mt19937 rng(3);
  // 8224: 257 groups, a one-group K slice at the end of the W8A16 GEMM (and of AMX W4A8's
  // 64-group slices); 137 tokens: more than one weight repack (128 tokens); 21: AMX tiles.
  for (int64_t cols : {64L, 172L, 5632L, 8224L}) {
    for (int64_t rows : {9L, 67L}) {
      const Matrix m(rng, rows, cols, 1);
      const Acts a(rng, cols == 172 ? 137 : (cols == 5632 ? 21 : 11), cols);
      for (bool w4 : {false, true}) {
        SCOPED_TRACE(std::string(w4 ? "W4A8" : "W8A16") + " rows " + std::to_string(rows) +
                     " cols " + std::to_string(cols));
        const std::vector<float> y = Gemm(k, m, a, w4, 0, rows);
        const int64_t ldy = rows + 3;
        for (int64_t t = 0; t < a.n; ++t) {
          const std::vector<float> v = Gemv(k, m, a, w4, t);
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(y[static_cast<size_t>(t * ldy + r)], v[static_cast<size_t>(r)])
                << "token " << t << " row " << r;
          }
          for (int64_t r = rows; r < ldy; ++r)
            ASSERT_EQ(y[static_cast<size_t>(t * ldy + r)], -7.0f);
        }
      }
    }
  }
}

// Splitting rows across "threads" at unaligned boundaries writes each row exactly once
// and gives the same result as one call.
TEST_P(MatmulTierTest, RowRangesWriteOnlyTheirRows) {
  ARI_REQUIRE_TIER(GetParam());
  const KernelTable& k = KernelsFor(GetParam());
  std::mt19937 rng(4);
  const int64_t rows = 67, cols = 96;
  const Matrix m(rng, rows, cols, 2);
  // AVX2 W4A8 GEMM: one 6-, one 4- and one 1-token tile; AMX: one and an overlapping one.
  const Acts a(rng, 17, cols);
  const int64_t cuts[] = {0, 3, 16, 29, 30, 64, 67};
  for (bool w4 : {false, true}) {
    SCOPED_TRACE(w4 ? "W4A8" : "W8A16");
    const std::vector<float> full = Gemm(k, m, a, w4, 0, rows);
    const std::vector<float> gemv_full = Gemv(k, m, a, w4);
    std::vector<float> y;
    std::vector<float> v(static_cast<size_t>(rows), -7.0f);
    for (size_t c = 0; c + 1 < std::size(cuts); ++c) {
      const int64_t r0 = cuts[c], r1 = cuts[c + 1];
      y = Gemm(k, m, a, w4, r0, r1, y);
      if (w4) {
        k.gemv_w4a8(m.w4, a.q8a, v.data(), r0, r1);
      } else {
        k.gemv_w8a16(m.w8, a.q16, v.data(), r0, r1);
      }
      for (int64_t r = r1; r < rows; ++r) {
        ASSERT_EQ(v[static_cast<size_t>(r)], -7.0f)
            << "GEMV [" << r0 << "," << r1 << ") wrote row " << r;
        for (int64_t t = 0; t < a.n; ++t) {
          ASSERT_EQ(y[static_cast<size_t>(t * (rows + 3) + r)], -7.0f)
              << "GEMM [" << r0 << "," << r1 << ") wrote row " << r;
        }
      }
    }
    EXPECT_EQ(y, full);
    EXPECT_EQ(v, gemv_full);
  }
}

INSTANTIATE_TEST_SUITE_P(Tiers, MatmulTierTest,
                         ::testing::Values(IsaTier::kScalar, IsaTier::kAvx2, IsaTier::kAvx512Vnni,
                                           IsaTier::kAmx, IsaTier::kNeon, IsaTier::kNeonDotprod,
                                           IsaTier::kNeonI8mm),
                         testing::TierParamName);

// ---- The spec against plain dot products over GGUF-dequantized weights ----

double Dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Weights go through GGUF Q8_0 / Q4_0 rows (QuantizeRow) and are dequantized with
// DequantizeRow, independent of the packing code; the kernel reads the packed GGUF rows.
TEST(MatmulSpecTest, ScalarReferenceMatchesDequantizedDot) {
  const KernelTable& k = KernelsFor(IsaTier::kScalar);
  std::mt19937 rng(5);
  for (int64_t cols : {32L, 256L, 2048L}) {
    const int64_t rows = 19;
    const std::vector<float> src = RandomVec(rng, static_cast<size_t>(rows * cols), 0.05f);
    const Acts a(rng, 1, cols);
    for (bool w4 : {false, true}) {
      SCOPED_TRACE(std::string(w4 ? "W4A8" : "W8A16") + " cols " + std::to_string(cols));
      const TensorType qt = w4 ? TensorType::kQ4_0 : TensorType::kQ8_0;
      const int64_t row_bytes = static_cast<int64_t>(*RowBytes(qt, cols));
      std::vector<std::byte> gguf(static_cast<size_t>(rows * row_bytes));
      for (int64_t r = 0; r < rows; ++r) {
        QuantizeRow(qt, src.data() + r * cols, gguf.data() + r * row_bytes, cols);
      }
      const PackedPrecision p = w4 ? PackedPrecision::kW4 : PackedPrecision::kW8;
      std::vector<std::byte> packed(static_cast<size_t>(PackedBytes(p, rows, cols)));
      ASSERT_TRUE(PackMatrix(p, qt, gguf.data(), row_bytes, rows, cols, packed));
      const PackedMatrix m{p, packed.data(), rows, cols};
      std::vector<float> y(static_cast<size_t>(rows));
      if (w4) {
        k.gemv_w4a8(m, a.q8a, y.data(), 0, rows);
      } else {
        k.gemv_w8a16(m, a.q16, y.data(), 0, rows);
      }
      // The activations the kernel actually consumed, and the original fp32 ones.
      std::vector<float> xa(static_cast<size_t>(cols));
      for (int64_t c = 0; c < cols; ++c) xa[static_cast<size_t>(c)] = a.Consumed(w4, c);
      std::vector<float> exact(static_cast<size_t>(rows)), f32act(static_cast<size_t>(rows));
      std::vector<float> wrow(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRow(qt, gguf.data() + r * row_bytes, wrow.data(), cols);
        exact[static_cast<size_t>(r)] = static_cast<float>(Dot(wrow.data(), xa.data(), cols));
        f32act[static_cast<size_t>(r)] = static_cast<float>(Dot(wrow.data(), a.x.data(), cols));
      }
      EXPECT_LE(Nmse(y, exact), kSpecVsExactNmse);
      EXPECT_LE(Nmse(y, f32act), w4 ? kW4A8VsF32ActNmse : kW8A16VsF32ActNmse);
    }
  }
}

// Rows whose length is not a multiple of 32: the zero-padded tail group contributes
// nothing (compared with a dot over exactly `cols` unpacked values).
TEST(MatmulSpecTest, TailGroupIsZeroPadded) {
  const KernelTable& k = KernelsFor(IsaTier::kScalar);
  std::mt19937 rng(6);
  for (int64_t cols : {1L, 17L, 172L, 1000L}) {
    const int64_t rows = 10;
    const Matrix m(rng, rows, cols, 0);
    const Acts a(rng, 1, cols);
    for (bool w4 : {false, true}) {
      const PackedMatrix& pm = w4 ? m.w4 : m.w8;
      std::vector<float> y(static_cast<size_t>(rows)), exact(static_cast<size_t>(rows));
      if (w4) {
        k.gemv_w4a8(pm, a.q8a, y.data(), 0, rows);
      } else {
        k.gemv_w8a16(pm, a.q16, y.data(), 0, rows);
      }
      std::vector<float> wrow(static_cast<size_t>(cols)), xa(static_cast<size_t>(cols));
      for (int64_t c = 0; c < cols; ++c) xa[static_cast<size_t>(c)] = a.Consumed(w4, c);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_TRUE(UnpackRow(pm, r, wrow));
        exact[static_cast<size_t>(r)] = static_cast<float>(Dot(wrow.data(), xa.data(), cols));
      }
      EXPECT_LE(Nmse(y, exact), kSpecVsExactNmse) << (w4 ? "W4A8" : "W8A16") << " cols " << cols;
    }
  }
}

TEST(MatmulSpecTest, CheckMatmulArgsRejectsBadInput) {
  std::vector<std::byte> buf(static_cast<size_t>(PackedBytes(PackedPrecision::kW4, 8, 32)));
  const PackedMatrix m{PackedPrecision::kW4, buf.data(), 8, 32};
  EXPECT_TRUE(CheckMatmulArgs(m, PackedPrecision::kW4, 0, 8));
  EXPECT_TRUE(CheckMatmulArgs(m, PackedPrecision::kW4, 3, 3));
  EXPECT_FALSE(CheckMatmulArgs(m, PackedPrecision::kW8, 0, 8));
  EXPECT_FALSE(CheckMatmulArgs(m, PackedPrecision::kW4, 0, 9));
  EXPECT_FALSE(CheckMatmulArgs(m, PackedPrecision::kW4, 5, 4));
  EXPECT_FALSE(CheckMatmulArgs(PackedMatrix{}, PackedPrecision::kW8, 0, 0));
}

}  // namespace
}  // namespace ari::runtime::kernels
