// Packing into the interleaved W8 / W4 layouts: byte positions, GGUF compatibility,
// padding of tail groups and rows, and argument errors.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "runtime/core/tensor_types.h"
#include "runtime/kernels/pack.h"
#include "tests/runtime/kernels_test_util.h"

namespace ari::runtime::kernels {
namespace {

using testing::RandomVec;

std::vector<std::byte> Pack(PackedPrecision p, TensorType t, const std::vector<std::byte>& src,
                            int64_t row_bytes, int64_t rows, int64_t cols) {
  std::vector<std::byte> out(static_cast<size_t>(PackedBytes(p, rows, cols)));
  auto r = PackMatrix(p, t, src.data(), row_bytes, rows, cols, out);
  EXPECT_TRUE(r) << (r ? "" : r.error().ToString());
  return out;
}

std::vector<std::byte> Quantize(TensorType t, const std::vector<float>& x, int64_t rows,
                                int64_t cols) {
  const auto rb = static_cast<int64_t>(*RowBytes(t, cols));
  std::vector<std::byte> q(static_cast<size_t>(rows * rb));
  for (int64_t r = 0; r < rows; ++r) QuantizeRow(t, x.data() + r * cols, q.data() + r * rb, cols);
  return q;
}

TEST(PackTest, SizesFollowTheLayout) {
  EXPECT_EQ(PackedBytes(PackedPrecision::kW8, 8, 32), 272);
  EXPECT_EQ(PackedBytes(PackedPrecision::kW4, 8, 32), 144);
  EXPECT_EQ(PackedBytes(PackedPrecision::kW8, 9, 33), 2 * 2 * 272);
  EXPECT_EQ(PackedBytes(PackedPrecision::kW4, 2048, 2048), 2048 * 2048 / 32 * 18);
  EXPECT_EQ(PackedBytes(PackedPrecision::kW8, 2048, 2048), 2048 * 2048 / 32 * 34);
  EXPECT_EQ(ActQ16ABlocks(172), 7);  // 6 groups of quants, then their 6 scales in one block
  EXPECT_EQ(ActQ8ABlocks(172), 6);
}

// Hand-built Q8_0 / Q4_0 blocks land at the documented byte positions.
TEST(PackTest, BytePositionsMatchDocumentation) {
  const int64_t rows = 9, cols = 64;
  std::vector<std::byte> q8(static_cast<size_t>(rows * 2 * sizeof(BlockQ8_0)));
  std::vector<std::byte> q4(static_cast<size_t>(rows * 2 * sizeof(BlockQ4_0)));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < 2; ++g) {
      BlockQ8_0 b8{};
      b8.d = static_cast<uint16_t>(0x3c00 + r * 2 + g);
      for (int j = 0; j < 32; ++j) b8.qs[j] = static_cast<int8_t>(r * 10 + g * 3 + j - 50);
      std::memcpy(q8.data() + (r * 2 + g) * sizeof b8, &b8, sizeof b8);
      BlockQ4_0 b4{};
      b4.d = b8.d;
      for (int64_t j = 0; j < 16; ++j) {
        b4.qs[j] = static_cast<uint8_t>(((r + j) & 15) | (((g + j * 3) & 15) << 4));
      }
      std::memcpy(q4.data() + (r * 2 + g) * sizeof b4, &b4, sizeof b4);
    }
  }
  const auto p8 = Pack(PackedPrecision::kW8, TensorType::kQ8_0, q8, int64_t{2} * 34, rows, cols);
  const auto p4 = Pack(PackedPrecision::kW4, TensorType::kQ4_0, q4, int64_t{2} * 18, rows, cols);
  auto u8 = [](const std::vector<std::byte>& v, int64_t i) {
    return std::to_integer<unsigned>(v[static_cast<size_t>(i)]);
  };
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / 8, i = r % 8;
    for (int64_t g = 0; g < 2; ++g) {
      const int64_t t8 = (b * 2 + g) * 272, t4 = (b * 2 + g) * 144;
      const unsigned d = 0x3c00u + static_cast<unsigned>(r * 2 + g);
      EXPECT_EQ(u8(p8, t8 + 2 * i) | (u8(p8, t8 + 2 * i + 1) << 8), d);
      EXPECT_EQ(u8(p4, t4 + 2 * i) | (u8(p4, t4 + 2 * i + 1) << 8), d);
      for (int j = 0; j < 32; ++j) {
        EXPECT_EQ(static_cast<int8_t>(u8(p8, t8 + 16 + 32 * i + j)), r * 10 + g * 3 + j - 50);
        const int64_t jj = j & 15;
        const unsigned byte = u8(p4, t4 + 16 + 32 * (jj / 4) + 4 * i + jj % 4);
        const unsigned q = j < 16 ? (byte & 15u) : (byte >> 4);
        const unsigned want = j < 16 ? static_cast<unsigned>((r + jj) & 15)
                                     : static_cast<unsigned>((g + jj * 3) & 15);
        EXPECT_EQ(q, want) << "row " << r << " group " << g << " j " << j;
      }
    }
  }
  // Padding rows 9..15: scale 0, W8 quants 0, W4 nibbles 8.
  for (int64_t g = 0; g < 2; ++g) {
    for (int64_t i = 1; i < 8; ++i) {
      const int64_t t8 = (2 + g) * 272, t4 = (2 + g) * 144;
      EXPECT_EQ(u8(p8, t8 + 2 * i), 0u);
      EXPECT_EQ(u8(p4, t4 + 2 * i + 1), 0u);
      EXPECT_EQ(u8(p8, t8 + 16 + 32 * i + 5), 0u);
      EXPECT_EQ(u8(p4, t4 + 16 + int64_t{32} * 2 + 4 * i + 1), 0x88u);
    }
  }
}

