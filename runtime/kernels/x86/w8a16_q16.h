// Internal: the W8A16 GEMV and GEMM bodies on int16 activations (BlockQ16A) of the AVX2
// tier (gemm_w8a16_avx2.cc: vpmaddwd + vpaddd); the AVX-512 VNNI tier
// (gemm_w8a16_avx512.cc) reuses the repack (RepackPairs) for its GEMM on pairs of row
// blocks and has its own GEMV, both on 512-bit vectors. Both compute the scalar spec
// (scalar_matmul.cc) exactly: per row and group the exact int32 dot isum, then acc =
// fma(float(isum), d_w * d_a, acc) in group order, so GEMV, GEMM and every tier give the same bits.
//
// GEMV (decode): rows are contiguous 32-byte quant runs (layout.h), so per row and group
// two widening loads and two multiply-adds give 8 int32 partials, and a horizontal-add
// tree (SumRows8) turns the 8 rows' partials into one vector of row dots: about 7 vector
// operations per 32 weights, against 14 for the fp32 path this replaced.
//
// GEMM (prefill): the weights of one row block and a K slice are first repacked into
// "pair vectors" (lane = row, holding the row's two int16 weights 2p, 2p + 1: an 8 x 8
// dword transpose of the widened rows), so each token needs one broadcast of its
// activation pair and one multiply-add per pair vector, with no horizontal sum: 16
// multiply-adds per 256 MACs and token. The repack (about 80 operations per row block and
// group) is paid once per row block, K slice and up to kSuperTokens tokens.
//
// Per translation unit (kernel_tiers.h): everything here is static or in an unnamed
// namespace and compiled with the includer's ISA flags.
#pragma once

#include "runtime/kernels/x86/avx2_common.h"

namespace ari::runtime::kernels::internal {
namespace {

// isum += the pairwise products of w and x (int16 pairs).
inline __m256i DotPairs(__m256i isum, __m256i w, __m256i x) {
  return _mm256_add_epi32(isum, _mm256_madd_epi16(w, x));
}

// ---------------------------------------------------------------- GEMV

inline __m256i RowDotQ16(const std::byte* q, __m256i xa, __m256i xb) {
  const __m256i wa = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
  const __m256i wb =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16)));
  return DotPairs(_mm256_madd_epi16(wa, xa), wb, xb);
}

// The AVX2 tier's GEMV (256-bit vectors), two weight streams per thread each prefetched 4
// tiles ahead (GemvRowBlocks). AVX2 tier forced, interleaved ari-perf decode on the AMD
// EPYC (Zen 5) host, TinyLlama W8A16, 2 threads, 1 -> 2 streams: 26.2 / 26.9 / 26.8 ->
// 29.8 / 27.9 / 32.3 t/s (docs/benchmarks.md).
inline void GemvQ16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  const float* da = Q16Scales(x, Groups(w.cols));
  GemvRowBlocks<kW8TileBytes, 4, 2>(
      w, y, r0,
      r1, [=](const std::byte* tile, int64_t g, __m256 acc) __attribute__((always_inline)) {
        const __m256i xa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[g].qs));
        const __m256i xb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[g].qs + 16));
        __m256i p[kRowInterleave];
#pragma GCC unroll 8
        for (int i = 0; i < kRowInterleave; ++i) {
          p[i] = RowDotQ16(tile + 16 + int64_t{32} * i, xa, xb);
        }
        return W8Accumulate(SumRows8(p), LoadRowScales(tile), da[g], acc);
      });
}

// ---------------------------------------------------------------- GEMM

constexpr int64_t kSliceGroups = 32;  // K slice: 32 groups = 1024 columns, 17 KiB repacked
// Tokens per repack (accumulators: 4 KiB per row block). 48 until 2026-12-06: 128 reads
// and repacks the weights once for a 128-token chunk; W8A16 pp128 paired 1.11 on the
// AVX-512 tier, 1.02 on AVX2 (docs/benchmarks.md, "The AVX2 W8A16 GEMM's add chains").
constexpr int kSuperTokens = 128;

