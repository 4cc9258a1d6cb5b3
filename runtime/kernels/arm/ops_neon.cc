// AArch64 baseline NEON (armv8-a) element-wise, quantization and attention kernels, used by
// all three NEON tiers. Contracts as ops_avx2.cc: conversions and Q8A quantization are
// bit-identical to the scalar reference (fcvtn / fcvtns round to nearest even like the
// reference); sums run in 4-lane fp32 (tolerance-tested); exp is the same Cephes-style
// range reduction + degree-5 polynomial as simd_exp_avx2.h (about 2 ulp).
//
// ISA-specific file: no std:: templates, nothing runs before the tier is checked.
#include <arm_neon.h>

#include "runtime/core/tensor_types.h"
#include "runtime/kernels/arm/neon_common.h"
#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels::internal {
namespace {

inline float ClampF16Range(float v) {
  return v < -65504.0f ? -65504.0f : (v > 65504.0f ? 65504.0f : v);
}

// exp(x) = 2^n * exp(r), |r| <= ln2 / 2 (see simd_exp_avx2.h for the constants' origin).
inline float32x4_t Exp4(float32x4_t x) {
  x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.3365f)), vdupq_n_f32(88.3762626647949f));
  const float32x4_t fx = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, fx, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, fx, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  const float32x4_t e = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.0f));
  const int32x4_t n = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(fx), vdupq_n_s32(127)), 23);
  return vmulq_f32(e, vreinterpretq_f32_s32(n));
}

// Up to 4 floats from p (rem in 1..3), the other lanes `fill`.
inline float32x4_t LoadTail(const float* p, int64_t rem, float fill) {
  float tmp[4] = {fill, fill, fill, fill};
  for (int64_t i = 0; i < rem; ++i) tmp[i] = p[i];
  return vld1q_f32(tmp);
}
inline void StoreTail(float* p, int64_t rem, float32x4_t v) {
  float tmp[4];
  vst1q_f32(tmp, v);
  for (int64_t i = 0; i < rem; ++i) p[i] = tmp[i];
}

void QuantizeQ8ANeon(const float* x, int64_t n, BlockQ8A* out) {
  for (int64_t g = 0; g < n / kGroup; ++g) {
    const float* xg = x + g * kGroup;
    float32x4_t v[8];
    for (int c = 0; c < 8; ++c) v[c] = vld1q_f32(xg + 4 * c);
    float32x4_t m = vabsq_f32(v[0]);
    for (int c = 1; c < 8; ++c) m = vmaxq_f32(m, vabsq_f32(v[c]));
    const float amax = vmaxvq_f32(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int32x4_t q[8];
    for (int c = 0; c < 8; ++c) q[c] = vcvtnq_s32_f32(vmulq_f32(v[c], vdupq_n_f32(id)));
    int32x4_t s = vaddq_s32(vaddq_s32(q[0], q[1]), vaddq_s32(q[2], q[3]));
    s = vaddq_s32(s, vaddq_s32(vaddq_s32(q[4], q[5]), vaddq_s32(q[6], q[7])));
    BlockQ8A& b = out[g];
    b.d = d;
    b.sum = vaddvq_s32(s);
    for (int c = 0; c < 2; ++c) {
      const int16x8_t lo = vcombine_s16(vqmovn_s32(q[4 * c]), vqmovn_s32(q[4 * c + 1]));
      const int16x8_t hi = vcombine_s16(vqmovn_s32(q[4 * c + 2]), vqmovn_s32(q[4 * c + 3]));
      vst1q_s8(b.qs + 16 * c, vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi)));
    }
  }
}

void ConvertF16Neon(const float* x, int64_t n, uint16_t* out) {
  const float32x4_t lo = vdupq_n_f32(-65504.0f);
  const float32x4_t hi = vdupq_n_f32(65504.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const float32x4_t a = vminq_f32(vmaxq_f32(vld1q_f32(x + i), lo), hi);
    const float32x4_t b = vminq_f32(vmaxq_f32(vld1q_f32(x + i + 4), lo), hi);
    const float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(a), b);
    vst1q_u8(reinterpret_cast<uint8_t*>(out + i), vreinterpretq_u8_f16(h));
  }
  for (; i < n; ++i) out[i] = Fp32ToFp16(ClampF16Range(x[i]));
}

