// INT8 KV cache rows and the attention kernels that read them.
//
// One INT8 row holds the kv_dim keys (or values) of one token in one layer:
//
//   [ int8 q[kv_dim] | float scale[kv_dim / group] ]      row bytes = KvInt8RowBytes()
//
// Each group of `group` consecutive values (inside one KV head: group divides head_dim,
// so a group never spans two heads) has its own scale: x ~= scale * q, q in [-127, 127],
// scale = max|x| / 127 (symmetric, round to nearest). The group is the largest power of
// two <= 32 that divides head_dim, so a head of 64 has 2 groups, a head of 8 one group.
// A row takes kv_dim * (1 + 4 / group) bytes <= 2 * kv_dim (group >= 4): an INT8 row
// always fits in the bytes of an F16 row, which makes the in-place F16 -> INT8 conversion
// of a KV cache possible (runtime/engine/fast_forward.h, FastForward::ConvertKv).
//
// Kernels: a scalar reference (the specification) and an AVX2 path (x86-64, group and
// head_dim multiples of 8), compared by tests/runtime/kv_int8_test.cc. No allocation.
#pragma once

#include <cstdint>

#include "runtime/kernels/cpu_features.h"

namespace ari::runtime::kernels {

inline constexpr int32_t kKvInt8MaxGroup = 32;

// Scale group for a head of `head_dim` values; 0 when INT8 KV is unsupported (head_dim
// without a power-of-two divisor >= 4).
int32_t KvInt8Group(int32_t head_dim);
// Bytes of one INT8 row of kv_dim values (a multiple of 4).
inline int64_t KvInt8RowBytes(int64_t kv_dim, int64_t group) {
  return kv_dim + 4 * (kv_dim / group);
}

// Quantizes n values (n % group == 0) into q[n] and scales[n / group].
void QuantizeKvInt8(const float* x, int64_t n, int64_t group, int8_t* q, float* scales);
// Inverse (tests, diagnostics).
void DequantizeKvInt8(const int8_t* q, const float* scales, int64_t n, int64_t group, float* x);

struct KvInt8Kernels {
  IsaTier tier = IsaTier::kScalar;
  // out[t] = scale * sum_i qv[i] * K(t, i) for t < nt, i < d, where K(t, i) =
  // ks[t * ld / 4 + i / group] * k[t * ld + i]. k points at the head's first int8 value of
  // row 0, ks at its first scale; ld is the row stride in bytes (a multiple of 4).
  void (*scores)(const float* qv, const int8_t* k, const float* ks, int64_t ld, int64_t d,
                 int64_t group, int64_t nt, float scale, float* out) = nullptr;
  // out[i] = sum_t p[t] * V(t, i) for i < d (out is overwritten).
  void (*values)(const float* p, const int8_t* v, const float* vs, int64_t ld, int64_t d,
                 int64_t group, int64_t nt, float* out) = nullptr;
};

// Kernels for `tier` (the AVX2 path for kAvx2 / kAvx512Vnni / kAmx on x86-64, else scalar).
const KvInt8Kernels& KvInt8KernelsFor(IsaTier tier);
// Kernels of ActiveIsaTier().
const KvInt8Kernels& ActiveKvInt8Kernels();

namespace internal {
void KvInt8ScoresScalar(const float* qv, const int8_t* k, const float* ks, int64_t ld, int64_t d,
                        int64_t group, int64_t nt, float scale, float* out);
void KvInt8ValuesScalar(const float* p, const int8_t* v, const float* vs, int64_t ld, int64_t d,
                        int64_t group, int64_t nt, float* out);
void KvInt8ScoresAvx2(const float* qv, const int8_t* k, const float* ks, int64_t ld, int64_t d,
                      int64_t group, int64_t nt, float scale, float* out);
void KvInt8ValuesAvx2(const float* p, const int8_t* v, const float* vs, int64_t ld, int64_t d,
                      int64_t group, int64_t nt, float* out);
}  // namespace internal

}  // namespace ari::runtime::kernels