// In: r[i] = 8 dwords of row i. Out: r[j] = dword j of every row (lane i = row i).
inline void Transpose8x8(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {  // rows h .. h + 3, per 128-bit half
    u[h] = _mm256_unpacklo_epi64(t[h], t[h + 2]);
    u[h + 1] = _mm256_unpackhi_epi64(t[h], t[h + 2]);
    u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);
    u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2x128_si256(u[j], u[j + 4], 0x20);
    r[j + 4] = _mm256_permute2x128_si256(u[j], u[j + 4], 0x31);
  }
}

// Pair vectors wq[g][p] (p = 0..15) and fp32 row scales wd[g] of groups [0, ng) starting
// at `tile` (one row block).
inline void RepackPairs(const std::byte* tile, int64_t ng, __m256i* wq, __m256* wd) {
  for (int64_t g = 0; g < ng; ++g, tile += kW8TileBytes, wq += 16) {
    __m256i lo[8], hi[8];
    for (int i = 0; i < 8; ++i) {
      const auto* q = reinterpret_cast<const __m128i*>(tile + 16 + int64_t{32} * i);
      lo[i] = _mm256_cvtepi8_epi16(_mm_loadu_si128(q));
      hi[i] = _mm256_cvtepi8_epi16(_mm_loadu_si128(q + 1));
    }
    Transpose8x8(lo);
    Transpose8x8(hi);
    for (int p = 0; p < 8; ++p) {
      _mm256_store_si256(wq + p, lo[p]);
      _mm256_store_si256(wq + 8 + p, hi[p]);
    }
    wd[g] = LoadRowScales(tile);
  }
}

// One token's activations from a K slice's first group on: its quants and their scales.
struct Q16Token {
  const BlockQ16A* qs;
  const float* d;
};

inline __m256i BcastPair(const int16_t* qs) {
  int32_t v = 0;
  std::memcpy(&v, qs, 4);
  return _mm256_set1_epi32(v);
}

// NT tokens (xt[t] = the token's activations at the slice's first group) x one row block
// over ng groups; acc[t] (8 rows) in/out through accbuf.
template <int NT>
inline void PairTile(const __m256i* wq, const __m256* wd, int64_t ng, const Q16Token* xt,
                     bool first, float* accbuf) {
  __m256 acc[NT];
  for (int t = 0; t < NT; ++t) {
    acc[t] = first ? _mm256_setzero_ps() : _mm256_load_ps(accbuf + int64_t{8} * t);
  }
  for (int64_t g = 0; g < ng; ++g, wq += 16) {
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_madd_epi16(wq[0], BcastPair(xt[t].qs[g].qs));
#pragma GCC unroll 15
    for (int p = 1; p < 16; ++p) {
      const __m256i wv = _mm256_load_si256(wq + p);
#pragma GCC unroll 12
      for (int t = 0; t < NT; ++t) {
        isum[t] = DotPairs(isum[t], wv, BcastPair(xt[t].qs[g].qs + int64_t{2} * p));
        KeepInRegister(isum[t]);  // one accumulator per token, no spilled add tree
      }
    }
    for (int t = 0; t < NT; ++t) acc[t] = W8Accumulate(isum[t], wd[g], xt[t].d[g], acc[t]);
  }
  for (int t = 0; t < NT; ++t) _mm256_store_ps(accbuf + int64_t{8} * t, acc[t]);
}