inline uint16x4_t Bf16x4(float32x4_t v) {
  const uint32x4_t u = vreinterpretq_u32_f32(v);
  const uint32x4_t lsb = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
  const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fff)), lsb), 16);
  const uint32x4_t nan = vorrq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(0x40));
  const uint32x4_t is_num = vceqq_f32(v, v);
  return vmovn_u32(vbslq_u32(is_num, rounded, nan));
}

void ConvertBf16Neon(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint16x8_t h = vcombine_u16(Bf16x4(vld1q_f32(x + i)), Bf16x4(vld1q_f32(x + i + 4)));
    vst1q_u8(reinterpret_cast<uint8_t*>(out + i), vreinterpretq_u8_u16(h));
  }
  for (; i < n; ++i) out[i] = Fp32ToBf16(x[i]);
}

float SumSquaresNeon(const float* x, int64_t n) {
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const float32x4_t v0 = vld1q_f32(x + i), v1 = vld1q_f32(x + i + 4);
    const float32x4_t v2 = vld1q_f32(x + i + 8), v3 = vld1q_f32(x + i + 12);
    a0 = vfmaq_f32(a0, v0, v0);
    a1 = vfmaq_f32(a1, v1, v1);
    a2 = vfmaq_f32(a2, v2, v2);
    a3 = vfmaq_f32(a3, v3, v3);
  }
  for (; i + 4 <= n; i += 4) {
    const float32x4_t v = vld1q_f32(x + i);
    a0 = vfmaq_f32(a0, v, v);
  }
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

void ScaleMulNeon(const float* x, const float* w, float s, int64_t n, float* out) {
  const float32x4_t sv = vdupq_n_f32(s);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    vst1q_f32(out + i, vmulq_f32(vmulq_f32(vld1q_f32(x + i), sv), vld1q_f32(w + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * s * w[i];
}

inline float32x4_t SwiGlu4(float32x4_t g, float32x4_t u) {
  const float32x4_t e = Exp4(vnegq_f32(g));
  return vmulq_f32(vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e)), u);
}

void SwiGluNeon(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(out + i, SwiGlu4(vld1q_f32(gate + i), vld1q_f32(up + i)));
  if (i < n) {
    StoreTail(out + i, n - i,
              SwiGlu4(LoadTail(gate + i, n - i, 0.0f), LoadTail(up + i, n - i, 0.0f)));
  }
}

void SoftmaxNeon(float* x, int64_t n) {
  float32x4_t mv = vdupq_n_f32(x[0]);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) mv = vmaxq_f32(mv, vld1q_f32(x + i));
  float mx = vmaxvq_f32(mv);
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  const float32x4_t mxv = vdupq_n_f32(mx);
  float32x4_t sv = vdupq_n_f32(0.0f);
  for (i = 0; i + 4 <= n; i += 4) {
    const float32x4_t e = Exp4(vsubq_f32(vld1q_f32(x + i), mxv));
    vst1q_f32(x + i, e);
    sv = vaddq_f32(sv, e);
  }
  if (i < n) {
    // Padding lanes (filled with max) give exp(0) = 1: zero them before summing.
    const int64_t rem = n - i;
    const float32x4_t e = Exp4(vsubq_f32(LoadTail(x + i, rem, mx), mxv));
    StoreTail(x + i, rem, e);
    float tmp[4];
    vst1q_f32(tmp, e);
    for (int64_t j = rem; j < 4; ++j) tmp[j] = 0.0f;
    sv = vaddq_f32(sv, vld1q_f32(tmp));
  }
  const float inv = 1.0f / vaddvq_f32(sv);
  const float32x4_t invv = vdupq_n_f32(inv);
  for (i = 0; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_f32(vld1q_f32(x + i), invv));
  for (; i < n; ++i) x[i] *= inv;
}

inline float32x4_t Load4(const float* p) { return vld1q_f32(p); }
inline float32x4_t Load4(const uint16_t* p) { return LoadF16x4(p); }
inline float Load1(const float* p) { return *p; }
inline float Load1(const uint16_t* p) { return Fp16ToFp32(*p); }

