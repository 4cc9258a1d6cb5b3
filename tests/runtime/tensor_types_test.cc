// Tensor types: fp16/bf16 conversions (known bit patterns, exhaustive rounding checks, F16C
// hardware as an oracle on x86) and Q8_0/Q4_0 blocks (hand-computed ggml blocks, error bounds).
#include "runtime/core/tensor_types.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/kernels/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ari::runtime {
namespace {

float F(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

TEST(TensorTypesTest, NamesAndSizes) {
  EXPECT_EQ(TensorTypeName(TensorType::kQ4_0), "Q4_0");
  EXPECT_EQ(TensorTypeName(TensorType::kBF16), "BF16");
  EXPECT_TRUE(IsSupportedTensorType(0));
  EXPECT_TRUE(IsSupportedTensorType(30));
  EXPECT_FALSE(IsSupportedTensorType(10));  // Q2_K: valid ggml, unsupported here
  EXPECT_FALSE(IsSupportedTensorType(11));  // Q3_K
  EXPECT_FALSE(IsSupportedTensorType(15));  // Q8_K (ggml's internal activation type)
  EXPECT_FALSE(IsSupportedTensorType(4));   // removed Q4_2
  EXPECT_FALSE(IsSupportedTensorType(0xffffffffu));
  EXPECT_EQ(BlockSize(TensorType::kQ8_0), 32);
  EXPECT_EQ(BlockBytes(TensorType::kQ8_0), 34);
  EXPECT_EQ(BlockBytes(TensorType::kQ4_0), 18);
  EXPECT_EQ(BlockSize(TensorType::kF16), 1);
  EXPECT_EQ(*RowBytes(TensorType::kF32, 172), 688u);
  EXPECT_EQ(*RowBytes(TensorType::kF16, 3), 6u);
  EXPECT_EQ(*RowBytes(TensorType::kBF16, 5), 10u);
  EXPECT_EQ(*RowBytes(TensorType::kQ8_0, 64), 68u);
  EXPECT_EQ(*RowBytes(TensorType::kQ4_0, 2048), 64u * 18u);
  EXPECT_EQ(*RowBytes(TensorType::kQ4_0, 0), 0u);
}

TEST(TensorTypesTest, RowAndTensorBytesErrors) {
  for (int64_t n : {1, 31, 33, 172}) {
    auto r = RowBytes(TensorType::kQ8_0, n);
    ASSERT_FALSE(r) << n;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("multiple of 32"), std::string::npos);
    EXPECT_FALSE(RowBytes(TensorType::kQ4_0, n));
  }
  EXPECT_FALSE(RowBytes(TensorType::kF32, -1));
  EXPECT_FALSE(RowBytes(static_cast<TensorType>(10), 256));
  EXPECT_FALSE(RowBytes(TensorType::kF32, std::numeric_limits<int64_t>::max()));  // overflow
  const int64_t big = int64_t{1} << 40;
  EXPECT_FALSE(TensorBytes(TensorType::kF32, std::vector<int64_t>{big, big}));
  EXPECT_FALSE(TensorBytes(TensorType::kF32, std::vector<int64_t>{}));
  EXPECT_FALSE(TensorBytes(TensorType::kF32, std::vector<int64_t>{1, 0}));
  EXPECT_EQ(*TensorBytes(TensorType::kQ8_0, std::vector<int64_t>{64, 3, 2}), 68u * 6u);
}

TEST(TensorTypesTest, Fp16KnownBitPatterns) {
  struct Case {
    float f;
    uint16_t h;
  };
  const Case cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {0.5f, 0x3800},
      {65504.0f, 0x7bff},
      {0x1p-14f, 0x0400},
      {0x1p-24f, 0x0001},
      {1023 * 0x1p-24f, 0x03ff},
      {0.1f, 0x2e66},
      {1.0f / 3.0f, 0x3555},
      {-65504.0f, 0xfbff},
      {std::numeric_limits<float>::infinity(), 0x7c00},
      {-std::numeric_limits<float>::infinity(), 0xfc00},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Fp32ToFp16(c.f), c.h) << c.f;
    if (c.f == c.f) {
      EXPECT_EQ(Bits(Fp16ToFp32(c.h)), Bits(c.f == 0.1f          ? 0.0999755859375f
                                            : c.f == 1.0f / 3.0f ? 0.333251953125f
                                                                 : c.f));
    }
  }
  // Rounding to nearest, ties to even, overflow and underflow.
  EXPECT_EQ(Fp32ToFp16(65519.0f), 0x7bff);
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);  // tie rounds to even -> Inf
  EXPECT_EQ(Fp32ToFp16(1e10f), 0x7c00);
  EXPECT_EQ(Fp32ToFp16(1.0f + 0x1p-11f), 0x3c00);      // tie -> even
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(Fp32ToFp16(0x1p-25f), 0x0000);             // tie with 0 -> 0
  EXPECT_EQ(Fp32ToFp16(F(Bits(0x1p-25f) + 1)), 0x0001);
  EXPECT_EQ(Fp32ToFp16(3 * 0x1p-25f), 0x0002);     // 1.5 ulp -> 2
  EXPECT_EQ(Fp32ToFp16(5 * 0x1p-25f), 0x0002);     // 2.5 ulp -> 2
  EXPECT_EQ(Fp32ToFp16(4095 * 0x1p-26f), 0x0400);  // subnormal rounds up to normal
  EXPECT_EQ(Fp32ToFp16(-0x1p-30f), 0x8000);
  EXPECT_EQ(Fp32ToFp16(F(1)), 0x0000);  // fp32 subnormal
  // NaN stays NaN (quiet), sign kept.
  EXPECT_EQ(Fp32ToFp16(std::numeric_limits<float>::quiet_NaN()) & 0x7e00, 0x7e00);
  EXPECT_EQ(Fp32ToFp16(F(0xff800001u)) & 0xfe00, 0xfe00);  // signalling NaN -> quiet NaN
  EXPECT_TRUE(std::isnan(Fp16ToFp32(0x7c01)));
  EXPECT_TRUE(std::isinf(Fp16ToFp32(0x7c00)));
  EXPECT_EQ(Fp16ToFp32(0x8001), -0x1p-24f);
}