// GGUF rows pack without requantization, and packing fp32 equals packing ggml's quantized
// row; unpacking gives exactly what DequantizeRow gives for the GGUF row.
TEST(PackTest, GgufRowsRoundTripExactly) {
  std::mt19937 rng(21);
  for (int64_t rows : {1L, 8L, 13L}) {
    for (int64_t cols : {32L, 96L, 2048L}) {
      const std::vector<float> x = RandomVec(rng, static_cast<size_t>(rows * cols));
      for (bool w4 : {false, true}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + (w4 ? " W4" : " W8"));
        const TensorType qt = w4 ? TensorType::kQ4_0 : TensorType::kQ8_0;
        const PackedPrecision p = w4 ? PackedPrecision::kW4 : PackedPrecision::kW8;
        const auto gguf = Quantize(qt, x, rows, cols);
        const auto rb = static_cast<int64_t>(*RowBytes(qt, cols));
        const auto from_q = Pack(p, qt, gguf, rb, rows, cols);
        std::vector<std::byte> from_f(from_q.size());
        ASSERT_TRUE(PackF32(p, x.data(), rows, cols, from_f));
        EXPECT_EQ(from_q, from_f);
        const PackedMatrix m{p, from_q.data(), rows, cols};
        std::vector<float> a(static_cast<size_t>(cols)), b(static_cast<size_t>(cols));
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_TRUE(UnpackRow(m, r, a));
          DequantizeRow(qt, gguf.data() + r * rb, b.data(), cols);
          ASSERT_EQ(a, b) << "row " << r;
        }
      }
    }
  }
}

