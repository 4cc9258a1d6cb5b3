// Internal: the block/tile loop of the packed-weight GEMMs (prefill), shared by the ISA
// files (x86/matmul_avx512.cc, x86/gemm_w4a8_avx2.cc, arm/matmul_neon.cc,
// arm/matmul_dotprod.cc, arm/matmul_i8mm.cc). The driver owns the loops, the micro-kernel
// (a struct of the ISA file, below) owns all arithmetic; the driver has no intrinsics.
//
// y[t * ldy + r] for rows r in [r0, r1) and tokens t in [0, n):
// - Blocking: the row blocks (8 rows, layout.h) that meet [r0, r1) are taken in chunks of
//   about kGemmChunkWeightBytes packed bytes (L2-resident); inside a chunk, token tiles
//   sweep all its row blocks, so every weight byte is read from memory once per call and a
//   tile's activations stay in L1 / L2.
// - Token tiles: Kernel::kTileTokens lists the tile widths, widest first; the next tile
//   is the widest that fits the tokens left. Fewer tokens than the narrowest width form
//   the tail tile: it runs Kernel::Tile<nt> (one instantiation per tail size), or, with
//   Kernel::kTailPadded, the narrowest width. xt[0 .. widest) are the tile's activation
//   rows, entries past its last token repeat that token (a kernel may read them all; a
//   padded tail computes them and the driver drops them).
// - Micro-kernels: the driver picks Kernel::Tile<NT> for the tile's width with a chain
//   of compile-time cases (a switch over the widths above). GemmTiles is `flatten`: every
//   micro-kernel and store is inlined into the loop nest (no call per tile), as when each
//   ISA file had its own copy of these loops.
//   GemmRowBlockTiles<Kernel> (W4A8): per (row block, token tile)
//     Kernel::Tile<NT>(block, groups, xt, acc) computes acc[t] = the 8 row outputs of
//     token t, then the driver calls Kernel::Store(acc[t], y + (t0 + t) * ldy, b, r0, r1)
//     per token of the tile (the rows of block b that fall in [r0, r1)).
//   GemmRowBlockPairTiles<Kernel> (W4A8, 512-bit): per (pair of row blocks b, b + 1,
//     token tile) Kernel::Tile<NT>(block_b, block_b1, groups, xt, acc) computes acc[t] =
//     the 16 row outputs of token t (8 of b, then 8 of b + 1), then
//     Kernel::Store(acc[t], y + (t0 + t) * ldy, b, pair, r0, r1); the last block of a chunk
//     with no partner is passed twice with pair = false (only block b is stored).
//   GemmRowPairTiles<Kernel> (W8A16): per (row pair i, i + 1 of a row block, token tile),
//     pairs with no row in [r0, r1) skipped, Kernel::Tile<NT>(block, groups, i, xt, out)
//     gives out[p][t] = row i + p, token t; the driver stores the rows in [r0, r1).
// Kernel also names Act (the activation row type), kTileBytes (packed bytes per tile of
// 8 rows x 32 columns) and kTailPadded, which it inherits from W8A16Tiles or W4A8Tiles;
// Acc is the row-block kernels' accumulator array (acc[t] per token).
//
// Per translation unit: this header is included by files built with different ISA flags,
// so it defines nothing that the linker could share between them (no COMDAT, see
// kernel_tiers.h): everything is in an unnamed namespace, so each instantiation is
// compiled with the includer's flags and is local to it.
#pragma once