// Every fp16 value round-trips; every midpoint between neighbours rounds to the even one.
TEST(TensorTypesTest, Fp16ExhaustiveRoundTripAndTies) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Fp16ToFp32(Fp32ToFp16(f)))) << h;
      continue;
    }
    ASSERT_EQ(Fp32ToFp16(f), h) << h;
  }
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const float lo = Fp16ToFp32(static_cast<uint16_t>(h));
    const float hi = Fp16ToFp32(static_cast<uint16_t>(h + 1));
    const float mid = (lo + hi) / 2;  // exact in fp32
    ASSERT_EQ(Fp32ToFp16(mid), (h & 1) ? h + 1 : h) << h;
    ASSERT_EQ(Fp32ToFp16(std::nextafter(mid, 0.0f)), h) << h;
    ASSERT_EQ(Fp32ToFp16(std::nextafter(mid, 1e9f)), h + 1) << h;
    ASSERT_EQ(Fp32ToFp16(-mid), 0x8000 | ((h & 1) ? h + 1 : h)) << h;
  }
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t HardwareFp16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float HardwareFp32(uint16_t h) { return _cvtsh_ss(h); }

// External oracle: the CPU's F16C conversions (IEEE round-to-nearest-even).
TEST(TensorTypesTest, Fp16MatchesF16cHardware) {
  if (!kernels::DetectCpuFeatures().f16c) GTEST_SKIP() << "no F16C on this CPU";
  std::mt19937 rng(42);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = rng();
    if (i & 1) bits = (bits & 0x83ffffffu) | (static_cast<uint32_t>(100 + i % 50) << 23);
    const float f = F(bits);
    const uint16_t want = HardwareFp16(f);
    const uint16_t got = Fp32ToFp16(f);
    if (std::isnan(f)) {
      ASSERT_EQ(got & 0x7e00, 0x7e00);
      continue;
    }
    ASSERT_EQ(got, want) << std::hex << bits;
  }
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float want = HardwareFp32(static_cast<uint16_t>(h));
    const float got = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got));
    } else {
      ASSERT_EQ(Bits(got), Bits(want)) << h;
    }
  }
}
#endif

