// AVX2 element-wise, quantization and attention kernels, and the AVX2 kernel table.
#include <immintrin.h>

#include <cstring>

#include "runtime/core/tensor_types.h"
#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/simd_exp_avx2.h"

namespace ari::runtime::kernels::internal {
namespace {

// No std:: algorithm templates in ISA-specific files (see kernel_tiers.h).
inline float ClampF16Range(float v) {
  return v < -65504.0f ? -65504.0f : (v > 65504.0f ? 65504.0f : v);
}

inline float HsumPs(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline float HmaxPs(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

inline int32_t HsumEpi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// Loads the 32 values of a group into v[0..3] and returns max |x| (exact).
inline float LoadGroupAbsMax(const float* xg, __m256 v[4]) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int c = 0; c < 4; ++c) v[c] = _mm256_loadu_ps(xg + int64_t{8} * c);
  return HmaxPs(
      _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                    _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3]))));
}

void QuantizeQ8AAvx2(const float* x, int64_t n, BlockQ8A* out) {
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t g = 0; g < n / kGroup; ++g) {
    const float* xg = x + g * kGroup;
    __m256 v[4];
    const float amax = LoadGroupAbsMax(xg, v);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int c = 0; c < 4; ++c) q[c] = _mm256_cvtps_epi32(_mm256_mul_ps(v[c], idv));  // RNE
    const __m256i sum =
        _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), perm);
    BlockQ8A& b = out[g];
    b.d = d;
    b.sum = HsumEpi32(sum);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b.qs), bytes);
  }
}

// As QuantizeQ16AScalar: the same max, quotients and round-to-nearest-even (cvtps).
void QuantizeQ16AAvx2(const float* x, int64_t n, BlockQ16A* qs, float* ds) {
  for (int64_t g = 0; g < n / kGroup; ++g) {
    const float* xg = x + g * kGroup;
    __m256 v[4];
    float d = LoadGroupAbsMax(xg, v) / 32767.0f;
    if (d < 1.17549435e-38f) d = 0.0f;  // FLT_MIN: 1 / d would overflow
    const __m256 idv = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int c = 0; c < 4; ++c) q[c] = _mm256_cvtps_epi32(_mm256_mul_ps(v[c], idv));  // RNE
    // packs works per 128-bit lane: [0-3 4-7 | 8-11 12-15] after the permute below.
    const __m256i p01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xd8);
    const __m256i p23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[2], q[3]), 0xd8);
    ds[g] = d;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs[g].qs), p01);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs[g].qs + 16), p23);
  }
}

void ConvertF16Avx2(const float* x, int64_t n, uint16_t* out) {
  const __m256 lo = _mm256_set1_ps(-65504.0f);
  const __m256 hi = _mm256_set1_ps(65504.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(x + i), lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; i < n; ++i) out[i] = Fp32ToFp16(ClampF16Range(x[i]));
}

void ConvertBf16Avx2(const float* x, int64_t n, uint16_t* out) {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i bias = _mm256_set1_epi32(0x7fff);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i r[2];
    for (int h = 0; h < 2; ++h) {
      const __m256 v = _mm256_loadu_ps(x + i + int64_t{8} * h);
      const __m256i u = _mm256_castps_si256(v);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
      const __m256i rounded =
          _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), lsb), 16);
      const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet);
      const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
      r[h] = _mm256_blendv_epi8(rounded, nan, _mm256_castps_si256(is_nan));
    }
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  for (; i < n; ++i) out[i] = Fp32ToBf16(x[i]);
}

float SumSquaresAvx2(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i);
    const __m256 v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  float s = HsumPs(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

void ScaleMulAvx2(const float* x, const float* w, float s, int64_t n, float* out) {
  const __m256 sv = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(
        out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv), _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * s * w[i];
}

inline __m256 SwiGlu8(__m256 g, __m256 u) {
  const __m256 e = Exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

void SwiGluAvx2(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, SwiGlu8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    const __m256i m = TailMask(n - i);
    _mm256_maskstore_ps(out + i, m,
                        SwiGlu8(_mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m)));
  }
}

void SoftmaxAvx2(float* x, int64_t n) {
  __m256 mv = _mm256_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
  float mx = HmaxPs(mv);
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  const __m256 mxv = _mm256_set1_ps(mx);
  __m256 sv = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = Exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), mxv));
    _mm256_storeu_ps(x + i, e);
    sv = _mm256_add_ps(sv, e);
  }
  if (i < n) {
    const __m256i m = TailMask(n - i);
    const __m256 e = _mm256_and_ps(Exp256(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), mxv)),
                                   _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(x + i, m, e);
    sv = _mm256_add_ps(sv, e);
  }
  const __m256 inv = _mm256_set1_ps(1.0f / HsumPs(sv));
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  const float invs = _mm256_cvtss_f32(inv);
  for (; i < n; ++i) x[i] *= invs;
}

inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float Load1(const float* p) { return *p; }
inline float Load1(const uint16_t* p) { return _cvtsh_ss(*p); }

template <class T>
float Dot(const float* q, const T* k, int64_t d) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= d; i += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), Load8(k + i), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), Load8(k + i + 8), a1);
  }
  if (i + 8 <= d) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), Load8(k + i), a0);
    i += 8;
  }
  float s = HsumPs(_mm256_add_ps(a0, a1));
  for (; i < d; ++i) s += q[i] * Load1(k + i);
  return s;
}

template <class T>
void AttnScoresAvx2(const float* q, const T* k, int64_t ldk, int64_t d, int64_t nt, float scale,
                    float* out) {
  for (int64_t t = 0; t < nt; ++t) out[t] = Dot(q, k + t * ldk, d) * scale;
}

template <class T>
void AttnValuesAvx2(const float* p, const T* v, int64_t ldv, int64_t d, int64_t nt, float* out) {
  int64_t i = 0;
  for (; i + 32 <= d; i += 32) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t t = 0; t < nt; ++t) {
      const __m256 pv = _mm256_set1_ps(p[t]);
      const T* vr = v + t * ldv + i;
      a0 = _mm256_fmadd_ps(pv, Load8(vr), a0);
      a1 = _mm256_fmadd_ps(pv, Load8(vr + 8), a1);
      a2 = _mm256_fmadd_ps(pv, Load8(vr + 16), a2);
      a3 = _mm256_fmadd_ps(pv, Load8(vr + 24), a3);
    }
    _mm256_storeu_ps(out + i, a0);
    _mm256_storeu_ps(out + i + 8, a1);
    _mm256_storeu_ps(out + i + 16, a2);
    _mm256_storeu_ps(out + i + 24, a3);
  }
  for (; i + 8 <= d; i += 8) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t t = 0; t < nt; ++t)
      a = _mm256_fmadd_ps(_mm256_set1_ps(p[t]), Load8(v + t * ldv + i), a);
    _mm256_storeu_ps(out + i, a);
  }
  for (; i < d; ++i) {
    float a = 0.0f;
    for (int64_t t = 0; t < nt; ++t) a += p[t] * Load1(v + t * ldv + i);
    out[i] = a;
  }
}

}  // namespace

namespace avx2 {
void QuantizeQ8A(const float* x, int64_t n, BlockQ8A* out) { QuantizeQ8AAvx2(x, n, out); }
void QuantizeQ16A(const float* x, int64_t n, BlockQ16A* qs, float* d) {
  QuantizeQ16AAvx2(x, n, qs, d);
}
void ConvertF16(const float* x, int64_t n, uint16_t* out) { ConvertF16Avx2(x, n, out); }
void ConvertBf16(const float* x, int64_t n, uint16_t* out) { ConvertBf16Avx2(x, n, out); }
float SumSquares(const float* x, int64_t n) { return SumSquaresAvx2(x, n); }
void ScaleMul(const float* x, const float* w, float s, int64_t n, float* out) {
  ScaleMulAvx2(x, w, s, n, out);
}
void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  SwiGluAvx2(gate, up, n, out);
}
void AttnScoresF16(const float* q, const uint16_t* k, int64_t ldk, int64_t d, int64_t nt,
                   float scale, float* out) {
  AttnScoresAvx2<uint16_t>(q, k, ldk, d, nt, scale, out);
}
void AttnScoresF32(const float* q, const float* k, int64_t ldk, int64_t d, int64_t nt, float scale,
                   float* out) {
  AttnScoresAvx2<float>(q, k, ldk, d, nt, scale, out);
}
void Softmax(float* x, int64_t n) { SoftmaxAvx2(x, n); }
void AttnValuesF16(const float* p, const uint16_t* v, int64_t ldv, int64_t d, int64_t nt,
                   float* out) {
  AttnValuesAvx2<uint16_t>(p, v, ldv, d, nt, out);
}
void AttnValuesF32(const float* p, const float* v, int64_t ldv, int64_t d, int64_t nt, float* out) {
  AttnValuesAvx2<float>(p, v, ldv, d, nt, out);
}
}  // namespace avx2

}  // namespace ari::runtime::kernels::internal
