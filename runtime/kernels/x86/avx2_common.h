// Internal: AVX2 helpers shared by the x86 kernel files built with AVX2 or higher flags
// (matmul_avx2.cc, gemm_*_avx2.cc, matmul_avx512.cc). `static` (and the unnamed namespace
// for the struct): each translation unit gets its own copy compiled with its own ISA flags
// (no shared COMDAT, kernel_tiers.h).
#pragma once

#if !defined(__AVX2__)
#error "runtime/kernels/x86/avx2_common.h needs AVX2 (include it only from *_avx2.cc / *_avx512.cc)"
#endif

#include <immintrin.h>

#include <cstring>

#include "runtime/kernels/gemm_driver.h"
#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels::internal {

// Pins v to one register at this point (an empty asm statement: no instruction). GCC 12
// reassociates a fully unrolled chain of integer adds (isum += vpmaddwd(...), 16 per group
// and token) into a tree. The tree's partial sums do not fit the 16 ymm registers, so it
// spills them, and the AVX2 W8A16 GEMM ran at 38 instead of 24 ms (docs/benchmarks.md,
// "The AVX2 W8A16 GEMM's add chains"). The result is the same either way: integer sums.
template <class V>
static inline void KeepInRegister(V& v) {
  asm("" : "+x"(v));
}

// Sum of the 8 lanes, in a fixed order (the GEMV and GEMM reductions must match).
static inline float Hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

// 8 int8 weights -> 8 floats.
static inline __m256 LoadQ8(const std::byte* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// 4 int8 activations broadcast to every 32-bit lane.
static inline __m256i Bcast4(const int8_t* p) {
  int32_t v = 0;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// ---- W8A16 (int8 weights x int16 activations, scalar_matmul.cc) ----

// Lane i = the sum of the 8 lanes of p[i] (exact int32; the order does not matter).
static inline __m256i SumRows8(const __m256i p[8]) {
  const __m256i h01 = _mm256_hadd_epi32(p[0], p[1]);
  const __m256i h23 = _mm256_hadd_epi32(p[2], p[3]);
  const __m256i h45 = _mm256_hadd_epi32(p[4], p[5]);
  const __m256i h67 = _mm256_hadd_epi32(p[6], p[7]);
  const __m256i h0123 = _mm256_hadd_epi32(h01, h23);  // halves: rows 0-3, lanes 0-3 / 4-7
  const __m256i h4567 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h0123, h4567, 0x20),
                          _mm256_permute2x128_si256(h0123, h4567, 0x31));
}

// acc = fma(float(isum), dw * da, acc) per row lane (the scalar spec's last step).
static inline __m256 W8Accumulate(__m256i isum, __m256 dw, float da, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(da)), acc);
}

// W4A8: acc = fma(float(isum - 8 * a.sum), d_w * d_a, acc) per row lane (isum: the exact
// dot of the unsigned nibbles with the activations; the 8 * sum undoes their +8 offset).
static inline __m256 W4Accumulate(__m256i isum, const BlockQ8A& a, __m256 dw, __m256 acc) {
  const __m256i adj = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * a.sum));
  const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(a.d));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(adj), scale, acc);
}

// The 8 fp16 row scales of a W8 / W4 tile as fp32.
static inline __m256 LoadRowScales(const std::byte* tile) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)));
}

// Stores lanes of `v` (rows 8b .. 8b+7) that fall in [r0, r1) to y[row].
static inline void StoreRows(__m256 v, float* y, int64_t b, int64_t r0, int64_t r1) {
  const int64_t base = b * kRowInterleave;
  if (base >= r0 && base + kRowInterleave <= r1) {
    _mm256_storeu_ps(y + base, v);
    return;
  }
  alignas(32) float tmp[kRowInterleave];
  _mm256_store_ps(tmp, v);
  for (int i = 0; i < kRowInterleave; ++i) {
    if (base + i >= r0 && base + i < r1) y[base + i] = tmp[i];
  }
}

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// The AVX-512 GEMMs on pairs of row blocks: lanes 0-7 of v to the rows of block b, lanes
// 8-15 to those of block b + 1 when `pair` (else block b had no partner).
static inline void StoreRowsPair(__m512 v, float* y, int64_t b, bool pair, int64_t r0, int64_t r1) {
  StoreRows(_mm512_castps512_ps256(v), y, b, r0, r1);
  if (pair) StoreRows(_mm512_extractf32x8_ps(v, 1), y, b + 1, r0, r1);
}
#endif

// The GEMV driver of every x86 tier and precision (tiles of kTileBytes: fp16 row scales,
// then the block's 8 rows' quants of one group; layout.h). For each block of
// kRowInterleave rows, acc = step(tile, g, acc) for g = 0 .. groups - 1 in group order,
// then StoreRows. The row range is cut into kStreams equal runs of blocks walked in
// lockstep, so a thread keeps kStreams weight streams in flight (the blocks left over
// after the cut, fewer than kStreams, come last, one at a time); each stream is
// software-prefetched kPrefetchGroups tiles ahead (0: none; prefetches never fault, so
// reading past the end is safe). A block's sum does not depend on kStreams.
template <int64_t kTileBytes, int64_t kPrefetchGroups, int kStreams, typename GroupStep>
static inline void GemvRowBlocks(const PackedMatrix& w, float* y, int64_t r0, int64_t r1,
                                 GroupStep step) {
  constexpr int64_t kPrefetchBytes = kPrefetchGroups * kTileBytes;
  constexpr int64_t kPrefetchLines = kPrefetchGroups > 0 ? (kTileBytes + 63) / 64 : 0;
  const int64_t groups = Groups(w.cols);
  const int64_t block_bytes = groups * kTileBytes;
  const int64_t b0 = r0 / kRowInterleave;
  const int64_t nb = (r1 + kRowInterleave - 1) / kRowInterleave - b0;
  const int64_t run = nb / kStreams;  // blocks per stream in the lockstep part
  const auto prefetch = [](const std::byte* tile) __attribute__((always_inline)) {
    const char* pf = reinterpret_cast<const char*>(tile) + kPrefetchBytes;
    for (int64_t l = 0; l < kPrefetchLines; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
  };
  for (int64_t i = 0; i < run; ++i) {
    const std::byte* tile[kStreams];
    __m256 acc[kStreams];
    for (int s = 0; s < kStreams; ++s) {
      tile[s] = w.data + (b0 + s * run + i) * block_bytes;
      acc[s] = _mm256_setzero_ps();
    }
    for (int64_t g = 0; g < groups; ++g) {
#pragma GCC unroll 4
      for (int s = 0; s < kStreams; ++s) {
        prefetch(tile[s]);
        acc[s] = step(tile[s], g, acc[s]);
        tile[s] += kTileBytes;
      }
    }
    for (int s = 0; s < kStreams; ++s) StoreRows(acc[s], y, b0 + s * run + i, r0, r1);
  }
  for (int64_t b = b0 + kStreams * run; b < b0 + nb; ++b) {
    const std::byte* tile = w.data + b * block_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g, tile += kTileBytes) {
      prefetch(tile);
      acc = step(tile, g, acc);
    }
    StoreRows(acc, y, b, r0, r1);
  }
}

namespace {

// Base of the W4A8 GEMM micro-kernels (gemm_driver.h, row blocks): acc[t] = the 8 row
// outputs of token t in one vector.
struct Avx2W4A8Tiles : W4A8Tiles {
  static void Store(__m256 v, float* y, int64_t b, int64_t r0, int64_t r1) {
    StoreRows(v, y, b, r0, r1);
  }
};

}  // namespace
}  // namespace ari::runtime::kernels::internal
