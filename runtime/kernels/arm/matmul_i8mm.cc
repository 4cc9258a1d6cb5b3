// AArch64 NEON + int8 matrix multiply (armv8.2-a+i8mm+dotprod) W4A8 GEMM. `smmla` multiplies
// a 2x8 int8 matrix by the transpose of another 2x8 one into a 2x2 int32 tile: here two
// weight rows x two tokens over 8 consecutive quants, twice the multiply-adds of an `sdot`
// per instruction. The packed W4 layout gives rows their quants 4 at a time (layout.h);
// zipping the 4-byte lanes of quads v and v+1 (zip1/zip2) forms the 2x8 row pairs without
// touching memory, and 8 activation bytes of each token form the other operand. Group dots
// are exact int32 and the per-group fma(float(isum - 8 sum), d_w * d_a, acc) is the scalar
// reference's, so results are bit-identical to it (and to the dotprod GEMV this tier
// uses for decode, where a second token would be wasted work). The GEMM is the micro-kernel
// W4PairBlockTiles (8 rows x 2 tokens) in the loops of gemm_driver.h.
//
// ISA-specific file: no std:: templates, nothing runs before the tier is checked.
#include <arm_neon.h>

#include "runtime/kernels/arm/neon_common.h"
#include "runtime/kernels/gemm_driver.h"
#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels::internal {
namespace {

inline int8x16_t Zip1(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s32(vzip1q_s32(vreinterpretq_s32_s8(a), vreinterpretq_s32_s8(b)));
}
inline int8x16_t Zip2(int8x16_t a, int8x16_t b) {
  return vreinterpretq_s8_s32(vzip2q_s32(vreinterpretq_s32_s8(a), vreinterpretq_s32_s8(b)));
}

// One row block (8 rows) against tokens x0, x1 over all groups: acc[token][half].
void W4PairBlock(const std::byte* block, int64_t groups, const BlockQ8A* x0, const BlockQ8A* x1,
                 float32x4_t acc[2][2]) {
  acc[0][0] = acc[0][1] = acc[1][0] = acc[1][1] = vdupq_n_f32(0.0f);
  const uint8x16_t mask = vdupq_n_u8(0x0f);
  const std::byte* tile = block;
  for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
    // Activation operand per 8-quant chunk c: token 0's 8 bytes, then token 1's.
    int8x16_t act[4];
    for (int c = 0; c < 4; ++c)
      act[c] = vcombine_s8(vld1_s8(x0[g].qs + 8 * c), vld1_s8(x1[g].qs + 8 * c));
    float32x4_t dw[2];
    LoadScales(tile, &dw[0], &dw[1]);
    const auto* p = reinterpret_cast<const uint8_t*>(tile + 16);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {  // rows 4h .. 4h+3
      int8x16_t lo[4], hi[4];
      for (int v = 0; v < 4; ++v) {
        const uint8x16_t raw = vld1q_u8(p + 32 * v + 16 * h);
        lo[v] = vreinterpretq_s8_u8(vandq_u8(raw, mask));
        hi[v] = vreinterpretq_s8_u8(vshrq_n_u8(raw, 4));
      }
      // Quants 0-7: lo[0], lo[1]; 8-15: lo[2], lo[3]; 16-23: hi[0], hi[1]; 24-31: hi[2], hi[3].
      int32x4_t m01 = vdupq_n_s32(0), m23 = m01;  // rows (0,1) and (2,3) x tokens (0,1)
      m01 = vmmlaq_s32(m01, Zip1(lo[0], lo[1]), act[0]);
      m23 = vmmlaq_s32(m23, Zip2(lo[0], lo[1]), act[0]);
      m01 = vmmlaq_s32(m01, Zip1(lo[2], lo[3]), act[1]);
      m23 = vmmlaq_s32(m23, Zip2(lo[2], lo[3]), act[1]);
      m01 = vmmlaq_s32(m01, Zip1(hi[0], hi[1]), act[2]);
      m23 = vmmlaq_s32(m23, Zip2(hi[0], hi[1]), act[2]);
      m01 = vmmlaq_s32(m01, Zip1(hi[2], hi[3]), act[3]);
      m23 = vmmlaq_s32(m23, Zip2(hi[2], hi[3]), act[3]);
      // m01 = [r0 t0, r0 t1, r1 t0, r1 t1]: even lanes are token 0, odd lanes token 1.
      acc[0][h] = W4Accumulate(vuzp1q_s32(m01, m23), x0[g], dw[h], acc[0][h]);
      acc[1][h] = W4Accumulate(vuzp2q_s32(m01, m23), x1[g], dw[h], acc[1][h]);
    }
  }
}

// GEMM micro-kernel (gemm_driver.h, row blocks): token pairs; an odd last token pairs
// with itself (the padded tail: xt[1] == xt[0], only token 0 is stored).
struct W4PairBlockTiles : NeonW4A8Tiles {
  static constexpr int kTileTokens[] = {2};
  static constexpr bool kTailPadded = true;
  using Acc = float32x4_t[2][2];

  template <int NT>
  static void Tile(const std::byte* block, int64_t groups, const BlockQ8A* const* xt, Acc& acc) {
    // Accumulate in registers (a local array, constant indices), not in `acc`, which the
    // driver indexes by token.
    float32x4_t pair[2][2];
    W4PairBlock(block, groups, xt[0], xt[1], pair);
    for (int t = 0; t < 2; ++t) {
      acc[t][0] = pair[t][0];
      acc[t][1] = pair[t][1];
    }
  }
};

}  // namespace

namespace i8mm {
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1) {
  GemmRowBlockTiles<W4PairBlockTiles>(w, x, ldx, n, y, ldy, r0, r1);
}
}  // namespace i8mm

}  // namespace ari::runtime::kernels::internal
