// Scalar element-wise, quantization and attention kernels (the specification) and the
// scalar kernel table.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "runtime/core/tensor_types.h"
#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels::internal {
namespace {

// Per group: d = max|x| / 127, q = nearest-even(x * (1 / d)), sum = sum q.
void QuantizeQ8AScalar(const float* x, int64_t n, BlockQ8A* out) {
  for (int64_t g = 0; g < n / kGroup; ++g) {
    const float* xg = x + g * kGroup;
    float amax = 0.0f;
    for (int j = 0; j < kGroup; ++j) amax = std::max(amax, std::fabs(xg[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8A& b = out[g];
    b.d = d;
    int32_t sum = 0;
    for (int j = 0; j < kGroup; ++j) {
      const float v = std::nearbyint(xg[j] * id);  // |v| <= 127 by construction
      b.qs[j] = static_cast<int8_t>(static_cast<int>(v));
      sum += b.qs[j];
    }
    b.sum = sum;
  }
}

void QuantizeQ16AScalar(const float* x, int64_t n, BlockQ16A* qs, float* ds) {
  for (int64_t g = 0; g < n / kGroup; ++g) {
    const float* xg = x + g * kGroup;
    float amax = 0.0f;
    for (int j = 0; j < kGroup; ++j) amax = std::max(amax, std::fabs(xg[j]));
    float d = amax / 32767.0f;
    if (d < std::numeric_limits<float>::min()) d = 0.0f;  // 1 / d would overflow
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    ds[g] = d;
    for (int j = 0; j < kGroup; ++j) {
      const float v = std::nearbyint(xg[j] * id);  // |v| <= 32767 by construction
      qs[g].qs[j] = static_cast<int16_t>(static_cast<int>(v));
    }
  }
}

void ConvertF16Scalar(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Fp32ToFp16(std::clamp(x[i], -65504.0f, 65504.0f));
}

void ConvertBf16Scalar(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = Fp32ToBf16(x[i]);
}

float SumSquaresScalar(const float* x, int64_t n) {
  double s = 0.0;  // the spec sums exactly enough; SIMD paths use fp32 lanes
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(s);
}

void ScaleMulScalar(const float* x, const float* w, float s, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * s * w[i];
}

void SwiGluScalar(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

template <class T>
float ToF32(T v) {
  if constexpr (std::is_same_v<T, uint16_t>) {
    return Fp16ToFp32(v);
  } else {
    return v;
  }
}

template <class T>
void AttnScoresScalar(const float* q, const T* k, int64_t ldk, int64_t d, int64_t nt, float scale,
                      float* out) {
  for (int64_t t = 0; t < nt; ++t) {
    const T* kr = k + t * ldk;
    float s = 0.0f;
    for (int64_t i = 0; i < d; ++i) s += q[i] * ToF32(kr[i]);
    out[t] = s * scale;
  }
}

void SoftmaxScalar(float* x, int64_t n) {
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0.0;  // the spec sums exactly enough; SIMD paths use fp32 lanes
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

template <class T>
void AttnValuesScalar(const float* p, const T* v, int64_t ldv, int64_t d, int64_t nt, float* out) {
  std::fill(out, out + d, 0.0f);
  for (int64_t t = 0; t < nt; ++t) {
    const T* vr = v + t * ldv;
    for (int64_t i = 0; i < d; ++i) out[i] += p[t] * ToF32(vr[i]);
  }
}

}  // namespace

namespace scalar {
void QuantizeQ8A(const float* x, int64_t n, BlockQ8A* out) { QuantizeQ8AScalar(x, n, out); }
void QuantizeQ16A(const float* x, int64_t n, BlockQ16A* qs, float* d) {
  QuantizeQ16AScalar(x, n, qs, d);
}
void ConvertF16(const float* x, int64_t n, uint16_t* out) { ConvertF16Scalar(x, n, out); }
void ConvertBf16(const float* x, int64_t n, uint16_t* out) { ConvertBf16Scalar(x, n, out); }
float SumSquares(const float* x, int64_t n) { return SumSquaresScalar(x, n); }
void ScaleMul(const float* x, const float* w, float s, int64_t n, float* out) {
  ScaleMulScalar(x, w, s, n, out);
}
void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  SwiGluScalar(gate, up, n, out);
}
void AttnScoresF16(const float* q, const uint16_t* k, int64_t ldk, int64_t d, int64_t nt,
                   float scale, float* out) {
  AttnScoresScalar<uint16_t>(q, k, ldk, d, nt, scale, out);
}
void AttnScoresF32(const float* q, const float* k, int64_t ldk, int64_t d, int64_t nt, float scale,
                   float* out) {
  AttnScoresScalar<float>(q, k, ldk, d, nt, scale, out);
}
void Softmax(float* x, int64_t n) { SoftmaxScalar(x, n); }
void AttnValuesF16(const float* p, const uint16_t* v, int64_t ldv, int64_t d, int64_t nt,
                   float* out) {
  AttnValuesScalar<uint16_t>(p, v, ldv, d, nt, out);
}
void AttnValuesF32(const float* p, const float* v, int64_t ldv, int64_t d, int64_t nt, float* out) {
  AttnValuesScalar<float>(p, v, ldv, d, nt, out);
}
}  // namespace scalar

}  // namespace ari::runtime::kernels::internal
