// AVX2 + FMA + F16C matmul kernels (see layout.h for the packed formats and
// scalar_matmul.cc for the arithmetic they implement).
//
// W8A16: per row and group, 8 fp32 lanes form s = sum q * x (mul, then 3 fma in element
//   order), then acc = fma(s, d, acc) over groups, then a fixed horizontal sum; GEMV and GEMM use
//   the same per-(row, token) operation sequence, so GEMM output is bit-identical to N GEMVs.
// W4A8: per row block and group, maddubs (u8 weights x s8 activations) over broadcast 4-byte
//   activation quads gives, per row, the exact group dot in one int32 lane; then
//   fma(float(isum - 8 sum), d_w * d_a, acc): bit-identical to the scalar reference.
// GEMV: software prefetch a few tiles ahead (measured +15-25 % W4A8 streaming, see
// docs/benchmarks.md "Profile" 2); prefetches never fault, so reading past the end is safe.
// The GEMMs (prefill) live in gemm_w8a16_avx2.cc and gemm_w4a8_avx2.cc.
#include <immintrin.h>

#include <cstring>

#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/avx2_common.h"

namespace ari::runtime::kernels::internal {
namespace {

// GEMV software prefetch distance (bytes ahead in the row block's tile stream).
constexpr int64_t kW4PrefetchBytes = 8 * kW4TileBytes;
constexpr int64_t kW8PrefetchBytes = 4 * kW8TileBytes;

inline __m256 LoadF16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// ---------------------------------------------------------------- W8A16

// Lane i of the 8 row scales, broadcast (one vpermps instead of a scalar fp16 conversion
// and broadcast per row).
inline __m256 Lane(__m256 v, int i) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(i)); }

void GemvW8A16Avx2(const PackedMatrix& w, const uint16_t* x, float* y, int64_t r0, int64_t r1) {
  const int64_t groups = Groups(w.cols);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* tile = w.data + b * groups * kW8TileBytes;
    __m256 acc[kRowInterleave];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g, tile += kW8TileBytes) {
      const char* pf = reinterpret_cast<const char*>(tile) + kW8PrefetchBytes;
      // 272 B < 5 lines
      for (int l = 0; l < 5; ++l) _mm_prefetch(pf + int64_t{64} * l, _MM_HINT_T0);
      const uint16_t* xg = x + g * kGroup;
      const __m256 x0 = LoadF16x8(xg);
      const __m256 x1 = LoadF16x8(xg + 8);
      const __m256 x2 = LoadF16x8(xg + 16);
      const __m256 x3 = LoadF16x8(xg + 24);
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)));
#pragma GCC unroll 8
      for (int i = 0; i < kRowInterleave; ++i) {
        const std::byte* q = tile + 16 + int64_t{32} * i;
        __m256 s = _mm256_mul_ps(LoadQ8(q), x0);
        s = _mm256_fmadd_ps(LoadQ8(q + 8), x1, s);
        s = _mm256_fmadd_ps(LoadQ8(q + 16), x2, s);
        s = _mm256_fmadd_ps(LoadQ8(q + 24), x3, s);
        acc[i] = _mm256_fmadd_ps(s, Lane(d, i), acc[i]);
      }
    }
    for (int i = 0; i < kRowInterleave; ++i) {
      const int64_t r = b * kRowInterleave + i;
      if (r >= r0 && r < r1) y[r] = Hsum(acc[i]);
    }
  }
}

// ---------------------------------------------------------------- W4A8

inline void UnpackW4(const std::byte* nibbles, __m256i lo[4], __m256i hi[4]) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int v = 0; v < 4; ++v) {
    const __m256i raw =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(nibbles + int64_t{32} * v));
    lo[v] = _mm256_and_si256(raw, mask);
    hi[v] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  }
}

// Per row (lane) of the block: sum_j q[row][j] * a.qs[j] (exact: |int16 partial| <= 8 *
// 2 * 15 * 128 = 30720).
inline __m256i DotW4(const __m256i lo[4], const __m256i hi[4], const BlockQ8A& a) {
  __m256i s = _mm256_maddubs_epi16(lo[0], Bcast4(a.qs));
  s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[0], Bcast4(a.qs + 16)));
  for (int v = 1; v < 4; ++v) {
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(lo[v], Bcast4(a.qs + int64_t{4} * v)));
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[v], Bcast4(a.qs + 16 + int64_t{4} * v)));
  }
  return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

inline __m256 W4Accumulate(__m256i isum, const BlockQ8A& a, __m256 dw, __m256 acc) {
  const __m256i adj = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * a.sum));
  const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(a.d));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(adj), scale, acc);
}

inline __m256 LoadScales(const std::byte* tile) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)));
}

void GemvW4A8Avx2(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  const int64_t groups = Groups(w.cols);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* tile = w.data + b * groups * kW4TileBytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
      const char* pf = reinterpret_cast<const char*>(tile) + kW4PrefetchBytes;
      _mm_prefetch(pf, _MM_HINT_T0);
      _mm_prefetch(pf + 64, _MM_HINT_T0);
      _mm_prefetch(pf + 128, _MM_HINT_T0);
      __m256i lo[4], hi[4];
      UnpackW4(tile + 16, lo, hi);
      acc = W4Accumulate(DotW4(lo, hi, x[g]), x[g], LoadScales(tile), acc);
    }
    StoreRows(acc, y, b, r0, r1);
  }
}

}  // namespace

namespace avx2 {
void GemvW8A16(const PackedMatrix& w, const uint16_t* x, float* y, int64_t r0, int64_t r1) {
  GemvW8A16Avx2(w, x, y, r0, r1);
}
// GemmW8A16: runtime/kernels/x86/gemm_w8a16_avx2.cc
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  GemvW4A8Avx2(w, x, y, r0, r1);
}
// GemmW4A8: runtime/kernels/x86/gemm_w4a8_avx2.cc
}  // namespace avx2

}  // namespace ari::runtime::kernels::internal
