// Scalar matmul kernels: the specification of the packed formats' arithmetic.
//
// W8A16: per group g, isum = sum_j q[r][g][j] * a[g].qs[j] (exact int32: |isum| <= 128 *
//   32767 * 32 < 2^31), then acc = fma(float(isum), dw[r][g] * da[g], acc) in group order
//   starting at acc = 0. SIMD paths do exactly this, so W8A16 results are bit-identical
//   across tiers (x86 and ARM).
// W4A8: per group g, isum = sum_j q[r][g][j] * a[g][j] (exact int32), then
//   acc = fma(float(isum - 8 * sum[g]), dw[r][g] * da[g], acc) in group order starting at
//   acc = 0. SIMD paths do exactly this, so W4A8 results are bit-identical across tiers.
#include <cmath>
#include <cstring>

#include "runtime/core/tensor_types.h"
#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels::internal {
namespace {

// Quant j (0..31) of row i (0..7) from a W4 tile's nibble bytes (see layout.h).
inline int W4Quant(const std::byte* nibbles, int i, int j) {
  const int jj = j & 15;
  const auto b = static_cast<unsigned>(nibbles[32 * (jj >> 2) + 4 * i + (jj & 3)]);
  return static_cast<int>(j < 16 ? (b & 0x0fu) : (b >> 4));
}

}  // namespace

namespace scalar {

void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  const int64_t groups = Groups(w.cols);
  const float* da = Q16Scales(x, groups);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* block = w.data + b * groups * kW8TileBytes;
    float acc[kRowInterleave] = {};
    for (int64_t g = 0; g < groups; ++g) {
      const std::byte* tile = block + g * kW8TileBytes;
      const BlockQ16A& a = x[g];
      for (int i = 0; i < kRowInterleave; ++i) {
        const auto* q = reinterpret_cast<const int8_t*>(tile + 16 + int64_t{32} * i);
        int32_t isum = 0;
        for (int j = 0; j < kGroup; ++j) isum += int32_t{q[j]} * a.qs[j];
        const float dw = Fp16ToFp32(LoadU16(tile + int64_t{2} * i));
        acc[i] = std::fma(static_cast<float>(isum), dw * da[g], acc[i]);
      }
    }
    for (int i = 0; i < kRowInterleave; ++i) {
      const int64_t r = b * kRowInterleave + i;
      if (r >= r0 && r < r1) y[r] = acc[i];
    }
  }
}

void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1) {
  for (int64_t t = 0; t < n; ++t) scalar::GemvW8A16(w, x + t * ldx, y + t * ldy, r0, r1);
}

void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  const int64_t groups = Groups(w.cols);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* block = w.data + b * groups * kW4TileBytes;
    float acc[kRowInterleave] = {};
    for (int64_t g = 0; g < groups; ++g) {
      const std::byte* tile = block + g * kW4TileBytes;
      const BlockQ8A& a = x[g];
      for (int i = 0; i < kRowInterleave; ++i) {
        int32_t isum = 0;
        for (int j = 0; j < kGroup; ++j) isum += W4Quant(tile + 16, i, j) * a.qs[j];
        const float dw = Fp16ToFp32(LoadU16(tile + int64_t{2} * i));
        acc[i] = std::fma(static_cast<float>(isum - 8 * a.sum), dw * a.d, acc[i]);
      }
    }
    for (int i = 0; i < kRowInterleave; ++i) {
      const int64_t r = b * kRowInterleave + i;
      if (r >= r0 && r < r1) y[r] = acc[i];
    }
  }
}

void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1) {
  for (int64_t t = 0; t < n; ++t) scalar::GemvW4A8(w, x + t * ldx, y + t * ldy, r0, r1);
}

}  // namespace scalar
}  // namespace ari::runtime::kernels::internal