TEST(TensorTypesTest, Bf16KnownBitPatterns) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(-2.0f), 0xc000);
  EXPECT_EQ(Fp32ToBf16(F(0x3f808000u)), 0x3f80);  // tie -> even (down)
  EXPECT_EQ(Fp32ToBf16(F(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(Fp32ToBf16(F(0x3f808001u)), 0x3f81);
  EXPECT_EQ(Fp32ToBf16(F(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(F(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to Inf
  EXPECT_EQ(Fp32ToBf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(Fp32ToBf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(Fp32ToBf16(F(0x7f800001u)), 0x7fc0);  // sNaN stays NaN (not Inf)
  EXPECT_EQ(Fp32ToBf16(F(0xffc00000u)), 0xffc0);
  EXPECT_EQ(Fp32ToBf16(F(0x00000001u)), 0x0000);  // tiny subnormal -> +0
  EXPECT_EQ(Fp32ToBf16(F(0x00018000u)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(Fp32ToBf16(-0.0f), 0x8000);
  EXPECT_EQ(Bf16ToFp32(0x3f80), 1.0f);
  EXPECT_EQ(Bits(Bf16ToFp32(0x0001)), 0x00010000u);
  EXPECT_TRUE(std::isnan(Bf16ToFp32(0x7fc0)));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Bf16ToFp32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(Fp32ToBf16(f), h);
    }
  }
}

// ggml quantize_row_q8_0_ref on x[j] = 1: amax 1, d = 1/127 (fp16 0x2008), q = 127.
TEST(TensorTypesTest, Q8_0KnownBlocks) {
  std::vector<float> x(32, 1.0f);
  BlockQ8_0 blk{};
  QuantizeRow(TensorType::kQ8_0, x.data(), reinterpret_cast<std::byte*>(&blk), 32);
  EXPECT_EQ(blk.d, 0x2008);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(blk.qs[j], 127);
  // x[j] = j - 16: amax 16, d = 16/127 (fp16 0x3008), id = 127/16, q = round((j-16)*7.9375).
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  QuantizeRow(TensorType::kQ8_0, x.data(), reinterpret_cast<std::byte*>(&blk), 32);
  EXPECT_EQ(blk.d, 0x3008);
  EXPECT_EQ(blk.qs[0], -127);
  EXPECT_EQ(blk.qs[16], 0);
  EXPECT_EQ(blk.qs[17], 8);    // 7.9375
  EXPECT_EQ(blk.qs[18], 16);   // 15.875
  EXPECT_EQ(blk.qs[31], 119);  // 119.0625
  EXPECT_EQ(blk.qs[15], -8);
  // All zeros: d = 0, q = 0 (no division by zero).
  std::fill(x.begin(), x.end(), 0.0f);
  QuantizeRow(TensorType::kQ8_0, x.data(), reinterpret_cast<std::byte*>(&blk), 32);
  EXPECT_EQ(blk.d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(blk.qs[j], 0);
  // Dequantize a hand-made block: d = 0.5 (0x3800).
  blk.d = 0x3800;
  for (int j = 0; j < 32; ++j) blk.qs[j] = static_cast<int8_t>(j - 16);
  float y[32];
  DequantizeRow(TensorType::kQ8_0, reinterpret_cast<const std::byte*>(&blk), y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 0.5f * static_cast<float>(j - 16));
}

// ggml quantize_row_q4_0_ref on x[j] = j - 16: max (signed) -16, d = 2, id = 0.5,
// q = min(15, (int8)(x/2 + 8.5)); element j in the low nibble, j + 16 in the high nibble.
TEST(TensorTypesTest, Q4_0KnownBlocks) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  BlockQ4_0 blk{};
  QuantizeRow(TensorType::kQ4_0, x.data(), reinterpret_cast<std::byte*>(&blk), 32);
  EXPECT_EQ(blk.d, 0x4000);  // 2.0
  EXPECT_EQ(blk.qs[0], 0x80);
  EXPECT_EQ(blk.qs[1], 0x91);
  EXPECT_EQ(blk.qs[15], 0xf8);  // high: 15/2 + 8.5 = 16 -> clamped to 15
  for (int j = 0; j < 16; ++j) {
    const int lo = (j + 1) / 2;
    const int hi = std::min(15, 8 + (j + 1) / 2);
    EXPECT_EQ(blk.qs[j], lo | (hi << 4)) << j;
  }
  float y[32];
  DequantizeRow(TensorType::kQ4_0, reinterpret_cast<const std::byte*>(&blk), y, 32);
  EXPECT_EQ(y[0], -16.0f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[31], 14.0f);
  // Largest magnitude positive: d negative (max / -8).
  for (int j = 0; j < 32; ++j) x[j] = j == 5 ? 4.0f : 0.0f;
  QuantizeRow(TensorType::kQ4_0, x.data(), reinterpret_cast<std::byte*>(&blk), 32);
  EXPECT_EQ(blk.d, 0xb800);        // -0.5
  EXPECT_EQ(blk.qs[5] & 0x0f, 0);  // 4 * -2 + 8.5 = 0.5 -> 0; deq = -0.5 * -8 = 4
  EXPECT_EQ(blk.qs[0], 0x88);
  DequantizeRow(TensorType::kQ4_0, reinterpret_cast<const std::byte*>(&blk), y, 32);
  EXPECT_EQ(y[5], 4.0f);
  EXPECT_EQ(y[0], 0.0f);
}

TEST(TensorTypesTest, QuantizeDequantizeErrorBounds) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t n = int64_t{32} * 64;
  std::vector<float> x(n), y(n);
  for (float& v : x) v = dist(rng) * 3.0f;
  x[100] = 40.0f;  // an outlier block
  std::vector<std::byte> q8(*RowBytes(TensorType::kQ8_0, n));
  std::vector<std::byte> q4(*RowBytes(TensorType::kQ4_0, n));
  QuantizeRow(TensorType::kQ8_0, x.data(), q8.data(), n);
  DequantizeRow(TensorType::kQ8_0, q8.data(), y.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    // Half a step plus the fp16 rounding of the scale (127 steps * 2^-11 relative).
    const float bound = amax / 127.0f / 2.0f + amax * 0x1p-11f + 1e-6f;
    for (int j = 0; j < 32; ++j) ASSERT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound);
  }
  QuantizeRow(TensorType::kQ4_0, x.data(), q4.data(), n);
  DequantizeRow(TensorType::kQ4_0, q4.data(), y.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    // One full step (the clamp at 15 can cost a whole step at the opposite extreme).
    const float bound = amax / 8.0f * (1.0f + 0x1p-10f) + 1e-6f;
    for (int j = 0; j < 32; ++j) ASSERT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound);
  }
  // Float types round-trip through their own precision.
  std::vector<std::byte> h(n * 2);
  QuantizeRow(TensorType::kF16, x.data(), h.data(), n);
  DequantizeRow(TensorType::kF16, h.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_LE(std::fabs(x[i] - y[i]), std::fabs(x[i]) * 0x1p-11f);
  QuantizeRow(TensorType::kBF16, x.data(), h.data(), n);
  DequantizeRow(TensorType::kBF16, h.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_LE(std::fabs(x[i] - y[i]), std::fabs(x[i]) * 0x1p-8f);
  std::vector<std::byte> f(n * 4);
  QuantizeRow(TensorType::kF32, x.data(), f.data(), n);
  DequantizeRow(TensorType::kF32, f.data(), y.data(), n);
  EXPECT_EQ(x, y);
}

TEST(TensorTypesTest, NonFiniteInputsDoNotCrash) {
  std::vector<float> x(32, 1.0f);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[4] = std::numeric_limits<float>::infinity();
  std::vector<std::byte> out(34);
  QuantizeRow(TensorType::kQ8_0, x.data(), out.data(), 32);
  QuantizeRow(TensorType::kQ4_0, x.data(), out.data(), 32);
  SUCCEED();
}

TEST(TensorTypesTest, UnalignedSource) {
  std::vector<std::byte> buf(1 + 34 * 2);
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>(i) * 0.25f - 8.0f;
  QuantizeRow(TensorType::kQ8_0, x.data(), buf.data() + 1, 64);
  std::vector<float> y(64);
  DequantizeRow(TensorType::kQ8_0, buf.data() + 1, y.data(), 64);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(x[i], y[i], 0.05f);
}

}  // namespace
}  // namespace ari::runtime
