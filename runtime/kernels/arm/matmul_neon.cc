// AArch64 baseline NEON (armv8-a) matmul kernels. Same formats and arithmetic contracts as
// matmul_avx2.cc (see layout.h and scalar_matmul.cc):
//
// W8A16: per row and group, int8 weights widened (sxtl) times int16 activations by widening
//   smull/smlal into 4 int32 lanes (exact), a pairwise add (addp) tree to one int32 per row,
//   then fma(float(isum), d_w * d_a, acc) per group: bit-identical to the scalar reference.
// W4A8 (no dot-product instructions): nibbles are unpacked to int8 (and / ushr), multiplied
//   with broadcast 4-byte activation quads by widening smull/smlal into int16 lanes (at
//   most 8 products of |15 * 127| per lane: exact), then pairwise widened to one int32 per
//   row; then fma(float(isum - 8 sum), d_w * d_a, acc) per group: bit-identical to the
//   scalar reference.
// The GEMMs are micro-kernels (W8PairTiles: 2 rows x 4 tokens, W4BlockTiles: 8 rows x 4
// tokens) run by the block/tile loops of gemm_driver.h, as on x86: row chunks of about
// 256 KiB of packed weights (L2), token tiles inside; every weight byte is read from
// memory once per call.
//
// ISA-specific file: no std:: templates, nothing runs before the tier is checked
// (kernel_tiers.h).
#include <arm_neon.h>

#include "runtime/kernels/arm/neon_common.h"
#include "runtime/kernels/gemm_driver.h"
#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels::internal {
namespace {

// ---------------------------------------------------------------- W8A16

// Row q's 32 int8 quants widened to int16 (sxtl).
inline void WidenQ8(const std::byte* q, int16x8_t h[4]) {
  const int8x16_t a = vld1q_s8(reinterpret_cast<const int8_t*>(q));
  const int8x16_t b = vld1q_s8(reinterpret_cast<const int8_t*>(q) + 16);
  h[0] = vmovl_s8(vget_low_s8(a));
  h[1] = vmovl_high_s8(a);
  h[2] = vmovl_s8(vget_low_s8(b));
  h[3] = vmovl_high_s8(b);
}

// 4 int32 lanes whose sum is the exact dot of widened weights h with activations x
// (|product| <= 128 * 32767, 8 per lane).
inline int32x4_t DotQ16(const int16x8_t h[4], const int16x8_t x[4]) {
  int32x4_t s = vmull_s16(vget_low_s16(h[0]), vget_low_s16(x[0]));
  s = vmlal_high_s16(s, h[0], x[0]);
  for (int c = 1; c < 4; ++c) {
    s = vmlal_s16(s, vget_low_s16(h[c]), vget_low_s16(x[c]));
    s = vmlal_high_s16(s, h[c], x[c]);
  }
  return s;
}

// Lane k = the sum of the lanes of s[k] (exact int32).
inline int32x4_t Sum4(const int32x4_t s[4]) {
  return vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
}

inline void LoadQ16(const BlockQ16A& a, int16x8_t x[4]) {
  for (int c = 0; c < 4; ++c) x[c] = vld1q_s16(a.qs + 8 * c);
}

void GemvW8A16Neon(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  const int64_t groups = Groups(w.cols);
  const float* xd = Q16Scales(x, groups);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* tile = w.data + b * groups * kW8TileBytes;
    float32x4_t acc_lo = vdupq_n_f32(0.0f), acc_hi = vdupq_n_f32(0.0f);
    for (int64_t g = 0; g < groups; ++g, tile += kW8TileBytes) {
      int16x8_t xv[4];
      LoadQ16(x[g], xv);
      int32x4_t s[kRowInterleave];
#pragma GCC unroll 8
      for (int i = 0; i < kRowInterleave; ++i) {
        int16x8_t h[4];
        WidenQ8(tile + 16 + 32 * i, h);
        s[i] = DotQ16(h, xv);
      }
      float32x4_t d_lo, d_hi;
      LoadScales(tile, &d_lo, &d_hi);
      const float32x4_t da = vdupq_n_f32(xd[g]);
      acc_lo = vfmaq_f32(acc_lo, vcvtq_f32_s32(Sum4(s)), vmulq_f32(d_lo, da));
      acc_hi = vfmaq_f32(acc_hi, vcvtq_f32_s32(Sum4(s + 4)), vmulq_f32(d_hi, da));
    }
    StoreRows(acc_lo, acc_hi, y, b, r0, r1);
  }
}