template <class T>
float Dot(const float* q, const T* k, int64_t d) {
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0;
  int64_t i = 0;
  for (; i + 8 <= d; i += 8) {
    a0 = vfmaq_f32(a0, vld1q_f32(q + i), Load4(k + i));
    a1 = vfmaq_f32(a1, vld1q_f32(q + i + 4), Load4(k + i + 4));
  }
  if (i + 4 <= d) {
    a0 = vfmaq_f32(a0, vld1q_f32(q + i), Load4(k + i));
    i += 4;
  }
  float s = vaddvq_f32(vaddq_f32(a0, a1));
  for (; i < d; ++i) s += q[i] * Load1(k + i);
  return s;
}

template <class T>
void AttnScoresNeon(const float* q, const T* k, int64_t ldk, int64_t d, int64_t nt, float scale,
                    float* out) {
  for (int64_t t = 0; t < nt; ++t) out[t] = Dot(q, k + t * ldk, d) * scale;
}

template <class T>
void AttnValuesNeon(const float* p, const T* v, int64_t ldv, int64_t d, int64_t nt, float* out) {
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t t = 0; t < nt; ++t) {
      const float32x4_t pv = vdupq_n_f32(p[t]);
      const T* vr = v + t * ldv + i;
      a0 = vfmaq_f32(a0, pv, Load4(vr));
      a1 = vfmaq_f32(a1, pv, Load4(vr + 4));
      a2 = vfmaq_f32(a2, pv, Load4(vr + 8));
      a3 = vfmaq_f32(a3, pv, Load4(vr + 12));
    }
    vst1q_f32(out + i, a0);
    vst1q_f32(out + i + 4, a1);
    vst1q_f32(out + i + 8, a2);
    vst1q_f32(out + i + 12, a3);
  }
  for (; i + 4 <= d; i += 4) {
    float32x4_t a = vdupq_n_f32(0.0f);
    for (int64_t t = 0; t < nt; ++t) a = vfmaq_f32(a, vdupq_n_f32(p[t]), Load4(v + t * ldv + i));
    vst1q_f32(out + i, a);
  }
  for (; i < d; ++i) {
    float a = 0.0f;
    for (int64_t t = 0; t < nt; ++t) a += p[t] * Load1(v + t * ldv + i);
    out[i] = a;
  }
}

}  // namespace

namespace neon {
void QuantizeQ8A(const float* x, int64_t n, BlockQ8A* out) { QuantizeQ8ANeon(x, n, out); }
// Q16A: the scalar reference itself (one pass over each activation row, not a hot loop).
void QuantizeQ16A(const float* x, int64_t n, BlockQ16A* qs, float* d) {
  scalar::QuantizeQ16A(x, n, qs, d);
}
void ConvertF16(const float* x, int64_t n, uint16_t* out) { ConvertF16Neon(x, n, out); }
void ConvertBf16(const float* x, int64_t n, uint16_t* out) { ConvertBf16Neon(x, n, out); }
float SumSquares(const float* x, int64_t n) { return SumSquaresNeon(x, n); }
void ScaleMul(const float* x, const float* w, float s, int64_t n, float* out) {
  ScaleMulNeon(x, w, s, n, out);
}
void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  SwiGluNeon(gate, up, n, out);
}
void AttnScoresF16(const float* q, const uint16_t* k, int64_t ldk, int64_t d, int64_t nt,
                   float scale, float* out) {
  AttnScoresNeon<uint16_t>(q, k, ldk, d, nt, scale, out);
}
void AttnScoresF32(const float* q, const float* k, int64_t ldk, int64_t d, int64_t nt, float scale,
                   float* out) {
  AttnScoresNeon<float>(q, k, ldk, d, nt, scale, out);
}
void Softmax(float* x, int64_t n) { SoftmaxNeon(x, n); }
void AttnValuesF16(const float* p, const uint16_t* v, int64_t ldv, int64_t d, int64_t nt,
                   float* out) {
  AttnValuesNeon<uint16_t>(p, v, ldv, d, nt, out);
}
void AttnValuesF32(const float* p, const float* v, int64_t ldv, int64_t d, int64_t nt, float* out) {
  AttnValuesNeon<float>(p, v, ldv, d, nt, out);
}
}  // namespace neon

}  // namespace ari::runtime::kernels::internal
