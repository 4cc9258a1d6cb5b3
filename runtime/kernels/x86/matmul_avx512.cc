// AVX-512 (F/BW/VL/DQ) + VNNI matmul kernels. Same formats and arithmetic contracts as
// matmul_avx2.cc: W4A8 is bit-identical to the scalar reference (vpdpbusd gives the exact
// per-row group dot), W8A16 accumulates in 16 fp32 lanes (a different, tolerance-tested
// summation order) and its GEMM is bit-identical to N GEMVs. The GEMMs are micro-kernels
// (W8PairTiles, W4BlockTiles) run by the block/tile loops of gemm_driver.h.
// Element-wise and attention kernels of this tier are the AVX2 ones (they are not
// bandwidth critical; on Zen 4 512-bit ops are double-pumped anyway).
// GCC 12's AVX-512 intrinsic headers use _mm512_undefined_*() as pass-through operands,
// which -O3 reports as maybe-uninitialized (a known false positive); silence it here only.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "runtime/kernels/gemm_driver.h"
#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/avx2_common.h"

namespace ari::runtime::kernels::internal {
namespace {

inline float Hsum512(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline __m512 LoadQ8x16(const std::byte* p) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 LoadF16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 ScaleF16(const std::byte* p) { return _mm512_set1_ps(_cvtsh_ss(LoadU16(p))); }

// ---------------------------------------------------------------- W8A16

void GemvW8A16Avx512(const PackedMatrix& w, const uint16_t* x, float* y, int64_t r0, int64_t r1) {
  const int64_t groups = Groups(w.cols);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* tile = w.data + b * groups * kW8TileBytes;
    __m512 acc[kRowInterleave];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g, tile += kW8TileBytes) {
      const __m512 x0 = LoadF16x16(x + g * kGroup);
      const __m512 x1 = LoadF16x16(x + g * kGroup + 16);
#pragma GCC unroll 8
      for (int i = 0; i < kRowInterleave; ++i) {
        const std::byte* q = tile + 16 + int64_t{32} * i;
        const __m512 s = _mm512_fmadd_ps(LoadQ8x16(q + 16), x1, _mm512_mul_ps(LoadQ8x16(q), x0));
        acc[i] = _mm512_fmadd_ps(s, ScaleF16(tile + int64_t{2} * i), acc[i]);
      }
    }
    for (int i = 0; i < kRowInterleave; ++i) {
      const int64_t r = b * kRowInterleave + i;
      if (r >= r0 && r < r1) y[r] = Hsum512(acc[i]);
    }
  }
}

// W8A16 GEMM micro-kernel (gemm_driver.h, row pairs): rows i, i+1 of one row block
// against NT tokens, the same per-(row, token) operations as GemvW8A16Avx512.
struct W8PairTiles : W8A16Tiles {
  static constexpr int kTileTokens[] = {4};  // 2 rows x 4 tokens, tails 1-3

  template <int NT>
  static void Tile(const std::byte* block, int64_t groups, int i, const uint16_t* const* xt,
                   float out[2][kTileTokens[0]]) {
    __m512 acc0[NT], acc1[NT];
    for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
    const std::byte* tile = block;
    for (int64_t g = 0; g < groups; ++g, tile += kW8TileBytes) {
      const std::byte* q0 = tile + 16 + int64_t{32} * i;
      const std::byte* q1 = q0 + 32;
      const __m512 w00 = LoadQ8x16(q0), w01 = LoadQ8x16(q0 + 16);
      const __m512 w10 = LoadQ8x16(q1), w11 = LoadQ8x16(q1 + 16);
      const __m512 d0 = ScaleF16(tile + int64_t{2} * i);
      const __m512 d1 = ScaleF16(tile + int64_t{2} * i + 2);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const __m512 xa = LoadF16x16(xt[t] + g * kGroup);
        const __m512 xb = LoadF16x16(xt[t] + g * kGroup + 16);
        acc0[t] = _mm512_fmadd_ps(_mm512_fmadd_ps(w01, xb, _mm512_mul_ps(w00, xa)), d0, acc0[t]);
        acc1[t] = _mm512_fmadd_ps(_mm512_fmadd_ps(w11, xb, _mm512_mul_ps(w10, xa)), d1, acc1[t]);
      }
    }
    for (int t = 0; t < NT; ++t) {
      out[0][t] = Hsum512(acc0[t]);
      out[1][t] = Hsum512(acc1[t]);
    }
  }
};

