// AVX2 + FMA path of the INT8 KV attention kernels (runtime/kernels/kv_int8.h). Shapes
// other than group % 8 == 0 and d % 8 == 0 use the scalar reference.
#include <immintrin.h>

#include "runtime/kernels/kv_int8.h"

namespace ari::runtime::kernels::internal {
namespace {

inline __m256 Load8(const int8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void KvInt8ScoresAvx2(const float* qv, const int8_t* k, const float* ks, int64_t ld, int64_t d,
                      int64_t group, int64_t nt, float scale, float* out) {
  if (group % 8 != 0 || d % 8 != 0) {
    KvInt8ScoresScalar(qv, k, ks, ld, d, group, nt, scale, out);
    return;
  }
  const int64_t lds = ld / 4;
  for (int64_t t = 0; t < nt; ++t) {
    const int8_t* kr = k + t * ld;
    const float* sr = ks + t * lds;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g0 = 0, j = 0; g0 < d; g0 += group, ++j) {
      __m256 dot = _mm256_setzero_ps();
      for (int64_t i = 0; i < group; i += 8) {
        dot = _mm256_fmadd_ps(_mm256_loadu_ps(qv + g0 + i), Load8(kr + g0 + i), dot);
      }
      acc = _mm256_fmadd_ps(_mm256_set1_ps(sr[j]), dot, acc);
    }
    out[t] = scale * HorizontalSum(acc);
  }
}

void KvInt8ValuesAvx2(const float* p, const int8_t* v, const float* vs, int64_t ld, int64_t d,
                      int64_t group, int64_t nt, float* out) {
  if (group % 8 != 0 || d % 8 != 0) {
    KvInt8ValuesScalar(p, v, vs, ld, d, group, nt, out);
    return;
  }
  const int64_t lds = ld / 4;
  for (int64_t i0 = 0; i0 < d; i0 += 8) {
    const int64_t j = i0 / group;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t t = 0;
    for (; t + 1 < nt; t += 2) {
      const __m256 w0 = _mm256_set1_ps(p[t] * vs[t * lds + j]);
      const __m256 w1 = _mm256_set1_ps(p[t + 1] * vs[(t + 1) * lds + j]);
      acc0 = _mm256_fmadd_ps(w0, Load8(v + t * ld + i0), acc0);
      acc1 = _mm256_fmadd_ps(w1, Load8(v + (t + 1) * ld + i0), acc1);
    }
    if (t < nt) {
      acc0 = _mm256_fmadd_ps(_mm256_set1_ps(p[t] * vs[t * lds + j]), Load8(v + t * ld + i0), acc0);
    }
    _mm256_storeu_ps(out + i0, _mm256_add_ps(acc0, acc1));
  }
}

}  // namespace ari::runtime::kernels::internal
