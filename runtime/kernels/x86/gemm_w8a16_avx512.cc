// AVX-512 VNNI W8A16 GEMV and GEMM on int16 activations.
// GEMM: vpdpwssd on 256-bit vectors (AVX512-VL), 12 tokens per tile in the 32 vector
// registers (x86/w8a16_q16.h has the body and the arithmetic, shared with the AVX2 tier).
// GEMV: one 512-bit widening load and one 512-bit vpmaddwd per row and group (a group's
// 32 int16 activations fill one zmm), then a shuffle tree (SumRows8x16) instead of the
// AVX2 tier's vphaddd: about 4 vector operations per 32 weights against 7. Same exact
// int32 row dots and the same fma order as the scalar spec, so the same bits.
// GCC 12's AVX-512 intrinsic headers use _mm512_undefined_*() as pass-through operands,
// which -O3 reports as (maybe-)uninitialized (a known false positive); silence it here only.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/w8a16_q16.h"

namespace ari::runtime::kernels::internal::avx512 {
namespace {

// Lane i = the sum of the 16 lanes of p[i] (exact int32; the order does not matter).
inline __m256i SumRows8x16(const __m512i p[8]) {
  __m512i q[4];  // q[j]: 256-bit halves = 8 partials of rows 2j and 2j + 1
  for (int64_t j = 0; j < 4; ++j) {
    q[j] = _mm512_add_epi32(_mm512_shuffle_i64x2(p[2 * j], p[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                            _mm512_shuffle_i64x2(p[2 * j], p[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  __m512i r[2];  // r[k]: 128-bit quarters = 4 partials of rows 4k .. 4k + 3
  for (int64_t k = 0; k < 2; ++k) {
    r[k] = _mm512_add_epi32(_mm512_shuffle_i64x2(q[2 * k], q[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i64x2(q[2 * k], q[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Quarter k: [row k, row k, row k + 4, row k + 4] (2 partials each).
  const __m512i s =
      _mm512_add_epi32(_mm512_unpacklo_epi64(r[0], r[1]), _mm512_unpackhi_epi64(r[0], r[1]));
  const __m512i even = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i odd = _mm512_setr_epi32(1, 5, 9, 13, 3, 7, 11, 15, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm256_add_epi32(_mm512_castsi512_si256(_mm512_permutexvar_epi32(even, s)),
                          _mm512_castsi512_si256(_mm512_permutexvar_epi32(odd, s)));
}

// Two weight streams per thread, each software-prefetched 12 tiles ahead. Interleaved
// ari-perf decode on the AMD EPYC (Zen 5) host, TinyLlama W8A16, 2 threads: prefetch
// (1 stream) 4 -> 42.9, 12 -> 49.0, 16 -> 47.8, 32 -> 45.3 t/s; streams (prefetch 12)
// 1 / 2 / 3 / 4 -> 30.6 / 37.6 / 38.8 / 36.1 t/s (medians of 3 rounds, a slower hour);
// prefetch with 2 streams 6 / 12 / 20 -> 29.2 / 33.5 / 29.8 t/s (docs/benchmarks.md).
constexpr int64_t kGemvPrefetchTiles = 12;
constexpr int kGemvStreams = 2;

void GemvQ16x512(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  GemvRowBlocks<kW8TileBytes, kGemvPrefetchTiles, kGemvStreams>(
      w, y, r0,
      r1, [x](const std::byte* tile, int64_t g, __m256 acc) __attribute__((always_inline)) {
        const __m512i xv = _mm512_loadu_si512(x[g].qs);
        __m512i p[kRowInterleave];
#pragma GCC unroll 8
        for (int i = 0; i < kRowInterleave; ++i) {
          const auto* q = reinterpret_cast<const __m256i*>(tile + 16 + int64_t{32} * i);
          p[i] = _mm512_madd_epi16(_mm512_cvtepi8_epi16(_mm256_loadu_si256(q)), xv);
        }
        return W8Accumulate(SumRows8x16(p), LoadRowScales(tile), x[g].d, acc);
      });
}

}  // namespace

// 12 tokens per tile: 12 int32 sums + 12 fp32 accumulators + weights in 32 ymm registers.
void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1) {
  GemmQ16</*kVnni=*/true, 12>(w, x, ldx, n, y, ldy, r0, r1);
}

void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  GemvQ16x512(w, x, y, r0, r1);
}

}  // namespace ari::runtime::kernels::internal::avx512