// ---------------------------------------------------------------- W4A8

// lo[h] / hi[h]: low / high nibbles of nibble bytes [64 h, 64 h + 64), i.e. quad v = 2h in
// the lower 256 bits and v = 2h + 1 in the upper 256 bits (lane = row within each half).
inline void UnpackW4(const std::byte* nibbles, __m512i lo[2], __m512i hi[2]) {
  const __m512i mask = _mm512_set1_epi8(0x0f);
  for (int h = 0; h < 2; ++h) {
    const __m512i raw = _mm512_loadu_si512(nibbles + int64_t{64} * h);
    lo[h] = _mm512_and_si512(raw, mask);
    hi[h] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), mask);
  }
}

inline __m512i Pair(int a, int b) {
  return _mm512_setr_epi32(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b);
}

// Per row (8 int32 lanes): exact sum_j q[row][j] * a.qs[j]. Activation dword k holds
// qs[4k .. 4k+3]: low-nibble quads v use dword v, high-nibble quads dword 4 + v.
inline __m256i DotW4(const __m512i lo[2], const __m512i hi[2], const BlockQ8A& a) {
  const __m512i av =
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs)));
  __m512i s =
      _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[0], _mm512_permutexvar_epi32(Pair(0, 1), av));
  s = _mm512_dpbusd_epi32(s, lo[1], _mm512_permutexvar_epi32(Pair(2, 3), av));
  s = _mm512_dpbusd_epi32(s, hi[0], _mm512_permutexvar_epi32(Pair(4, 5), av));
  s = _mm512_dpbusd_epi32(s, hi[1], _mm512_permutexvar_epi32(Pair(6, 7), av));
  return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

inline __m256 W4Accumulate(__m256i isum, const BlockQ8A& a, __m256 dw, __m256 acc) {
  const __m256i adj = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * a.sum));
  const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(a.d));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(adj), scale, acc);
}

inline __m256 LoadScales(const std::byte* tile) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)));
}

void GemvW4A8Avx512(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  const int64_t groups = Groups(w.cols);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* tile = w.data + b * groups * kW4TileBytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
      __m512i lo[2], hi[2];
      UnpackW4(tile + 16, lo, hi);
      acc = W4Accumulate(DotW4(lo, hi, x[g]), x[g], LoadScales(tile), acc);
    }
    StoreRows(acc, y, b, r0, r1);
  }
}

// W4A8 GEMM micro-kernel (gemm_driver.h, row blocks): one row block (8 rows) against NT
// tokens over all groups, acc[t] = the 8 row outputs of token t.
struct W4BlockTiles : Avx2W4A8Tiles {
  static constexpr int kTileTokens[] = {4};  // tails 1-3
  using Acc = __m256[4];

  template <int NT>
  static void Tile(const std::byte* block, int64_t groups, const BlockQ8A* const* xt, Acc& acc) {
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const std::byte* tile = block;
    for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
      __m512i lo[2], hi[2];
      UnpackW4(tile + 16, lo, hi);
      const __m256 dw = LoadScales(tile);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const BlockQ8A& a = xt[t][g];
        acc[t] = W4Accumulate(DotW4(lo, hi, a), a, dw, acc[t]);
      }
    }
  }
};

}  // namespace

namespace avx512 {
void GemvW8A16(const PackedMatrix& w, const uint16_t* x, float* y, int64_t r0, int64_t r1) {
  GemvW8A16Avx512(w, x, y, r0, r1);
}
void GemmW8A16(const PackedMatrix& w, const uint16_t* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1) {
  GemmRowPairTiles<W8PairTiles>(w, x, ldx, n, y, ldy, r0, r1);
}
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  GemvW4A8Avx512(w, x, y, r0, r1);
}
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1) {
  GemmRowBlockTiles<W4BlockTiles>(w, x, ldx, n, y, ldy, r0, r1);
}
}  // namespace avx512

}  // namespace ari::runtime::kernels::internal
