// ggml tensor types used by ARI, with quant blocks byte-compatible with GGUF.
// K-quants (Q4_K, Q5_K, Q6_K: 256-element super-blocks) are in kquants.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "runtime/core/error.h"
#include "runtime/core/kquants.h"

namespace ari::runtime {

// Numbered as ggml_type on disk.
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

inline constexpr int kQuantGroup = 32;  // QK8_0 == QK4_0 == QK4_1 == QK5_0 == QK5_1 == 32

// GGUF Q8_0 block: fp16 scale d, 32 int8 quants; x = d * q.
struct BlockQ8_0 {
  uint16_t d;  // fp16 bits
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must match ggml (34 bytes)");

// GGUF Q4_0 block: fp16 scale d, 32 4-bit quants; element j < 16 is the low nibble
// of qs[j], element j + 16 the high nibble of qs[j]; x = d * (q - 8).
struct BlockQ4_0 {
  uint16_t d;  // fp16 bits
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must match ggml (18 bytes)");

// GGUF Q4_1 block: fp16 scale d and offset m, nibbles as Q4_0; x = d * q + m.
struct BlockQ4_1 {
  uint16_t d;  // fp16 bits
  uint16_t m;  // fp16 bits
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block must match ggml (20 bytes)");

// GGUF Q5_0 block: fp16 scale d; the low 4 bits as Q4_0, the fifth bit of element j is bit j
// of qh read as a little-endian uint32; x = d * (q - 16).
struct BlockQ5_0 {
  uint16_t d;  // fp16 bits
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block must match ggml (22 bytes)");

// GGUF Q5_1 block: fp16 d and m, bits as Q5_0; x = d * q + m.
struct BlockQ5_1 {
  uint16_t d;  // fp16 bits
  uint16_t m;  // fp16 bits
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block must match ggml (24 bytes)");

std::string_view TensorTypeName(TensorType t);
// Known type? (values read from disk are checked with this before use)
bool IsSupportedTensorType(uint32_t raw);
// Elements per block (1 for float types, 32 for Q4_0..Q8_0, 256 for K-quants) and bytes
// per block.
int64_t BlockSize(TensorType t);
int64_t BlockBytes(TensorType t);
// Bytes of one row of n elements; error if n is not a multiple of the block size.
Result<uint64_t> RowBytes(TensorType t, int64_t n);
// Bytes of a whole tensor with dims ne (ne[0] = row length, 1..4 dims, each > 0);
// errors on a bad row length, non-positive dims or 64-bit overflow.
Result<uint64_t> TensorBytes(TensorType t, std::span<const int64_t> ne);

// Scalar conversions (exact IEEE semantics, round-to-nearest-even).
float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToFp16(float f);
float Bf16ToFp32(uint16_t h);
uint16_t Fp32ToBf16(float f);

// Dequantize n elements of `type` starting at `src` (n must be a multiple of the block size;
// a trailing partial block is ignored). `src` need not be aligned. Every supported type.
void DequantizeRow(TensorType type, const std::byte* src, float* dst, int64_t n);
// True for the types QuantizeRow writes: F32, F16, BF16, Q8_0, Q4_0.
bool CanQuantize(TensorType t);
// Quantize n floats into `type` (same layout as ggml's reference quantizers); a type
// CanQuantize refuses leaves dst untouched.
void QuantizeRow(TensorType type, const float* src, std::byte* dst, int64_t n);

}  // namespace ari::runtime