// The loops of the W8A16 GEMM over a kernel K: per step of K::kBlocks row blocks (1, or 2
// side by side in one vector; a last block without a partner is passed twice and only its
// own rows stored), per kSuperTokens tokens and K slice, K::Repack once, then
// K::Tile<NT> over token tiles of K::kTokens (the tail: the widest NT that fits), then
// K::Store of each token's rows. K also names the repacked types WVec (16 per group) and
// DVec (row scales, one per group).
// x: the tile's first token's Q16 row, `groups` of them; gs: the slice's first group.
template <class K, int NT>
inline void RunQ16Tile(int nt, const BlockQ16A* x, int64_t ldx, int64_t groups, int64_t gs,
                       const typename K::WVec* wq, const typename K::DVec* wd, int64_t ng,
                       bool first, float* accbuf) {
  if constexpr (NT > 1) {
    if (nt < NT) {
      RunQ16Tile<K, NT - 1>(nt, x, ldx, groups, gs, wq, wd, ng, first, accbuf);
      return;
    }
  }
  const float* da = Q16Scales(x, groups) + gs;
  Q16Token xt[NT];
  for (int t = 0; t < NT; ++t) xt[t] = {x + t * ldx + gs, da + t * ldx * kQ16ScalesPerBlock};
  K::template Tile<NT>(wq, wd, ng, xt, first, accbuf);
}

template <class K>
void GemmQ16Blocks(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
                   int64_t ldy, int64_t r0, int64_t r1) {
  if (r0 >= r1 || n <= 0) return;
  constexpr int64_t kRows = K::kBlocks * kRowInterleave;  // rows per step
  alignas(64) typename K::WVec wq[kSliceGroups * 16];     // 16 KiB per block
  alignas(64) typename K::DVec wd[kSliceGroups];          // 1 KiB per block
  alignas(64) float accbuf[kSuperTokens * kRows];         // 4 KiB per block
  const int64_t groups = Groups(w.cols);
  const int64_t block_bytes = groups * kW8TileBytes;
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; b += K::kBlocks) {
    const std::byte* block = w.data + b * block_bytes;
    const bool pair = K::kBlocks == 2 && (b + 1) * kRowInterleave < r1;
    const std::byte* next = pair ? block + block_bytes : block;
    for (int64_t s0 = 0; s0 < n; s0 += kSuperTokens) {
      const int64_t ns = Min64(kSuperTokens, n - s0);
      for (int64_t gs = 0; gs < groups; gs += kSliceGroups) {
        const int64_t ng = Min64(kSliceGroups, groups - gs);
        K::Repack(block + gs * kW8TileBytes, next + gs * kW8TileBytes, ng, wq, wd);
        for (int64_t t0 = 0; t0 < ns; t0 += K::kTokens) {
          const int nt = static_cast<int>(Min64(K::kTokens, ns - t0));
          RunQ16Tile<K, K::kTokens>(nt, x + (s0 + t0) * ldx, ldx, groups, gs, wq, wd, ng, gs == 0,
                                    accbuf + t0 * kRows);
        }
      }
      for (int64_t t = 0; t < ns; ++t) {
        K::Store(accbuf + t * kRows, y + (s0 + t) * ldy, b, pair, r0, r1);
      }
    }
  }
}

// The AVX2 kernel of GemmQ16Blocks: one row block per step, kTokens tokens per tile.
template <int kTokensPerTile>
struct Q16BlockTiles {
  static constexpr int64_t kBlocks = 1;
  static constexpr int kTokens = kTokensPerTile;
  using WVec = __m256i;
  using DVec = __m256;
  static void Repack(const std::byte* a, const std::byte* /*b*/, int64_t ng, __m256i* wq,
                     __m256* wd) {
    RepackPairs(a, ng, wq, wd);
  }
  template <int NT>
  static void Tile(const __m256i* wq, const __m256* wd, int64_t ng, const Q16Token* xt, bool first,
                   float* accbuf) {
    PairTile<NT>(wq, wd, ng, xt, first, accbuf);
  }
  static void Store(const float* acc, float* y, int64_t b, bool /*pair*/, int64_t r0, int64_t r1) {
    StoreRows(_mm256_load_ps(acc), y, b, r0, r1);
  }
};

template <int kTokens>
void GemmQ16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  GemmQ16Blocks<Q16BlockTiles<kTokens>>(w, x, ldx, n, y, ldy, r0, r1);
}

}  // namespace
}  // namespace ari::runtime::kernels::internal
