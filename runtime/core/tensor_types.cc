#include "runtime/core/tensor_types.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace ari::runtime {

static_assert(std::endian::native == std::endian::little, "GGUF data is little-endian");

std::string_view TensorTypeName(TensorType t) {
  switch (t) {
    case TensorType::kF32: return "F32";
    case TensorType::kF16: return "F16";
    case TensorType::kQ4_0: return "Q4_0";
    case TensorType::kQ4_1: return "Q4_1";
    case TensorType::kQ5_0: return "Q5_0";
    case TensorType::kQ5_1: return "Q5_1";
    case TensorType::kQ8_0: return "Q8_0";
    case TensorType::kQ4_K: return "Q4_K";
    case TensorType::kQ5_K: return "Q5_K";
    case TensorType::kQ6_K: return "Q6_K";
    case TensorType::kBF16: return "BF16";
  }
  return "unknown";
}

bool IsSupportedTensorType(uint32_t raw) {
  switch (static_cast<TensorType>(raw)) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ8_0:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kBF16: return true;
  }
  return false;
}

int64_t BlockSize(TensorType t) {
  switch (t) {
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ8_0: return kQuantGroup;
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K: return kSuperBlock;
    default: return 1;
  }
}

int64_t BlockBytes(TensorType t) {
  switch (t) {
    case TensorType::kF32: return 4;
    case TensorType::kF16:
    case TensorType::kBF16: return 2;
    case TensorType::kQ4_0: return sizeof(BlockQ4_0);
    case TensorType::kQ4_1: return sizeof(BlockQ4_1);
    case TensorType::kQ5_0: return sizeof(BlockQ5_0);
    case TensorType::kQ5_1: return sizeof(BlockQ5_1);
    case TensorType::kQ8_0: return sizeof(BlockQ8_0);
    case TensorType::kQ4_K: return sizeof(BlockQ4_K);
    case TensorType::kQ5_K: return sizeof(BlockQ5_K);
    case TensorType::kQ6_K: return sizeof(BlockQ6_K);
  }
  return 0;
}

Result<uint64_t> RowBytes(TensorType t, int64_t n) {
  if (!IsSupportedTensorType(static_cast<uint32_t>(t))) {
    return MakeError(ErrorCode::kUnsupported,
                     "unsupported tensor type " + std::to_string(static_cast<uint32_t>(t)));
  }
  if (n < 0) {
    return MakeError(ErrorCode::kInvalidArgument, "negative row length " + std::to_string(n));
  }
  const int64_t bs = BlockSize(t);
  if (n % bs != 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "row length " + std::to_string(n) + " is not a multiple of " +
                         std::to_string(bs) + " for type " + std::string(TensorTypeName(t)));
  }
  const uint64_t blocks = static_cast<uint64_t>(n / bs);
  const uint64_t bb = static_cast<uint64_t>(BlockBytes(t));
  if (blocks > std::numeric_limits<uint64_t>::max() / bb) {
    return MakeError(ErrorCode::kInvalidArgument, "row size overflows 64 bits");
  }
  return blocks * bb;
}

Result<uint64_t> TensorBytes(TensorType t, std::span<const int64_t> ne) {
  if (ne.empty() || ne.size() > 4) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tensor must have 1..4 dims, got " + std::to_string(ne.size()));
  }
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] <= 0) {
      return MakeError(ErrorCode::kInvalidArgument, "dim " + std::to_string(i) + " is " +
                                                        std::to_string(ne[i]) + " (must be > 0)");
    }
  }
  auto row = RowBytes(t, ne[0]);
  if (!row) return row;
  uint64_t total = *row;
  for (size_t i = 1; i < ne.size(); ++i) {
    const uint64_t d = static_cast<uint64_t>(ne[i]);
    if (total != 0 && d > std::numeric_limits<uint64_t>::max() / total) {
      return MakeError(ErrorCode::kInvalidArgument, "tensor size overflows 64 bits");
    }
    total *= d;
  }
  return total;
}

float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in fp32.
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t Fp32ToFp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {
    if (abs == 0x7f800000u) return sign | 0x7c00u;                          // Inf
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // quiet NaN
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to Inf
  if (abs < 0x38800000u) {                        // below 2^-14: fp16 subnormal or zero
    if (abs <= 0x33000000u) return sign;          // <= 2^-25 rounds (to even) to zero
    const uint32_t e = abs >> 23;                 // 102..112
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // value / 2^-24 = mant >> shift
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);  // q == 0x400 is the smallest normal
  }
  const uint32_t r = abs - 0x38000000u;  // rebias exponent 127 -> 15
  uint32_t q = r >> 13;
  const uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

float Bf16ToFp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t Fp32ToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

