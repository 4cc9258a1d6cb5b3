// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: hand-built blocks whose expected values come from the
// format definitions (written out again here, independently of runtime/core), so a wrong
// nibble order, high-bit position or scale index fails. Every block has several distinct
// sub-block scales and mins, and quants that differ between elements.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/core/kquants.h"
#include "runtime/core/tensor_types.h"

namespace ari::runtime {
namespace {

// fp16 bits of a value that fp16 holds exactly (checked).
uint16_t H(float f) {
  const uint16_t h = Fp32ToFp16(f);
  EXPECT_EQ(Fp16ToFp32(h), f) << f << " is not exact in fp16";
  return h;
}

template <class Block>
std::vector<float> Dequant(TensorType t, const std::vector<Block>& blocks, int64_t n) {
  // One byte of offset: DequantizeRow must not assume alignment.
  std::vector<std::byte> raw(1 + blocks.size() * sizeof(Block));
  std::memcpy(raw.data() + 1, blocks.data(), blocks.size() * sizeof(Block));
  std::vector<float> out(static_cast<size_t>(n), -999.0f);
  DequantizeRow(t, raw.data() + 1, out.data(), n);
  return out;
}

// Element j of a 32-block: low nibble of qs[j] (j < 16) or high nibble of qs[j - 16].
void PutNibble32(uint8_t* qs, int j, int q) {
  if (j < 16) {
    qs[j] = static_cast<uint8_t>((qs[j] & 0xf0) | (q & 15));
  } else {
    qs[j - 16] = static_cast<uint8_t>((qs[j - 16] & 0x0f) | ((q & 15) << 4));
  }
}

TEST(QuantBlocksTest, Q4_1) {
  std::vector<BlockQ4_1> b(2);
  const float d[2] = {0.5f, 0.0625f}, m[2] = {-1.25f, 3.0f};
  std::vector<float> want(64);
  for (int k = 0; k < 2; ++k) {
    b[k].d = H(d[k]);
    b[k].m = H(m[k]);
    for (int j = 0; j < 32; ++j) {
      const int q = (j * 7 + 3 + k) % 16;
      PutNibble32(b[k].qs, j, q);
      want[32 * k + j] = d[k] * static_cast<float>(q) + m[k];
    }
  }
  const auto got = Dequant(TensorType::kQ4_1, b, 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[i], want[i]) << i;
}

// Q5_0 / Q5_1: the fifth bit of element j is bit j of qh, a little-endian uint32.
void PutQ5(uint8_t* qs, uint8_t* qh, int j, int q) {
  PutNibble32(qs, j, q);
  if (q & 16) qh[j / 8] = static_cast<uint8_t>(qh[j / 8] | (1u << (j % 8)));
}

TEST(QuantBlocksTest, Q5_0) {
  std::vector<BlockQ5_0> b(2);
  const float d[2] = {0.25f, -2.0f};
  std::vector<float> want(64);
  for (int k = 0; k < 2; ++k) {
    b[k].d = H(d[k]);
    for (int j = 0; j < 32; ++j) {
      const int q = (j * 11 + 5 + 3 * k) % 32;  // covers 0..31: every high-bit position
      PutQ5(b[k].qs, b[k].qh, j, q);
      want[32 * k + j] = d[k] * static_cast<float>(q - 16);
    }
  }
  const auto got = Dequant(TensorType::kQ5_0, b, 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[i], want[i]) << i;
  EXPECT_EQ(got[0], 0.25f * (5 - 16));  // q = 5: high bit clear
  EXPECT_EQ(got[1], 0.25f * (16 - 16));
  EXPECT_EQ(got[3], 0.25f * (38 % 32 - 16));
}

TEST(QuantBlocksTest, Q5_1) {
  std::vector<BlockQ5_1> b(2);
  const float d[2] = {0.125f, 1.5f}, m[2] = {0.75f, -20.0f};
  std::vector<float> want(64);
  for (int k = 0; k < 2; ++k) {
    b[k].d = H(d[k]);
    b[k].m = H(m[k]);
    for (int j = 0; j < 32; ++j) {
      const int q = (j * 13 + 1 + k) % 32;
      PutQ5(b[k].qs, b[k].qh, j, q);
      want[32 * k + j] = d[k] * static_cast<float>(q) + m[k];
    }
  }
  const auto got = Dequant(TensorType::kQ5_1, b, 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[i], want[i]) << i;
}

// Q4_K / Q5_K 12-byte scales, packed from the definition: bytes 0-3 hold sc[0..3] in their
// low 6 bits and the top 2 bits of sc[4..7]; bytes 4-7 m[0..3] and the top 2 bits of
// m[4..7]; bytes 8-11 the low 4 bits of sc[4..7] (low nibble) and m[4..7] (high nibble).
void PackScales(const int sc[8], const int m[8], uint8_t out[12]) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

// Six-bit values with the top bits set in several places (>= 16, >= 32, 63).
constexpr int kSc[2][8] = {{3, 17, 40, 63, 5, 22, 48, 61}, {63, 1, 32, 16, 47, 9, 30, 58}};
constexpr int kMin[2][8] = {{0, 9, 33, 62, 12, 27, 55, 63}, {44, 2, 18, 63, 1, 36, 20, 15}};

TEST(QuantBlocksTest, KScaleMinUnpacksEverySubBlock) {
  for (int k = 0; k < 2; ++k) {
    uint8_t s[12];
    PackScales(kSc[k], kMin[k], s);
    for (int j = 0; j < 8; ++j) {
      int sc = -1, m = -1;
      KScaleMin(s, j, &sc, &m);
      EXPECT_EQ(sc, kSc[k][j]) << k << " " << j;
      EXPECT_EQ(m, kMin[k][j]) << k << " " << j;
    }
  }
}

// Element e (0..255) of a Q4_K / Q5_K block: chunk c = e / 64; l = e % 64; low nibble of
// qs[32c + l] when l < 32, else high nibble of qs[32c + l - 32]. Its sub-block is e / 32.
void PutNibbleK(uint8_t* qs, int e, int q) {
  const int c = e / 64, l = e % 64;
  uint8_t& byte = qs[32 * c + (l % 32)];
  byte = l < 32 ? static_cast<uint8_t>((byte & 0xf0) | (q & 15))
                : static_cast<uint8_t>((byte & 0x0f) | ((q & 15) << 4));
}

TEST(QuantBlocksTest, Q4_K) {
  std::vector<BlockQ4_K> b(2);
  const float d[2] = {0.5f, 0.015625f}, dmin[2] = {0.25f, 0.125f};
  std::vector<float> want(512);
  for (int k = 0; k < 2; ++k) {
    b[k].d = H(d[k]);
    b[k].dmin = H(dmin[k]);
    PackScales(kSc[k], kMin[k], b[k].scales);
    for (int e = 0; e < 256; ++e) {
      const int q = (e * 5 + e / 32 + k) % 16;
      PutNibbleK(b[k].qs, e, q);
      const int j = e / 32;
      want[256 * k + e] = d[k] * static_cast<float>(kSc[k][j]) * static_cast<float>(q) -
                          dmin[k] * static_cast<float>(kMin[k][j]);
    }
  }
  const auto got = Dequant(TensorType::kQ4_K, b, 512);
  for (int i = 0; i < 512; ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  // Two spot values by hand: e = 33 (q = 166 % 16 = 6, sub-block 1: sc 17, m 9) and
  // e = 250 (q = 1257 % 16 = 9, sub-block 7: sc 61, m 63).
  EXPECT_FLOAT_EQ(got[33], 0.5f * 17 * 6 - 0.25f * 9);
  EXPECT_FLOAT_EQ(got[250], 0.5f * 61 * 9 - 0.25f * 63);
}

TEST(QuantBlocksTest, Q5_K) {
  std::vector<BlockQ5_K> b(2);
  const float d[2] = {0.25f, 2.0f}, dmin[2] = {0.5f, 0.0625f};
  std::vector<float> want(512);
  for (int k = 0; k < 2; ++k) {
    b[k].d = H(d[k]);
    b[k].dmin = H(dmin[k]);
    PackScales(kSc[k], kMin[k], b[k].scales);
    for (int e = 0; e < 256; ++e) {
      const int q = (e * 7 + e / 32 + 3 * k) % 32;
      PutNibbleK(b[k].qs, e, q);
      // Fifth bit: bit (e / 32) of qh[e % 32].
      if (q & 16) b[k].qh[e % 32] = static_cast<uint8_t>(b[k].qh[e % 32] | (1u << (e / 32)));
      const int j = e / 32;
      want[256 * k + e] = d[k] * static_cast<float>(kSc[k][j]) * static_cast<float>(q) -
                          dmin[k] * static_cast<float>(kMin[k][j]);
    }
  }
  const auto got = Dequant(TensorType::kQ5_K, b, 512);
  for (int i = 0; i < 512; ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  // e = 200: q = (1400 + 6) % 32 = 30 (high bit set), sub-block 6: sc 48, m 55.
  EXPECT_FLOAT_EQ(got[200], 0.25f * 48 * 30 - 0.5f * 55);
}

// Element e of a Q6_K block: half h = e / 128, r = e % 128, g = r / 32, l = r % 32.
// Low 4 bits: g 0 -> ql[64h + l] low, 1 -> ql[64h + 32 + l] low, 2 -> ql[64h + l] high,
// 3 -> ql[64h + 32 + l] high. High 2 bits: qh[32h + l] bits 2g, 2g + 1. Scale sc[e / 16].
void PutQ6(BlockQ6_K& b, int e, int q) {
  const int h = e / 128, r = e % 128, g = r / 32, l = r % 32;
  uint8_t& lo = b.ql[64 * h + l + ((g & 1) ? 32 : 0)];
  lo = g < 2 ? static_cast<uint8_t>((lo & 0xf0) | (q & 15))
             : static_cast<uint8_t>((lo & 0x0f) | ((q & 15) << 4));
  b.qh[32 * h + l] = static_cast<uint8_t>(b.qh[32 * h + l] | (((q >> 4) & 3) << (2 * g)));
}

TEST(QuantBlocksTest, Q6_K) {
  std::vector<BlockQ6_K> b(2);
  const float d[2] = {0.125f, -0.5f};
  std::vector<float> want(512);
  for (int k = 0; k < 2; ++k) {
    b[k].d = H(d[k]);
    for (int s = 0; s < 16; ++s) b[k].scales[s] = static_cast<int8_t>(s * 9 - 70 + 5 * k);
    for (int e = 0; e < 256; ++e) {
      const int q = (e * 7 + e / 16 + k) % 64;
      PutQ6(b[k], e, q);
      const int8_t scale = b[k].scales[e / 16];
      want[256 * k + e] = d[k] * static_cast<float>(scale) * static_cast<float>(q - 32);
    }
  }
  const auto got = Dequant(TensorType::kQ6_K, b, 512);
  for (int i = 0; i < 512; ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  // e = 100: q = (700 + 6) % 64 = 2, scale index 6: 6 * 9 - 70 = -16.
  EXPECT_FLOAT_EQ(got[100], 0.125f * -16 * (2 - 32));
}

TEST(QuantBlocksTest, NamesAndSizes) {
  struct Case {
    TensorType t;
    uint32_t raw;
    const char* name;
    int64_t block, bytes;
  };
  const Case cases[] = {
      {TensorType::kQ4_1, 3, "Q4_1", 32, 20},    {TensorType::kQ5_0, 6, "Q5_0", 32, 22},
      {TensorType::kQ5_1, 7, "Q5_1", 32, 24},    {TensorType::kQ4_K, 12, "Q4_K", 256, 144},
      {TensorType::kQ5_K, 13, "Q5_K", 256, 176}, {TensorType::kQ6_K, 14, "Q6_K", 256, 210},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(static_cast<uint32_t>(c.t), c.raw);
    EXPECT_TRUE(IsSupportedTensorType(c.raw)) << c.name;
    EXPECT_EQ(TensorTypeName(c.t), c.name);
    EXPECT_EQ(BlockSize(c.t), c.block) << c.name;
    EXPECT_EQ(BlockBytes(c.t), c.bytes) << c.name;
    EXPECT_FALSE(CanQuantize(c.t)) << c.name;
    EXPECT_EQ(*RowBytes(c.t, 0), 0u);
    EXPECT_EQ(*RowBytes(c.t, c.block), static_cast<uint64_t>(c.bytes));
    EXPECT_EQ(*RowBytes(c.t, 2048), static_cast<uint64_t>(2048 / c.block * c.bytes));
    // A row that is not whole blocks is an error naming the block size and the type.
    for (int64_t n : {c.block / 2, c.block + 16, c.block * 3 - 1, int64_t{172}}) {
      auto r = RowBytes(c.t, n);
      ASSERT_FALSE(r) << c.name << " " << n;
      EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
      EXPECT_NE(
          r.error().message.find("multiple of " + std::to_string(c.block) + " for type " + c.name),
          std::string::npos)
          << r.error().message;
    }
  }
  EXPECT_EQ(*TensorBytes(TensorType::kQ4_K, std::vector<int64_t>{2048, 5632}), 8u * 144u * 5632u);
  EXPECT_TRUE(CanQuantize(TensorType::kQ4_0));
  EXPECT_TRUE(CanQuantize(TensorType::kBF16));
}

}  // namespace
}  // namespace ari::runtime