#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels::internal {
namespace {

// Packed weight bytes per row chunk (L2-resident while the token tiles sweep it).
constexpr int64_t kGemmChunkWeightBytes = int64_t{256} * 1024;

// Bases of the micro-kernel structs: what the W8A16 and the W4A8 GEMMs fix.
struct W8A16Tiles {
  using Act = BlockQ16A;
  static constexpr int64_t kTileBytes = kW8TileBytes;
  static constexpr bool kTailPadded = false;
};
struct W4A8Tiles {
  using Act = BlockQ8A;
  static constexpr int64_t kTileBytes = kW4TileBytes;
  static constexpr bool kTailPadded = false;
};

template <class Kernel>
constexpr int WidestTile() {
  return Kernel::kTileTokens[0];
}

template <class Kernel>
constexpr int NarrowestTile() {
  int w = WidestTile<Kernel>();
  for (const int v : Kernel::kTileTokens) w = v;
  return w;
}

// Tokens in the next tile when `left` tokens remain.
template <class Kernel>
constexpr int NextTileTokens(int64_t left) {
  for (const int v : Kernel::kTileTokens) {
    if (left >= v) return v;
  }
  return static_cast<int>(left);
}

// Whether the driver runs Kernel::Tile<w> (a tile width, or an unpadded tail size).
template <class Kernel>
constexpr bool RunsWidth(int w) {
  for (const int v : Kernel::kTileTokens) {
    if (v == w) return true;
  }
  return !Kernel::kTailPadded && w < NarrowestTile<Kernel>();
}

// Runs Kernel::Tile<W>(args...) for the micro-kernel width W that computes a tile of nt
// tokens: cases from the widest width down, the narrowest width run is the default case.
template <class Kernel, int W, class... Args>
inline void RunTile(int nt, Args&... args) {
  constexpr int kLast = Kernel::kTailPadded ? NarrowestTile<Kernel>() : 1;
  if constexpr (W == kLast) {
    Kernel::template Tile<W>(args...);
  } else {
    if constexpr (RunsWidth<Kernel>(W)) {
      if (nt == W) {
        Kernel::template Tile<W>(args...);
        return;
      }
    }
    RunTile<Kernel, W - 1>(nt, args...);
  }
}

// The two shapes (header comment), per row block b and token tile t0 .. t0 + nt: the
// micro-kernel, then the stores of its rows that fall in [r0, r1).
template <class Kernel>
struct RowBlockStep {
  static constexpr int64_t kBlocks = 1;
  static void Run(const std::byte* block, int64_t groups, const typename Kernel::Act* const* xt,
                  int64_t b, int64_t t0, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1) {
    typename Kernel::Acc acc;
    RunTile<Kernel, WidestTile<Kernel>()>(nt, block, groups, xt, acc);
    for (int t = 0; t < nt; ++t) Kernel::Store(acc[t], y + (t0 + t) * ldy, b, r0, r1);
  }
};

template <class Kernel>
struct RowBlockPairStep {
  static constexpr int64_t kBlocks = 2;
  static void Run(const std::byte* block, int64_t block_bytes, bool pair, int64_t groups,
                  const typename Kernel::Act* const* xt, int64_t b, int64_t t0, int nt, float* y,
                  int64_t ldy, int64_t r0, int64_t r1) {
    typename Kernel::Acc acc;
    const std::byte* next = pair ? block + block_bytes : block;
    RunTile<Kernel, WidestTile<Kernel>()>(nt, block, next, groups, xt, acc);
    for (int t = 0; t < nt; ++t) Kernel::Store(acc[t], y + (t0 + t) * ldy, b, pair, r0, r1);
  }
};

template <class Kernel>
struct RowPairStep {
  static constexpr int64_t kBlocks = 1;
  static void Run(const std::byte* block, int64_t groups, const typename Kernel::Act* const* xt,
                  int64_t b, int64_t t0, int nt, float* y, int64_t ldy, int64_t r0, int64_t r1) {
    for (int i = 0; i < kRowInterleave; i += 2) {
      const int64_t row = b * kRowInterleave + i;
      if (row + 1 < r0 || row >= r1) continue;
      float out[2][WidestTile<Kernel>()];
      RunTile<Kernel, WidestTile<Kernel>()>(nt, block, groups, i, xt, out);
      for (int p = 0; p < 2; ++p) {
        if (row + p < r0 || row + p >= r1) continue;
        for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + row + p] = out[p][t];
      }
    }
  }
};

// The blocking loops (header comment), Step::Run per (row block, token tile). `flatten`:
// every call in it is inlined, each micro-kernel into its own case of the loop nest.
template <class Kernel, class Step>
[[gnu::flatten]] void GemmTiles(const PackedMatrix& w, const typename Kernel::Act* x, int64_t ldx,
                                int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (r0 >= r1 || n <= 0) return;
  const int64_t groups = Groups(w.cols);
  const int64_t block_bytes = groups * Kernel::kTileBytes;
  const int64_t b0 = r0 / kRowInterleave;
  const int64_t b1 = (r1 + kRowInterleave - 1) / kRowInterleave;
  // Whole steps per chunk (a pair step takes two row blocks).
  const int64_t chunk =
      Max64(1, kGemmChunkWeightBytes / block_bytes / Step::kBlocks) * Step::kBlocks;
  for (int64_t cb = b0; cb < b1; cb += chunk) {
    const int64_t ce = Min64(b1, cb + chunk);
    for (int64_t t0 = 0; t0 < n;) {
      const int nt = NextTileTokens<Kernel>(n - t0);
      const typename Kernel::Act* xt[WidestTile<Kernel>()];
      for (int t = 0; t < WidestTile<Kernel>(); ++t) {
        xt[t] = x + (t0 + Min64(t, nt - 1)) * ldx;
      }
      for (int64_t b = cb; b < ce; b += Step::kBlocks) {
        if constexpr (Step::kBlocks == 2) {
          Step::Run(w.data + b * block_bytes, block_bytes, b + 1 < ce, groups, xt, b, t0, nt, y,
                    ldy, r0, r1);
        } else {
          Step::Run(w.data + b * block_bytes, groups, xt, b, t0, nt, y, ldy, r0, r1);
        }
      }
      t0 += nt;
    }
  }
}

// W4A8 shape: one micro-kernel call per (row block, token tile), 8 rows x nt tokens.
template <class Kernel>
void GemmRowBlockTiles(const PackedMatrix& w, const typename Kernel::Act* x, int64_t ldx, int64_t n,
                       float* y, int64_t ldy, int64_t r0, int64_t r1) {
  GemmTiles<Kernel, RowBlockStep<Kernel>>(w, x, ldx, n, y, ldy, r0, r1);
}

// W4A8 shape on 512-bit vectors: one micro-kernel call per (two row blocks, token tile),
// 16 rows x nt tokens.
template <class Kernel>
void GemmRowBlockPairTiles(const PackedMatrix& w, const typename Kernel::Act* x, int64_t ldx,
                           int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  GemmTiles<Kernel, RowBlockPairStep<Kernel>>(w, x, ldx, n, y, ldy, r0, r1);
}

// W8A16 shape: one micro-kernel call per (row pair, token tile), 2 rows x nt tokens.
template <class Kernel>
void GemmRowPairTiles(const PackedMatrix& w, const typename Kernel::Act* x, int64_t ldx, int64_t n,
                      float* y, int64_t ldy, int64_t r0, int64_t r1) {
  GemmTiles<Kernel, RowPairStep<Kernel>>(w, x, ldx, n, y, ldy, r0, r1);
}

}  // namespace
}  // namespace ari::runtime::kernels::internal
