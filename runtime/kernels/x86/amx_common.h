// Internal: the AMX-INT8 GEMM driver (prefill) shared by gemm_w4a8_amx.cc and
// gemm_w8a16_amx.cc, and the tile configuration they load.
//
// Shape: C[token][row] = A[token][k] . B[k][row] with A = 16 tokens' activation bytes of one
// quant group (read in place from the activation rows, stride ldx blocks), B = the group's
// weights of two row blocks (16 rows) in the tiles' 4-byte-interleaved layout, repacked per
// K slice, and C = the group's exact int32 dots. The AVX-512 side then does what the scalar
// spec does per group (scalar_matmul.cc): acc = fma(float(isum), d_w * d_a, acc) in group
// order, so every result has the same bits as the scalar reference and every other tier.
// Per group this costs one tile dot product (two for W8A16) and 16 vector fma steps; the
// tile registers are double-buffered so the next group's dot product runs while the vector
// units scale the last one.
//
// Blocking: per pair of row blocks, per block of at most kAmxSuperTokens tokens, per K slice
// (Kernel::kSliceGroups groups, L1/L2-resident once repacked): the token tiles of 16 sweep
// the slice with their 16 x 16 fp32 accumulators in registers, kept between slices in a
// stack buffer. Weights are read from memory once per super block, and the weights of the
// next repack are prefetched into L2 while the token tiles run (else the repack waits for
// memory: W8A16 pp128 paired median 1.05 over 8 rounds, docs/benchmarks.md); activations
// come from L2. A token count that is not a multiple of 16 ends with a tile overlapping the
// one before it (its first tokens are computed again and not stored: same bits either way).
// Fewer than 16 tokens run the AVX-512 GEMM (Kernel::Narrow).
//
// Per translation unit (kernel_tiers.h): everything here is in an unnamed namespace and
// compiled with the includer's ISA flags.
#pragma once

#if !defined(__AMX_TILE__) || !defined(__AMX_INT8__) || !defined(__AVX512F__)
#error "runtime/kernels/x86/amx_common.h needs AMX-TILE, AMX-INT8 and AVX-512 (*_amx.cc only)"
#endif

#include <immintrin.h>

#include <cstdint>

#include "runtime/kernels/kernels.h"
#include "runtime/kernels/x86/avx2_common.h"

namespace ari::runtime::kernels::internal {
namespace {

constexpr int kAmxTokens = 16;                // tokens per tile (rows of A and C)
constexpr int kAmxRows = 2 * kRowInterleave;  // weight rows per tile (columns of C)
constexpr int64_t kAmxSuperTokens = 256;      // accumulator tokens per row-block pair (16 KiB)

// The 64-byte operand of LDTILECFG, palette 1: per tile register, rows and bytes per row.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
  constexpr void Set(int tile, int tile_rows, int bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(tile_rows);
    colsb[tile] = static_cast<uint16_t>(bytes_per_row);
  }
};
static_assert(sizeof(TileConfig) == 64);

// This thread's tile registers configured for the scope; TILERELEASE at its end returns the
// tile state to its initial value (no 8 KiB tile save on every context switch afterwards).
class TileScope {
 public:
  explicit TileScope(const TileConfig& config) { _tile_loadconfig(&config); }
  ~TileScope() { _tile_release(); }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
  TileScope(TileScope&&) = delete;
  TileScope& operator=(TileScope&&) = delete;
};

// acc[t] (the 16 row outputs of token t) from the buffer, or zero for the first K slice.
inline void LoadAcc(const float* buf, bool first, __m512 acc[kAmxTokens]) {
#pragma GCC unroll 16
  for (int t = 0; t < kAmxTokens; ++t) {
    acc[t] = first ? _mm512_setzero_ps() : _mm512_load_ps(buf + int64_t{kAmxRows} * t);
  }
}

// Tokens [skip, 16) back to the buffer (the first `skip` belong to the tile before).
inline void SaveAcc(const __m512 acc[kAmxTokens], int skip, float* buf) {
#pragma GCC unroll 16
  for (int t = 0; t < kAmxTokens; ++t) {
    if (t >= skip) _mm512_store_ps(buf + int64_t{kAmxRows} * t, acc[t]);
  }
}

// Kernel::Batch<N> for the last, shorter batch of a slice (n = 1 .. kBatch - 1 groups).
template <class Kernel, int N>
inline void TailBatch(int64_t n, typename Kernel::TileAct x, int64_t ldx, const int8_t* bq,
                      const __m512* wd, int64_t g, __m512 acc[kAmxTokens]) {
  if constexpr (N > 0) {
    if (n == N) {
      Kernel::template Batch<N>(x, ldx, bq, wd, g, acc);
      return;
    }
    TailBatch<Kernel, N - 1>(n, x, ldx, bq, wd, g, acc);
  }
}

// One token tile (16 tokens; x: token 0 at the slice's first group) x 16 rows over the
// slice's ng groups: the accumulators from the buffer (or zero), Kernel::Batch<N> over
// batches of Kernel::kBatch groups, then tokens [skip, 16) back to the buffer.
template <class Kernel>
inline void AmxTile(typename Kernel::TileAct x, int64_t ldx, const int8_t* bq, const __m512* wd,
                    int64_t ng, bool first, float* accbuf, int skip) {
  __m512 acc[kAmxTokens];
  LoadAcc(accbuf, first, acc);
  int64_t g = 0;
  for (; g + Kernel::kBatch <= ng; g += Kernel::kBatch) {
    Kernel::template Batch<Kernel::kBatch>(x, ldx, bq, wd, g, acc);
  }
  TailBatch<Kernel, Kernel::kBatch - 1>(ng - g, x, ldx, bq, wd, g, acc);
  SaveAcc(acc, skip, accbuf);
}

// The weights the next repack reads, to prefetch while the token tiles run: slice
// [gs, gs + Kernel::kSliceGroups) of row blocks b (and b + 1 if it holds rows below r1), or,
// past the last slice, the first slice of the next pair of row blocks; none after the last.
// (With more than kAmxSuperTokens tokens the next super block first re-reads this pair,
// from cache; the next pair's first slice is then fetched early, not wrongly.)
struct NextWeights {
  const std::byte* a = nullptr;
  const std::byte* b = nullptr;
  int64_t bytes = 0;