// W8A16 GEMM micro-kernel (gemm_driver.h, row pairs): rows i, i+1 of one row block against
// 4 tokens, one token per fp32 lane; per (row, token) the GEMV's operations.
struct W8PairTiles : W8A16Tiles {
  static constexpr int kTileTokens[] = {4};  // 2 rows x 4 tokens; tails compute all 4 lanes

  template <int NT>
  static void Tile(const std::byte* block, int64_t groups, int i, const BlockQ16A* const* xt,
                   float out[2][kTileTokens[0]]) {
    float32x4_t acc0 = vdupq_n_f32(0.0f), acc1 = vdupq_n_f32(0.0f);
    const float* xd[4];
    for (int t = 0; t < 4; ++t) xd[t] = Q16Scales(xt[t], groups);
    const std::byte* tile = block;
    for (int64_t g = 0; g < groups; ++g, tile += kW8TileBytes) {
      int16x8_t h0[4], h1[4];
      WidenQ8(tile + 16 + 32 * i, h0);
      WidenQ8(tile + 16 + 32 * (i + 1), h1);
      int32x4_t s0[4], s1[4];
      float da[4];
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {  // xt[t] past the tile's last token repeats it
        int16x8_t xv[4];
        LoadQ16(xt[t][g], xv);
        s0[t] = DotQ16(h0, xv);
        s1[t] = DotQ16(h1, xv);
        da[t] = xd[t][g];
      }
      float32x4_t d_lo, d_hi;
      LoadScales(tile, &d_lo, &d_hi);
      float dw[kRowInterleave];
      vst1q_f32(dw, d_lo);
      vst1q_f32(dw + 4, d_hi);
      const float32x4_t dav = vld1q_f32(da);
      acc0 = vfmaq_f32(acc0, vcvtq_f32_s32(Sum4(s0)), vmulq_f32(vdupq_n_f32(dw[i]), dav));
      acc1 = vfmaq_f32(acc1, vcvtq_f32_s32(Sum4(s1)), vmulq_f32(vdupq_n_f32(dw[i + 1]), dav));
    }
    float o0[4], o1[4];
    vst1q_f32(o0, acc0);
    vst1q_f32(o1, acc1);
    for (int t = 0; t < NT; ++t) {
      out[0][t] = o0[t];
      out[1][t] = o1[t];
    }
  }
};

// ---------------------------------------------------------------- W4A8

// Nibble bytes of one tile: for v = 0..3 and half h (rows 4h .. 4h+3), 16 bytes whose
// 4-byte lane r holds 4 consecutive quants of row 4h + r (low nibbles: quants 4v .. 4v+3,
// high nibbles: 16 + 4v ..).
struct W4Tile {
  int8x16_t lo[4][2];
  int8x16_t hi[4][2];
};

inline void UnpackW4(const std::byte* nibbles, W4Tile* t) {
  const uint8x16_t mask = vdupq_n_u8(0x0f);
  const auto* p = reinterpret_cast<const uint8_t*>(nibbles);
  for (int v = 0; v < 4; ++v) {
    for (int h = 0; h < 2; ++h) {
      const uint8x16_t raw = vld1q_u8(p + 32 * v + 16 * h);
      t->lo[v][h] = vreinterpretq_s8_u8(vandq_u8(raw, mask));
      t->hi[v][h] = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
    }
  }
}

