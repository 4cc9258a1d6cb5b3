// AVX-512 (F/BW/VL/DQ) + VNNI W4A8 matmul kernels. Same format and arithmetic contract as
// matmul_avx2.cc: bit-identical to the scalar reference (vpdpbusd gives the exact per-row
// group dot). The GEMM is a micro-kernel (W4BlockPairTiles) run by the block/tile loops of
// gemm_driver.h. W8A16 of this tier: gemm_w8a16_avx512.cc.
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

// GEMV: four weight streams per thread, each prefetched 8 tiles ahead (before: one stream,
// no prefetch). Interleaved ari-perf decode on the AMD EPYC (Zen 5) host, TinyLlama W4A8,
// 2 threads: 1 stream unprefetched -> 2 streams, 4 rounds, 67.8 / 70.4 / 67.7 / 66.4 ->
// 75.0 / 72.7 / 69.4 / 72.6 t/s; 2 -> 4 streams, 6 rounds, paired ratios 1.12-1.19; a
// 16-tile prefetch with 4 streams was slower in 5 of 6 (docs/benchmarks.md).
constexpr int64_t kGemvPrefetchTiles = 8;
constexpr int kGemvStreams = 4;

void GemvW4A8Avx512(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  GemvRowBlocks<kW4TileBytes, kGemvPrefetchTiles, kGemvStreams>(
      w, y, r0,
      r1, [x](const std::byte* tile, int64_t g, __m256 acc) __attribute__((always_inline)) {
        __m512i lo[2], hi[2];
        UnpackW4(tile + 16, lo, hi);
        return W4Accumulate(DotW4(lo, hi, x[g]), x[g], LoadRowScales(tile), acc);
      });
}

// The 4 int8 at p in every dword lane (a broadcast load; p need not be aligned).
inline __m512i BroadcastQuad(const int8_t* p) { return _mm512_broadcastd_epi32(_mm_loadu_si32(p)); }

// W4A8 GEMM micro-kernel (gemm_driver.h, pairs of row blocks): two row blocks (16 rows,
// one int32 lane per row: block a in lanes 0-7, block b in 8-15) against NT tokens over all
// groups, acc[t] = the 16 row outputs of token t. Per group the nibble vector of quad v of
// both blocks is one zmm (lo: weights of quad v, hi: of quad 4 + v), so every lane needs
// the same activation dword and each vpdpbusd takes it as a broadcast load: 8
// vpdpbusd per (token, group, 16 rows) and no permute, against 4 vpermd + 4 vpdpbusd +
// a fold per 8 rows of the one-block kernel this replaces. The group dot starts from
// -8 * sum (the Q4 zero point), so it is the exact int32 isum - 8 * sum of the reference;
// then acc = fma(float(.), d_w * d_a, acc) as scalar_matmul.cc: bit-identical.
// Paired kernels_bench on the AMD EPYC (Zen 5) host, one thread, 128 tokens: 5632x2048
// 9.25-9.39 -> 5.19-5.47 ms, 2048x5632 9.46-9.65 -> 5.08-6.95 ms (docs/benchmarks.md).
struct W4BlockPairTiles : W4A8Tiles {
  static constexpr int kTileTokens[] = {8, 4};  // tails 1-3
  using Acc = __m512[8];

  static void Store(__m512 v, float* y, int64_t b, bool pair, int64_t r0, int64_t r1) {
    StoreRowsPair(v, y, b, pair, r0, r1);
  }

  template <int NT>
  static void Tile(const std::byte* block_a, const std::byte* block_b, int64_t groups,
                   const BlockQ8A* const* xt, Acc& acc) {
    const __m512i mask = _mm512_set1_epi8(0x0f);
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const std::byte* ta = block_a + g * kW4TileBytes;
      const std::byte* tb = block_b + g * kW4TileBytes;
      __m512i lo[4], hi[4];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const __m512i raw = _mm512_inserti64x4(
            _mm512_castsi256_si512(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ta + 16 + int64_t{32} * v))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tb + 16 + int64_t{32} * v)), 1);
        lo[v] = _mm512_and_si512(raw, mask);
        hi[v] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), mask);
      }
      const __m512 dw = _mm512_cvtph_ps(_mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ta))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(tb)), 1));
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const BlockQ8A& a = xt[t][g];
        __m512i s0 = _mm512_set1_epi32(-8 * a.sum);
        __m512i s1 = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          s0 = _mm512_dpbusd_epi32(s0, lo[v], BroadcastQuad(a.qs + int64_t{4} * v));
          s1 = _mm512_dpbusd_epi32(s1, hi[v], BroadcastQuad(a.qs + 16 + int64_t{4} * v));
        }
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(a.d));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), scale, acc[t]);
      }
    }
  }
};

}  // namespace

namespace avx512 {
// GemvW8A16, GemmW8A16: runtime/kernels/x86/gemm_w8a16_avx512.cc
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  GemvW4A8Avx512(w, x, y, r0, r1);
}
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1) {
  GemmRowBlockPairTiles<W4BlockPairTiles>(w, x, ldx, n, y, ldy, r0, r1);
}
}  // namespace avx512

}  // namespace ari::runtime::kernels::internal
