#include "runtime/kernels/kv_int8.h"

#include <math.h>

#include <algorithm>

namespace ari::runtime::kernels {

int32_t KvInt8Group(int32_t head_dim) {
  if (head_dim <= 0) return 0;
  for (int32_t g = kKvInt8MaxGroup; g >= 4; g /= 2) {
    if (head_dim % g == 0) return g;
  }
  return 0;
}

void QuantizeKvInt8(const float* x, int64_t n, int64_t group, int8_t* q, float* scales) {
  for (int64_t g0 = 0, j = 0; g0 < n; g0 += group, ++j) {
    float amax = 0.0f;
    for (int64_t i = 0; i < group; ++i) amax = std::max(amax, fabsf(x[g0 + i]));
    const float scale = amax / 127.0f;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int64_t i = 0; i < group; ++i) {
      const float r = std::clamp(nearbyintf(x[g0 + i] * inv), -127.0f, 127.0f);
      q[g0 + i] = static_cast<int8_t>(r);
    }
    scales[j] = scale;
  }
}

void DequantizeKvInt8(const int8_t* q, const float* scales, int64_t n, int64_t group, float* x) {
  for (int64_t i = 0; i < n; ++i) x[i] = scales[i / group] * static_cast<float>(q[i]);
}

namespace internal {

void KvInt8ScoresScalar(const float* qv, const int8_t* k, const float* ks, int64_t ld, int64_t d,
                        int64_t group, int64_t nt, float scale, float* out) {
  const int64_t lds = ld / 4;
  for (int64_t t = 0; t < nt; ++t) {
    const int8_t* kr = k + t * ld;
    const float* sr = ks + t * lds;
    float acc = 0.0f;
    for (int64_t g0 = 0, j = 0; g0 < d; g0 += group, ++j) {
      float dot = 0.0f;
      for (int64_t i = 0; i < group; ++i) dot += qv[g0 + i] * static_cast<float>(kr[g0 + i]);
      acc += sr[j] * dot;
    }
    out[t] = scale * acc;
  }
}

void KvInt8ValuesScalar(const float* p, const int8_t* v, const float* vs, int64_t ld, int64_t d,
                        int64_t group, int64_t nt, float* out) {
  const int64_t lds = ld / 4;
  std::fill(out, out + d, 0.0f);
  for (int64_t t = 0; t < nt; ++t) {
    const int8_t* vr = v + t * ld;
    const float* sr = vs + t * lds;
    for (int64_t g0 = 0, j = 0; g0 < d; g0 += group, ++j) {
      const float w = p[t] * sr[j];
      for (int64_t i = 0; i < group; ++i) out[g0 + i] += w * static_cast<float>(vr[g0 + i]);
    }
  }
}

}  // namespace internal

namespace {

constexpr KvInt8Kernels kScalar{IsaTier::kScalar, internal::KvInt8ScoresScalar,
                                internal::KvInt8ValuesScalar};
#if defined(__x86_64__) || defined(_M_X64)
constexpr KvInt8Kernels kAvx2{IsaTier::kAvx2, internal::KvInt8ScoresAvx2,
                              internal::KvInt8ValuesAvx2};
#endif

}  // namespace

const KvInt8Kernels& KvInt8KernelsFor(IsaTier tier) {
#if defined(__x86_64__) || defined(_M_X64)
  if (tier == IsaTier::kAvx2 || tier == IsaTier::kAvx512Vnni || tier == IsaTier::kAmx) return kAvx2;
#endif
  (void)tier;
  return kScalar;
}

const KvInt8Kernels& ActiveKvInt8Kernels() { return KvInt8KernelsFor(ActiveIsaTier()); }

}  // namespace ari::runtime::kernels