  // Part `part` of `parts` of both ranges into L2 (prefetches never fault).
  void Prefetch(int64_t part, int64_t parts) const {
    const int64_t lines = (bytes + 63) / 64;
    for (int64_t l = lines * part / parts; l < lines * (part + 1) / parts; ++l) {
      _mm_prefetch(reinterpret_cast<const char*>(a) + 64 * l, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(b) + 64 * l, _MM_HINT_T1);
    }
  }
};

template <class Kernel>
NextWeights NextRepack(const PackedMatrix& w, int64_t block_bytes, int64_t groups, int64_t b,
                       int64_t gs, int64_t r1) {
  if (gs >= groups) {
    b += 2;
    gs = 0;
  }
  if (b * kRowInterleave >= r1) return {};
  const std::byte* a = w.data + b * block_bytes + gs * Kernel::kTileBytes;
  const std::byte* second = (b + 1) * kRowInterleave < r1 ? a + block_bytes : a;
  return {a, second, Min64(Kernel::kSliceGroups, groups - gs) * Kernel::kTileBytes};
}

// The driver (header comment). Kernel names Act, TileAct (a token tile's activations from a
// group on, as TileAt(x, ldx, groups, token, group) gives them), kTileBytes (packed bytes
// per tile of 8 rows x 32 columns), kSliceGroups, kRepackBytes (repacked bytes per group of
// a row-block pair), kBatch (groups per batch of tile products), Config(),
// Repack(block_a, block_b, ng, bq, wd), Batch<N>(tile_act, ldx, bq, wd, g, acc) (groups
// [g, g + N) of a token tile into acc) and Narrow (the AVX-512 GEMM).
template <class Kernel>
void GemmAmx(const PackedMatrix& w, const typename Kernel::Act* x, int64_t ldx, int64_t n, float* y,
             int64_t ldy, int64_t r0, int64_t r1) {
  if (r0 >= r1 || n <= 0) return;
  if (n < kAmxTokens) {
    Kernel::Narrow(w, x, ldx, n, y, ldy, r0, r1);
    return;
  }
  NoteTileGemm();
  const TileScope tiles(Kernel::Config());
  alignas(64) int8_t bq[Kernel::kSliceGroups * Kernel::kRepackBytes];
  alignas(64) __m512 wd[Kernel::kSliceGroups];
  alignas(64) float acc[kAmxSuperTokens * kAmxRows];
  const int64_t groups = Groups(w.cols);
  const int64_t block_bytes = groups * Kernel::kTileBytes;
  const int64_t supers = (n + kAmxSuperTokens - 1) / kAmxSuperTokens;  // each >= 16 tokens
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; b += 2) {
    const std::byte* block = w.data + b * block_bytes;
    const bool pair = (b + 1) * kRowInterleave < r1;
    const std::byte* next = pair ? block + block_bytes : block;
    for (int64_t s = 0; s < supers; ++s) {
      const int64_t s0 = n * s / supers;
      const int64_t s1 = n * (s + 1) / supers;
      for (int64_t gs = 0; gs < groups; gs += Kernel::kSliceGroups) {
        const int64_t ng = Min64(Kernel::kSliceGroups, groups - gs);
        Kernel::Repack(block + gs * Kernel::kTileBytes, next + gs * Kernel::kTileBytes, ng, bq, wd);
        const NextWeights ahead = NextRepack<Kernel>(w, block_bytes, groups, b, gs + ng, r1);
        const int64_t tiles = (s1 - s0 + kAmxTokens - 1) / kAmxTokens;
        for (int64_t t0 = s0, i = 0; t0 < s1; t0 += kAmxTokens, ++i) {
          const int64_t tt = Min64(t0, s1 - kAmxTokens);  // the last tile may overlap
          ahead.Prefetch(i, tiles);
          AmxTile<Kernel>(Kernel::TileAt(x, ldx, groups, tt, gs), ldx, bq, wd, ng, gs == 0,
                          acc + (tt - s0) * kAmxRows, static_cast<int>(t0 - tt));
        }
      }
      for (int64_t t = s0; t < s1; ++t) {
        StoreRowsPair(_mm512_load_ps(acc + (t - s0) * kAmxRows), y + t * ldy, b, pair, r0, r1);
      }
    }
  }
}

}  // namespace
}  // namespace ari::runtime::kernels::internal
