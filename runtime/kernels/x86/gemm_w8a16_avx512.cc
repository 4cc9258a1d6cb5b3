// AVX-512 VNNI W8A16 GEMV and GEMM on int16 activations.
// GEMM: 512-bit vpdpwssd on pairs of row blocks (16 rows per vector), 12 tokens per tile in
// the 32 vector registers, on the AVX2 tier's weight repack (x86/w8a16_q16.h). Paired
// kernels_bench on the AMD EPYC (Zen 5) host, one thread, 128 tokens: 5632x2048 19.1-19.8
// -> 10.8-11.2 ms against the 256-bit vpdpwssd kernel with one row block per tile.
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

// Three weight streams per thread, each software-prefetched 12 tiles ahead. Interleaved
// ari-perf decode on the AMD EPYC (Zen 5) host, TinyLlama W8A16, 2 threads: prefetch
// (1 stream) 4 -> 42.9, 12 -> 49.0, 16 -> 47.8, 32 -> 45.3 t/s; streams (prefetch 12)
// 1 / 2 / 3 / 4 -> 30.6 / 37.6 / 38.8 / 36.1 t/s (medians of 3 rounds, a slower hour);
// prefetch with 2 streams 6 / 12 / 20 -> 29.2 / 33.5 / 29.8 t/s. On the Intel Xeon (AMX)
// host, 3 rounds, streams 2 / 3 / 4: 22.05 / 22.94 / 23.04, 22.28 / 22.86 / 22.80,
// 21.42 / 21.79 / 21.35 t/s (docs/benchmarks.md). Three is the best or within noise of it
// on both.
constexpr int64_t kGemvPrefetchTiles = 12;
constexpr int kGemvStreams = 3;

void GemvQ16x512(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  const float* da = Q16Scales(x, Groups(w.cols));
  GemvRowBlocks<kW8TileBytes, kGemvPrefetchTiles, kGemvStreams>(
      w, y, r0, r1,
      [ x, da ](const std::byte* tile, int64_t g, __m256 acc) __attribute__((always_inline)) {
        const __m512i xv = _mm512_loadu_si512(x[g].qs);
        __m512i p[kRowInterleave];
#pragma GCC unroll 8
        for (int i = 0; i < kRowInterleave; ++i) {
          const auto* q = reinterpret_cast<const __m256i*>(tile + 16 + int64_t{32} * i);
          p[i] = _mm512_madd_epi16(_mm512_cvtepi8_epi16(_mm256_loadu_si256(q)), xv);
        }
        return W8Accumulate(SumRows8x16(p), LoadRowScales(tile), da[g], acc);
      });
}

// ---- GEMM on pairs of row blocks (16 rows per zmm)
// The pair vectors of w8a16_q16.h (lane = row, the row's int16 weights 2p, 2p + 1) of two
// row blocks side by side: lanes 0-7 block b, lanes 8-15 block b + 1. Each token then needs
// one broadcast of its activation pair per 16 rows, and one 512-bit vpdpwssd does what two
// 256-bit ones did. Same exact int32 dots and the same fma order: the same bits.
constexpr int kTokens512 = 12;  // 12 int32 sums + 12 fp32 accumulators + weights: 32 zmm

// wq[g * 16 + p] / wd[g] for groups [0, ng) of blocks a (low half) and b (high half).
inline void RepackPairs512(const std::byte* a, const std::byte* b, int64_t ng, __m512i* wq,
                           __m512* wd) {
  alignas(64) __m256i half[16];
  alignas(64) __m256 scale;
  for (int64_t g = 0; g < ng; ++g) {
    for (int h = 0; h < 2; ++h) {
      RepackPairs((h == 0 ? a : b) + g * kW8TileBytes, 1, half, &scale);
      for (int p = 0; p < 16; ++p) {
        wq[g * 16 + p] = h == 0 ? _mm512_castsi256_si512(half[p])
                                : _mm512_inserti64x4(wq[g * 16 + p], half[p], 1);
      }
      wd[g] = h == 0 ? _mm512_castps256_ps512(scale) : _mm512_insertf32x8(wd[g], scale, 1);
    }
  }
}

// NT tokens x 16 rows over ng groups; acc[t] in / out through accbuf (16 floats per token).
template <int NT>
inline void PairTile512(const __m512i* wq, const __m512* wd, int64_t ng, const Q16Token* xt,
                        bool first, float* accbuf) {
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = first ? _mm512_setzero_ps() : _mm512_load_ps(accbuf + int64_t{16} * t);
  }
  for (int64_t g = 0; g < ng; ++g, wq += 16) {
    __m512i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) {
      const __m512i wv = _mm512_load_si512(wq + p);
#pragma GCC unroll 12
      for (int t = 0; t < NT; ++t) {
        const __m512i xv = _mm512_broadcastd_epi32(_mm_loadu_si32(xt[t].qs[g].qs + int64_t{2} * p));
        isum[t] = _mm512_dpwssd_epi32(isum[t], wv, xv);
      }
    }
    for (int t = 0; t < NT; ++t) {
      const __m512 scale = _mm512_mul_ps(wd[g], _mm512_set1_ps(xt[t].d[g]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), scale, acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_store_ps(accbuf + int64_t{16} * t, acc[t]);
}

// The kernel of GemmQ16Blocks (w8a16_q16.h) on pairs of row blocks.
struct Q16BlockPairTiles {
  static constexpr int64_t kBlocks = 2;
  static constexpr int kTokens = kTokens512;
  using WVec = __m512i;
  using DVec = __m512;
  static void Repack(const std::byte* a, const std::byte* b, int64_t ng, __m512i* wq, __m512* wd) {
    RepackPairs512(a, b, ng, wq, wd);
  }
  template <int NT>
  static void Tile(const __m512i* wq, const __m512* wd, int64_t ng, const Q16Token* xt, bool first,
                   float* accbuf) {
    PairTile512<NT>(wq, wd, ng, xt, first, accbuf);
  }
  static void Store(const float* acc, float* y, int64_t b, bool pair, int64_t r0, int64_t r1) {
    StoreRowsPair(_mm512_load_ps(acc), y, b, pair, r0, r1);
  }
};

}  // namespace

void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1) {
  GemmQ16Blocks<Q16BlockPairTiles>(w, x, ldx, n, y, ldy, r0, r1);
}

void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  GemvQ16x512(w, x, y, r0, r1);
}

}  // namespace ari::runtime::kernels::internal::avx512
