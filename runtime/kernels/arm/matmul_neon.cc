// AArch64 baseline NEON (armv8-a) matmul kernels. Same formats and arithmetic contracts as
// matmul_avx2.cc (see layout.h and scalar_matmul.cc):
//
// W8A16: per row and group, 4 fp32 lanes form s = sum q * x (one mul, then 7 fma in element
//   order; int8 weights widened sxtl -> scvtf, fp16 activations widened with fcvtl), then
//   acc = fma(s, d, acc) over groups, then a fixed pairwise horizontal sum (faddp). GEMV and
//   GEMM use the same per-(row, token) operation sequence, so GEMM output is bit-identical
//   to N GEMVs; against the scalar reference only the fp32 summation order differs.
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

// 32 int8 quants -> 8 x 4 fp32.
inline void LoadQ8x32(const std::byte* p, float32x4_t w[8]) {
  const int8x16_t a = vld1q_s8(reinterpret_cast<const int8_t*>(p));
  const int8x16_t b = vld1q_s8(reinterpret_cast<const int8_t*>(p) + 16);
  const int16x8_t h[4] = {vmovl_s8(vget_low_s8(a)), vmovl_high_s8(a), vmovl_s8(vget_low_s8(b)),
                          vmovl_high_s8(b)};
  for (int k = 0; k < 4; ++k) {
    w[2 * k] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(h[k])));
    w[2 * k + 1] = vcvtq_f32_s32(vmovl_high_s16(h[k]));
  }
}
// 8 int8 quants -> 2 x 4 fp32.
inline void LoadQ8x8(const std::byte* p, float32x4_t* w0, float32x4_t* w1) {
  const int16x8_t h = vmovl_s8(vld1_s8(reinterpret_cast<const int8_t*>(p)));
  *w0 = vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
  *w1 = vcvtq_f32_s32(vmovl_high_s16(h));
}

// ---------------------------------------------------------------- W8A16

void GemvW8A16Neon(const PackedMatrix& w, const uint16_t* x, float* y, int64_t r0, int64_t r1) {
  const int64_t groups = Groups(w.cols);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* tile = w.data + b * groups * kW8TileBytes;
    float32x4_t acc[kRowInterleave];
    for (auto& a : acc) a = vdupq_n_f32(0.0f);
    for (int64_t g = 0; g < groups; ++g, tile += kW8TileBytes) {
      float32x4_t xv[8];
      for (int c = 0; c < 8; ++c) xv[c] = LoadF16x4(x + g * kGroup + 4 * c);
      float32x4_t d_lo, d_hi;
      LoadScales(tile, &d_lo, &d_hi);
      float d[kRowInterleave];
      vst1q_f32(d, d_lo);
      vst1q_f32(d + 4, d_hi);
#pragma GCC unroll 8
      for (int i = 0; i < kRowInterleave; ++i) {
        float32x4_t wv[8];
        LoadQ8x32(tile + 16 + 32 * i, wv);
        float32x4_t s = vmulq_f32(wv[0], xv[0]);
        for (int c = 1; c < 8; ++c) s = vfmaq_f32(s, wv[c], xv[c]);
        acc[i] = vfmaq_f32(acc[i], s, vdupq_n_f32(d[i]));
      }
    }
    for (int i = 0; i < kRowInterleave; ++i) {
      const int64_t r = b * kRowInterleave + i;
      if (r >= r0 && r < r1) y[r] = vaddvq_f32(acc[i]);
    }
  }
}

// W8A16 GEMM micro-kernel (gemm_driver.h, row pairs): rows i, i+1 of one row block
// against NT tokens, the same per-(row, token) operations as GemvW8A16Neon.
struct W8PairTiles : W8A16Tiles {
  static constexpr int kTileTokens[] = {4};  // 2 rows x 4 tokens, tails 1-3

  template <int NT>
  static void Tile(const std::byte* block, int64_t groups, int i, const uint16_t* const* xt,
                   float out[2][kTileTokens[0]]) {
    float32x4_t acc0[NT], acc1[NT];
    for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = vdupq_n_f32(0.0f);
    const std::byte* tile = block;
    for (int64_t g = 0; g < groups; ++g, tile += kW8TileBytes) {
      const std::byte* q0 = tile + 16 + 32 * i;
      const std::byte* q1 = q0 + 32;
      float32x4_t s0[NT], s1[NT];
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {  // 8 quants of each row per step
        float32x4_t w0a, w0b, w1a, w1b;
        LoadQ8x8(q0 + 8 * c, &w0a, &w0b);
        LoadQ8x8(q1 + 8 * c, &w1a, &w1b);
#pragma GCC unroll 4
        for (int t = 0; t < NT; ++t) {
          const float32x4_t xa = LoadF16x4(xt[t] + g * kGroup + 8 * c);
          const float32x4_t xb = LoadF16x4(xt[t] + g * kGroup + 8 * c + 4);
          s0[t] = c == 0 ? vmulq_f32(w0a, xa) : vfmaq_f32(s0[t], w0a, xa);
          s1[t] = c == 0 ? vmulq_f32(w1a, xa) : vfmaq_f32(s1[t], w1a, xa);
          s0[t] = vfmaq_f32(s0[t], w0b, xb);
          s1[t] = vfmaq_f32(s1[t], w1b, xb);
        }
      }
      const float32x4_t d0 = vdupq_n_f32(
          vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(LoadU16(tile + 2 * i)))), 0));
      const float32x4_t d1 = vdupq_n_f32(vgetq_lane_f32(
          vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(LoadU16(tile + 2 * i + 2)))), 0));
      for (int t = 0; t < NT; ++t) {
        acc0[t] = vfmaq_f32(acc0[t], s0[t], d0);
        acc1[t] = vfmaq_f32(acc1[t], s1[t], d1);
      }
    }
    for (int t = 0; t < NT; ++t) {
      out[0][t] = vaddvq_f32(acc0[t]);
      out[1][t] = vaddvq_f32(acc1[t]);
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
void GemvW8A16(const PackedMatrix& w, const uint16_t* x, float* y, int64_t r0, int64_t r1) {
  GemvW8A16Neon(w, x, y, r0, r1);
}
void GemmW8A16(const PackedMatrix& w, const uint16_t* x, int64_t ldx, int64_t n, float* y,
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