// Exact per-row group dots for rows 4h .. 4h+3 (one int32 lane per row).
inline int32x4_t DotHalf(const W4Tile& t, int h, const int8x16_t a_lo[4], const int8x16_t a_hi[4]) {
  int16x8_t p01 = vmull_s8(vget_low_s8(t.lo[0][h]), vget_low_s8(a_lo[0]));  // rows 0, 1
  int16x8_t p23 = vmull_high_s8(t.lo[0][h], a_lo[0]);                       // rows 2, 3
  p01 = vmlal_s8(p01, vget_low_s8(t.hi[0][h]), vget_low_s8(a_hi[0]));
  p23 = vmlal_high_s8(p23, t.hi[0][h], a_hi[0]);
  for (int v = 1; v < 4; ++v) {
    p01 = vmlal_s8(p01, vget_low_s8(t.lo[v][h]), vget_low_s8(a_lo[v]));
    p23 = vmlal_high_s8(p23, t.lo[v][h], a_lo[v]);
    p01 = vmlal_s8(p01, vget_low_s8(t.hi[v][h]), vget_low_s8(a_hi[v]));
    p23 = vmlal_high_s8(p23, t.hi[v][h], a_hi[v]);
  }
  return vpaddq_s32(vpaddlq_s16(p01), vpaddlq_s16(p23));
}

inline void LoadActQuads(const BlockQ8A& a, int8x16_t a_lo[4], int8x16_t a_hi[4]) {
  for (int v = 0; v < 4; ++v) {
    a_lo[v] = Bcast4(a.qs + 4 * v);
    a_hi[v] = Bcast4(a.qs + 16 + 4 * v);
  }
}

void GemvW4A8Neon(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  const int64_t groups = Groups(w.cols);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* tile = w.data + b * groups * kW4TileBytes;
    float32x4_t acc_lo = vdupq_n_f32(0.0f), acc_hi = acc_lo;
    for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
      W4Tile t;
      UnpackW4(tile + 16, &t);
      int8x16_t a_lo[4], a_hi[4];
      LoadActQuads(x[g], a_lo, a_hi);
      float32x4_t dw_lo, dw_hi;
      LoadScales(tile, &dw_lo, &dw_hi);
      acc_lo = W4Accumulate(DotHalf(t, 0, a_lo, a_hi), x[g], dw_lo, acc_lo);
      acc_hi = W4Accumulate(DotHalf(t, 1, a_lo, a_hi), x[g], dw_hi, acc_hi);
    }
    StoreRows(acc_lo, acc_hi, y, b, r0, r1);
  }
}

// W4A8 GEMM micro-kernel (gemm_driver.h, row blocks): one row block (8 rows) against NT
// tokens over all groups, acc[t] = the 8 row outputs of token t (rows 0-3, 4-7).
struct W4BlockTiles : NeonW4A8Tiles {
  static constexpr int kTileTokens[] = {4};  // tails 1-3
  using Acc = float32x4_t[4][2];

  template <int NT>
  static void Tile(const std::byte* block, int64_t groups, const BlockQ8A* const* xt, Acc& acc) {
    for (int t = 0; t < NT; ++t) acc[t][0] = acc[t][1] = vdupq_n_f32(0.0f);
    const std::byte* tile = block;
    for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
      W4Tile wt;
      UnpackW4(tile + 16, &wt);
      float32x4_t dw_lo, dw_hi;
      LoadScales(tile, &dw_lo, &dw_hi);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const BlockQ8A& a = xt[t][g];
        int8x16_t a_lo[4], a_hi[4];
        LoadActQuads(a, a_lo, a_hi);
        acc[t][0] = W4Accumulate(DotHalf(wt, 0, a_lo, a_hi), a, dw_lo, acc[t][0]);
        acc[t][1] = W4Accumulate(DotHalf(wt, 1, a_lo, a_hi), a, dw_hi, acc[t][1]);
      }
    }
  }
};

}  // namespace

namespace neon {
void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  GemvW8A16Neon(w, x, y, r0, r1);
}
void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1) {
  GemmRowPairTiles<W8PairTiles>(w, x, ldx, n, y, ldy, r0, r1);
}
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  GemvW4A8Neon(w, x, y, r0, r1);
}
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1) {
  GemmRowBlockTiles<W4BlockTiles>(w, x, ldx, n, y, ldy, r0, r1);
}
}  // namespace neon

}  // namespace ari::runtime::kernels::internal
