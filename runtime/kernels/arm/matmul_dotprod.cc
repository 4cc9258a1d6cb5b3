// AArch64 NEON + dot product (armv8.2-a+dotprod) W4A8 kernels. The packed W4 layout puts,
// for each v = 0..3 and half h, 4 consecutive quants of rows 4h .. 4h+3 in the four 4-byte
// lanes of 16 bytes (layout.h), so `sdot` against one 4-byte activation quad (by element:
// lane v of the register holding the token's quants 0-15 or 16-31) adds each row's 4
// products into that row's own int32 lane: 16 sdot per group give the exact group dots of
// all 8 rows, no horizontal reduction. Then fma(float(isum - 8 sum), d_w * d_a, acc) per
// group as in the scalar reference: bit-identical results. The GEMM is the micro-kernel
// W4BlockTiles (8 rows x 4 tokens) in the loops of gemm_driver.h.
// By element instead of broadcast quads (for 4 tokens 32 `ldr w` + `dup` per group, now
// 8 `ldr q`): the 4-token group loop went from 272 instructions with 56 q-register stack
// accesses to 188 with 27, the GEMV's from 70 to 59 (g++ 12 -O3, scripts/loop_stats.py on
// this file's object, docs/deployment.md). Not timed: no ARM hardware here, only qemu.
//
// W8A16 and the element-wise kernels of this tier are the baseline NEON ones.
// ISA-specific file: no std:: templates, nothing runs before the tier is checked.
#include <arm_neon.h>

#include "runtime/kernels/arm/neon_common.h"
#include "runtime/kernels/gemm_driver.h"
#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels::internal {
namespace {

// Quad v of every group dot: the weights' quants 4v .. 4v+3 and 16+4v .. 16+4v+3 of each
// row (both halves h) against lane v of the token's activations (by-element `sdot`: the
// 4 activation bytes are read from the register, not broadcast from memory).
template <int V, int NT>
inline void QuadDots(const uint8_t* p, const int8x16_t* a_lo, const int8x16_t* a_hi,
                     int32x4_t isum[][2]) {
  const uint8x16_t mask = vdupq_n_u8(0x0f);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const uint8x16_t raw = vld1q_u8(p + 32 * V + 16 * h);
    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(raw, mask));
    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
    for (int t = 0; t < NT; ++t) {
      isum[t][h] = vdotq_laneq_s32(isum[t][h], lo, a_lo[t], V);
      isum[t][h] = vdotq_laneq_s32(isum[t][h], hi, a_hi[t], V);
    }
  }
}

// Per token t of the tile: isum[t][h] (rows 4h .. 4h+3) of one group. Nibbles are unpacked
// once per quad and reused for every token; each token's 32 activations are two registers
// (quants 0-15, 16-31) for the whole group.
template <int NT>
inline void GroupDots(const std::byte* nibbles, const BlockQ8A* const* xt, int64_t g,
                      int32x4_t isum[][2]) {
  const auto* p = reinterpret_cast<const uint8_t*>(nibbles);
  int8x16_t a_lo[NT], a_hi[NT];
  for (int t = 0; t < NT; ++t) {
    isum[t][0] = isum[t][1] = vdupq_n_s32(0);
    a_lo[t] = vld1q_s8(xt[t][g].qs);
    a_hi[t] = vld1q_s8(xt[t][g].qs + 16);
  }
  QuadDots<0, NT>(p, a_lo, a_hi, isum);
  QuadDots<1, NT>(p, a_lo, a_hi, isum);
  QuadDots<2, NT>(p, a_lo, a_hi, isum);
  QuadDots<3, NT>(p, a_lo, a_hi, isum);
}

void GemvW4A8Dotprod(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  const int64_t groups = Groups(w.cols);
  const BlockQ8A* xt[1] = {x};
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* tile = w.data + b * groups * kW4TileBytes;
    float32x4_t acc_lo = vdupq_n_f32(0.0f), acc_hi = acc_lo;
    for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
      int32x4_t isum[1][2];
      GroupDots<1>(tile + 16, xt, g, isum);
      float32x4_t dw_lo, dw_hi;
      LoadScales(tile, &dw_lo, &dw_hi);
      acc_lo = W4Accumulate(isum[0][0], x[g], dw_lo, acc_lo);
      acc_hi = W4Accumulate(isum[0][1], x[g], dw_hi, acc_hi);
    }
    StoreRows(acc_lo, acc_hi, y, b, r0, r1);
  }
}

// GEMM micro-kernel (gemm_driver.h, row blocks): one row block (8 rows) against NT tokens
// over all groups, acc[t] = the 8 row outputs of token t (rows 0-3, 4-7).
struct W4BlockTiles : NeonW4A8Tiles {
  static constexpr int kTileTokens[] = {4};  // tails 1-3
  using Acc = float32x4_t[4][2];

  template <int NT>
  static void Tile(const std::byte* block, int64_t groups, const BlockQ8A* const* xt, Acc& acc) {
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = vdupq_n_f32(0.0f);
    const std::byte* tile = block;
    for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
      int32x4_t isum[NT][2];
      GroupDots<NT>(tile + 16, xt, g, isum);
      float32x4_t dw_lo, dw_hi;
      LoadScales(tile, &dw_lo, &dw_hi);
      for (int t = 0; t < NT; ++t) {
        const BlockQ8A& a = xt[t][g];
        acc[t][0] = W4Accumulate(isum[t][0], a, dw_lo, acc[t][0]);
        acc[t][1] = W4Accumulate(isum[t][1], a, dw_hi, acc[t][1]);
      }
    }
  }
};

}  // namespace

namespace dotprod {
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  GemvW4A8Dotprod(w, x, y, r0, r1);
}
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1) {
  GemmRowBlockTiles<W4BlockTiles>(w, x, ldx, n, y, ldy, r0, r1);
}
}  // namespace dotprod

}  // namespace ari::runtime::kernels::internal
