// Internal: NEON helpers shared by the arm/ kernel files (matmul_neon.cc, ops_neon.cc,
// matmul_dotprod.cc, matmul_i8mm.cc), which are built with different -march flags.
// `static` (and the unnamed namespace for the struct): each translation unit gets its own
// copy compiled with its own ISA flags (no shared COMDAT, kernel_tiers.h).
#pragma once

#if !defined(__ARM_NEON)
#error "runtime/kernels/arm/neon_common.h needs NEON (include it only from the arm/ kernel files)"
#endif

#include <arm_neon.h>

#include <cstring>

#include "runtime/kernels/gemm_driver.h"
#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels::internal {

// 4 fp16 values -> fp32 (fcvtl). Byte loads: no alignment assumption beyond 1.
static inline float32x4_t LoadF16x4(const uint16_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(reinterpret_cast<const uint8_t*>(p))));
}

// The 8 fp16 row scales at the start of a tile, as two fp32 vectors (rows 0-3, 4-7).
static inline void LoadScales(const std::byte* tile, float32x4_t* lo, float32x4_t* hi) {
  const float16x8_t h = vreinterpretq_f16_u8(vld1q_u8(reinterpret_cast<const uint8_t*>(tile)));
  *lo = vcvt_f32_f16(vget_low_f16(h));
  *hi = vcvt_high_f32_f16(h);
}

// 4 activation bytes broadcast to all four 4-byte lanes.
static inline int8x16_t Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

// W4A8 per-group step of 4 rows: acc + float(isum - 8 * sum) * (d_w * d_a) (the scalar
// reference's fma, layout.h).
static inline float32x4_t W4Accumulate(int32x4_t isum, const BlockQ8A& a, float32x4_t dw,
                                       float32x4_t acc) {
  const int32x4_t adj = vsubq_s32(isum, vdupq_n_s32(8 * a.sum));
  const float32x4_t scale = vmulq_f32(dw, vdupq_n_f32(a.d));
  return vfmaq_f32(acc, vcvtq_f32_s32(adj), scale);
}

// Stores the 8 results of row block b (two vectors) that fall in [r0, r1).
static inline void StoreRows(float32x4_t lo, float32x4_t hi, float* y, int64_t b, int64_t r0,
                             int64_t r1) {
  const int64_t base = b * kRowInterleave;
  if (base >= r0 && base + kRowInterleave <= r1) {
    vst1q_f32(y + base, lo);
    vst1q_f32(y + base + 4, hi);
    return;
  }
  float tmp[kRowInterleave];
  vst1q_f32(tmp, lo);
  vst1q_f32(tmp + 4, hi);
  for (int i = 0; i < kRowInterleave; ++i) {
    if (base + i >= r0 && base + i < r1) y[base + i] = tmp[i];
  }
}

namespace {

// Base of the NEON W4A8 GEMM micro-kernels (gemm_driver.h, row blocks): per token the 8
// row outputs as two vectors, acc[t][0] rows 0-3 and acc[t][1] rows 4-7.
struct NeonW4A8Tiles : W4A8Tiles {
  static void Store(const float32x4_t v[2], float* y, int64_t b, int64_t r0, int64_t r1) {
    StoreRows(v[0], v[1], y, b, r0, r1);
  }
};

}  // namespace
}  // namespace ari::runtime::kernels::internal