namespace {

// Float -> small integer without UB on NaN/Inf (inputs are clamped first).
int ClampToInt(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;  // also NaN
  if (v > static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

void QuantizeBlockQ8_0(const float* x, BlockQ8_0* y) {
  float amax = 0.0f;
  for (int j = 0; j < kQuantGroup; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = Fp32ToFp16(d);
  for (int j = 0; j < kQuantGroup; ++j) {
    y->qs[j] = static_cast<int8_t>(ClampToInt(std::round(x[j] * id), -128, 127));
  }
}

void QuantizeBlockQ4_0(const float* x, BlockQ4_0* y) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kQuantGroup; ++j) {
    const float v = x[j];
    if (amax < std::fabs(v)) {
      amax = std::fabs(v);
      max = v;
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y->d = Fp32ToFp16(d);
  for (int j = 0; j < kQuantGroup / 2; ++j) {
    // ggml: MIN(15, (int8_t)(x * id + 8.5f)), the cast truncates toward zero.
    const int q0 = std::min(15, ClampToInt(x[j] * id + 8.5f, 0, 127));
    const int q1 = std::min(15, ClampToInt(x[j + kQuantGroup / 2] * id + 8.5f, 0, 127));
    y->qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// Q4_1, Q5_0, Q5_1: 32 elements; element j < 16 is the low nibble of qs[j], element j + 16
// its high nibble; the fifth bit (Q5_*) of element j is bit j of qh (little-endian).
// x = d * q + m (Q4_1, Q5_1) or d * (q - 16) (Q5_0).
void DequantizeBlock32(TensorType type, const std::byte* src, float* out) {
  const bool has_min = type != TensorType::kQ5_0;  // Q4_1, Q5_1: fp16 m after d
  const bool has_qh = type != TensorType::kQ4_1;   // Q5_0, Q5_1: 4 bytes qh before qs
  uint16_t d_bits = 0, m_bits = 0;
  uint32_t qh = 0;
  uint8_t qs[16];
  size_t at = 0;
  std::memcpy(&d_bits, src, 2);
  at += 2;
  if (has_min) {
    std::memcpy(&m_bits, src + at, 2);
    at += 2;
  }
  if (has_qh) {
    std::memcpy(&qh, src + at, 4);  // little-endian (static_assert above)
    at += 4;
  }
  std::memcpy(qs, src + at, sizeof qs);
  const float d = Fp16ToFp32(d_bits);
  const float m = Fp16ToFp32(m_bits);
  for (int j = 0; j < kQuantGroup; ++j) {
    const int nibble = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
    const int q = nibble | static_cast<int>(((qh >> j) & 1u) << 4);
    out[j] = has_min ? d * static_cast<float>(q) + m : d * static_cast<float>(q - 16);
  }
}

}  // namespace

bool CanQuantize(TensorType t) {
  switch (t) {
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
    case TensorType::kQ8_0:
    case TensorType::kQ4_0: return true;
    default: return false;
  }
}

void DequantizeRow(TensorType type, const std::byte* src, float* dst, int64_t n) {
  switch (type) {
    case TensorType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case TensorType::kF16:
    case TensorType::kBF16: {
      const bool f16 = type == TensorType::kF16;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = 0;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = f16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
      }
      return;
    }
    case TensorType::kQ8_0: {
      for (int64_t b = 0; b < n / kQuantGroup; ++b) {
        BlockQ8_0 blk{};
        std::memcpy(&blk, src + b * sizeof(BlockQ8_0), sizeof blk);
        const float d = Fp16ToFp32(blk.d);
        float* out = dst + b * kQuantGroup;
        for (int j = 0; j < kQuantGroup; ++j) out[j] = d * static_cast<float>(blk.qs[j]);
      }
      return;
    }
    case TensorType::kQ4_0: {
      for (int64_t b = 0; b < n / kQuantGroup; ++b) {
        BlockQ4_0 blk{};
        std::memcpy(&blk, src + b * sizeof(BlockQ4_0), sizeof blk);
        const float d = Fp16ToFp32(blk.d);
        float* out = dst + b * kQuantGroup;
        for (int j = 0; j < kQuantGroup / 2; ++j) {
          out[j] = d * static_cast<float>((blk.qs[j] & 0x0f) - 8);
          out[j + kQuantGroup / 2] = d * static_cast<float>((blk.qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1: {
      const int64_t bb = BlockBytes(type);
      for (int64_t b = 0; b < n / kQuantGroup; ++b) {
        DequantizeBlock32(type, src + b * bb, dst + b * kQuantGroup);
      }
      return;
    }
    case TensorType::kQ4_K: DequantizeRowQ4K(src, dst, n); return;
    case TensorType::kQ5_K: DequantizeRowQ5K(src, dst, n); return;
    case TensorType::kQ6_K: DequantizeRowQ6K(src, dst, n); return;
  }
}

void QuantizeRow(TensorType type, const float* src, std::byte* dst, int64_t n) {
  switch (type) {
    case TensorType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case TensorType::kF16:
    case TensorType::kBF16: {
      const bool f16 = type == TensorType::kF16;
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = f16 ? Fp32ToFp16(src[i]) : Fp32ToBf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    }
    case TensorType::kQ8_0: {
      for (int64_t b = 0; b < n / kQuantGroup; ++b) {
        BlockQ8_0 blk{};
        QuantizeBlockQ8_0(src + b * kQuantGroup, &blk);
        std::memcpy(dst + b * sizeof(BlockQ8_0), &blk, sizeof blk);
      }
      return;
    }
    case TensorType::kQ4_0: {
      for (int64_t b = 0; b < n / kQuantGroup; ++b) {
        BlockQ4_0 blk{};
        QuantizeBlockQ4_0(src + b * kQuantGroup, &blk);
        std::memcpy(dst + b * sizeof(BlockQ4_0), &blk, sizeof blk);
      }
      return;
    }
    default: return;  // !CanQuantize(type): ARI reads these types, it does not write them
  }
}

}  // namespace ari::runtime
