// AVX-512 (F/BW/VL/DQ) + VNNI W4A8 matmul kernels. Same format and arithmetic contract as
// matmul_avx2.cc: bit-identical to the scalar reference (vpdpbusd gives the exact per-row
// group dot). The GEMM is a micro-kernel (W4BlockTiles) run by the block/tile loops of
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
      const __m256 dw = LoadRowScales(tile);
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
// GemvW8A16, GemmW8A16: runtime/kernels/x86/gemm_w8a16_avx512.cc
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  GemvW4A8Avx512(w, x, y, r0, r1);
}
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1) {
  GemmRowBlockTiles<W4BlockTiles>(w, x, ldx, n, y, ldy, r0, r1);
}
}  // namespace avx512

}  // namespace ari::runtime::kernels::internal