// F16 / BF16 sources equal packing their fp32 values; cross-precision sources requantize.
TEST(PackTest, FloatAndCrossPrecisionSources) {
  std::mt19937 rng(22);
  const int64_t rows = 11, cols = 172;  // tail group of 12
  const std::vector<float> x = RandomVec(rng, static_cast<size_t>(rows * cols));
  for (TensorType t : {TensorType::kF16, TensorType::kBF16}) {
    std::vector<std::byte> src(static_cast<size_t>(rows * cols * 2));
    QuantizeRow(t, x.data(), src.data(), rows * cols);
    std::vector<float> back(x.size());
    DequantizeRow(t, src.data(), back.data(), rows * cols);
    for (PackedPrecision p : {PackedPrecision::kW8, PackedPrecision::kW4}) {
      const auto a = Pack(p, t, src, cols * 2, rows, cols);
      std::vector<std::byte> b(a.size());
      ASSERT_TRUE(PackF32(p, back.data(), rows, cols, b));
      EXPECT_EQ(a, b);
    }
  }
  // Q4_0 -> W8: the Q4 values (d * (q - 8), at most 16 levels) survive 8-bit requantization
  // to within half a W8 step plus the fp16 rounding of the new scale (127 * 2^-11 steps).
  const int64_t c2 = 64;
  const auto q4 = Quantize(TensorType::kQ4_0, x, rows, c2);
  const auto p8 = Pack(PackedPrecision::kW8, TensorType::kQ4_0, q4, int64_t{2} * 18, rows, c2);
  const PackedMatrix m{PackedPrecision::kW8, p8.data(), rows, c2};
  std::vector<float> a(c2), b(c2);
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_TRUE(UnpackRow(m, r, a));
    DequantizeRow(TensorType::kQ4_0, q4.data() + r * 36, b.data(), c2);
    for (int64_t j = 0; j < c2; ++j) {
      float amax = 0.0f;
      for (int k = 0; k < 32; ++k)
        amax = std::max(amax, std::fabs(b[static_cast<size_t>(j / 32 * 32 + k)]));
      EXPECT_NEAR(a[static_cast<size_t>(j)], b[static_cast<size_t>(j)],
                  amax / 127.0f * 0.57f + 1e-6f);
    }
  }
}

TEST(PackTest, TailColumnsAreZero) {
  std::mt19937 rng(23);
  const int64_t rows = 3, cols = 40;
  const std::vector<float> x = RandomVec(rng, static_cast<size_t>(rows * cols));
  for (PackedPrecision p : {PackedPrecision::kW8, PackedPrecision::kW4}) {
    std::vector<std::byte> out(static_cast<size_t>(PackedBytes(p, rows, cols)));
    ASSERT_TRUE(PackF32(p, x.data(), rows, cols, out));
    // Unpack the padded width by pretending the matrix is 64 wide.
    const PackedMatrix wide{p, out.data(), rows, 64};
    std::vector<float> v(64);
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(UnpackRow(wide, r, v));
      for (int j = 40; j < 64; ++j) EXPECT_EQ(v[static_cast<size_t>(j)], 0.0f);
    }
  }
}

TEST(PackTest, RejectsBadArguments) {
  std::vector<std::byte> src(4096), dst(4096);
  EXPECT_FALSE(PackMatrix(PackedPrecision::kW8, TensorType::kQ8_0, src.data(), 34, 1, 40, dst));
  EXPECT_FALSE(PackMatrix(PackedPrecision::kW8, TensorType::kQ8_0, src.data(), 33, 1, 32, dst));
  EXPECT_FALSE(PackMatrix(PackedPrecision::kW8, TensorType::kF32, src.data(), 128, 0, 32, dst));
  EXPECT_FALSE(PackMatrix(PackedPrecision::kW8, TensorType::kF32, src.data(), 128, 9, 32,
                          std::span<std::byte>(dst.data(), 300)));
  EXPECT_FALSE(
      PackMatrix(PackedPrecision::kW4, static_cast<TensorType>(77), src.data(), 128, 1, 32, dst));
  EXPECT_TRUE(PackMatrix(PackedPrecision::kW4, TensorType::kF32, src.data(), 128, 1, 32, dst));
  const PackedMatrix m{PackedPrecision::kW4, dst.data(), 1, 32};
  std::vector<float> small(31);
  EXPECT_FALSE(UnpackRow(m, 0, small));
  std::vector<float> ok(32);
  EXPECT_FALSE(UnpackRow(m, 1, ok));
}

}  // namespace
}  // namespace ari::runtime::kernels
