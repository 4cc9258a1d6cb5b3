// Compute kernels of the runtime: W8A16 / W4A8 GEMV and GEMM on packed weights, activation
// quantization, fused RMSNorm / SwiGLU, attention helpers.
//
// Layouts: see runtime/kernels/layout.h. Each operation exists per ISA tier in a
// KernelTable; the free functions below dispatch to the table of ActiveIsaTier() (one
// relaxed atomic load per call). The scalar table is the specification; SIMD tables are
// tested against it (tests/runtime/kernels_*_test.cc).
//
// Preconditions (not checked on the hot path; CheckMatmulArgs validates them once):
//  - 0 <= r0 <= r1 <= w.rows; ranges that start and end on multiples of kRowInterleave
//    (or at w.rows) are fastest, any range is correct. Disjoint ranges may run on
//    different threads concurrently (each writes only its own rows).
//  - Activation rows are Q16 rows (ActQ16ABlocks(w.cols) BlockQ16A: the quants, then the
//    scales) or Groups(w.cols) BlockQ8A blocks, the last group zero padded (as written by
//    QuantizeActQ16A / QuantizeActQ8A).
//  - Pointers need only the natural alignment of their element type (128-byte aligned
//    buffers are recommended); packed weights may start at any byte.
//  - Outputs must not alias inputs. No function allocates memory.
#pragma once

#include <cstdint>

#include "runtime/core/error.h"
#include "runtime/kernels/cpu_features.h"
#include "runtime/kernels/layout.h"

namespace ari::runtime::kernels {

struct KernelTable {
  IsaTier tier = IsaTier::kScalar;
  // y[r] = sum_k W[r][k] * x[k] for r in [r0, r1).
  void (*gemv_w8a16)(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0,
                     int64_t r1) = nullptr;
  // y[t * ldy + r] = sum_k W[r][k] * x[t * ldx + k] for t < n, r in [r0, r1).
  // ldx in blocks (>= ActQ16ABlocks(cols)), ldy in floats.
  void (*gemm_w8a16)(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
                     int64_t ldy, int64_t r0, int64_t r1) = nullptr;
  void (*gemv_w4a8)(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0,
                    int64_t r1) = nullptr;
  // ldx in blocks (>= Groups(cols)).
  void (*gemm_w4a8)(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
                    int64_t ldy, int64_t r0, int64_t r1) = nullptr;
  // The tier whose kernel each matmul entry holds: `tier` for the table's own kernels, lower
  // for one it shares (the amx table's GEMVs are the AVX-512 ones) or one the tier choice
  // picked (ChosenKernelsFor). The forward pass reports these per chunk (what ran).
  IsaTier gemv_w8a16_tier = IsaTier::kScalar;
  IsaTier gemm_w8a16_tier = IsaTier::kScalar;
  IsaTier gemv_w4a8_tier = IsaTier::kScalar;
  IsaTier gemm_w4a8_tier = IsaTier::kScalar;
  // n % 32 == 0: n / 32 blocks (see BlockQ8A), or n / 32 blocks of quants and n / 32 scales
  // (BlockQ16A: the parts of a Q16 row).
  void (*quantize_q8a)(const float* x, int64_t n, BlockQ8A* out) = nullptr;
  void (*quantize_q16a)(const float* x, int64_t n, BlockQ16A* qs, float* d) = nullptr;
  // out[i] = fp16(clamp(x[i], -65504, 65504)), round to nearest even; any n.
  void (*convert_f16)(const float* x, int64_t n, uint16_t* out) = nullptr;
  // out[i] = bf16(x[i]), round to nearest even; any n.
  void (*convert_bf16)(const float* x, int64_t n, uint16_t* out) = nullptr;
  // sum of x[i]^2.
  float (*sum_squares)(const float* x, int64_t n) = nullptr;
  // out[i] = x[i] * s * w[i].
  void (*scale_mul)(const float* x, const float* w, float s, int64_t n, float* out) = nullptr;
  // out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).
  void (*swiglu)(const float* gate, const float* up, int64_t n, float* out) = nullptr;
  // out[t] = scale * sum_i q[i] * k[t * ldk + i] for t < nt, i < d (fp16 or fp32 keys).
  void (*attn_scores_f16)(const float* q, const uint16_t* k, int64_t ldk, int64_t d, int64_t nt,
                          float scale, float* out) = nullptr;
  void (*attn_scores_f32)(const float* q, const float* k, int64_t ldk, int64_t d, int64_t nt,
                          float scale, float* out) = nullptr;
  // In place: x[i] = exp(x[i] - max) / sum_j exp(x[j] - max); n >= 1.
  void (*softmax)(float* x, int64_t n) = nullptr;
  // out[i] = sum_t p[t] * v[t * ldv + i] for i < d, t < nt (out is overwritten).
  void (*attn_values_f16)(const float* p, const uint16_t* v, int64_t ldv, int64_t d, int64_t nt,
                          float* out) = nullptr;
  void (*attn_values_f32)(const float* p, const float* v, int64_t ldv, int64_t d, int64_t nt,
                          float* out) = nullptr;
};

// Table for `tier`, falling back to the best lower tier whose kernels are compiled in
// (e.g. kNeonI8mm resolves to kNeonDotprod when the compiler lacks i8mm). The caller must only
// run tables of supported tiers (IsaTierSupported).
const KernelTable& KernelsFor(IsaTier tier);
// Table of ActiveIsaTier(), its matmuls each from the fastest tier at or below it as
// measured once per process (tier_choice.h: ChosenKernelsFor).
const KernelTable& ActiveKernels();
// True if `tier` has its own kernels in this build (not a fallback).
bool IsaTierCompiled(IsaTier tier);

// GEMM calls this thread ran on AMX tiles since it started (the AMX kernels count
// themselves; a call that takes the AVX-512 path, fewer than 16 tokens, does not). Read
// before and after work to see from inside it whether the tiles ran. No allocation.
uint64_t TileGemmsOnThisThread();
namespace internal {
void NoteTileGemm();  // called by the AMX kernels (x86/amx_common.h)
}  // namespace internal

// Checks the shape/range preconditions of the matmul kernels (call once at setup).
Result<void> CheckMatmulArgs(const PackedMatrix& w, PackedPrecision expected, int64_t r0,
                             int64_t r1);

// ---- Dispatching entry points (ActiveKernels()) ----
inline void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  ActiveKernels().gemv_w8a16(w, x, y, r0, r1);
}
inline void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
                      int64_t ldy, int64_t r0, int64_t r1) {
  ActiveKernels().gemm_w8a16(w, x, ldx, n, y, ldy, r0, r1);
}
inline void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  ActiveKernels().gemv_w4a8(w, x, y, r0, r1);
}
inline void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
                     int64_t ldy, int64_t r0, int64_t r1) {
  ActiveKernels().gemm_w4a8(w, x, ldx, n, y, ldy, r0, r1);
}

// Activation preparation for one token row of `cols` values. Each has an overload taking
// an explicit table (tests, benchmarks) and one using ActiveKernels().
// fp32 -> a Q16 row of ActQ16ABlocks(cols) BlockQ16A (last group zero padded).
void QuantizeActQ16A(const KernelTable& k, const float* x, int64_t cols, BlockQ16A* out);
// fp32 -> Groups(cols) BlockQ8A (last group zero padded).
void QuantizeActQ8A(const KernelTable& k, const float* x, int64_t cols, BlockQ8A* out);
// out = x / sqrt(mean(x^2) + eps) * weight (fp32, `cols` values).
void RmsNorm(const KernelTable& k, const float* x, const float* weight, int64_t cols, float eps,
             float* out);
// RMSNorm fused with the W8A16 / W4A8 activation format (no fp32 row written).
void RmsNormToQ16A(const KernelTable& k, const float* x, const float* weight, int64_t cols,
                   float eps, BlockQ16A* out);
void RmsNormToQ8A(const KernelTable& k, const float* x, const float* weight, int64_t cols,
                  float eps, BlockQ8A* out);
// SwiGLU fused with the activation formats (the FFN down projection's input).
void SwiGluToQ16A(const KernelTable& k, const float* gate, const float* up, int64_t cols,
                  BlockQ16A* out);
void SwiGluToQ8A(const KernelTable& k, const float* gate, const float* up, int64_t cols,
                 BlockQ8A* out);

inline void QuantizeActQ16A(const float* x, int64_t cols, BlockQ16A* out) {
  QuantizeActQ16A(ActiveKernels(), x, cols, out);
}
inline void QuantizeActQ8A(const float* x, int64_t cols, BlockQ8A* out) {
  QuantizeActQ8A(ActiveKernels(), x, cols, out);
}
inline void RmsNorm(const float* x, const float* weight, int64_t cols, float eps, float* out) {
  RmsNorm(ActiveKernels(), x, weight, cols, eps, out);
}
inline void RmsNormToQ16A(const float* x, const float* weight, int64_t cols, float eps,
                          BlockQ16A* out) {
  RmsNormToQ16A(ActiveKernels(), x, weight, cols, eps, out);
}
inline void RmsNormToQ8A(const float* x, const float* weight, int64_t cols, float eps,
                         BlockQ8A* out) {
  RmsNormToQ8A(ActiveKernels(), x, weight, cols, eps, out);
}
inline void SwiGluToQ16A(const float* gate, const float* up, int64_t cols, BlockQ16A* out) {
  SwiGluToQ16A(ActiveKernels(), gate, up, cols, out);
}
inline void SwiGluToQ8A(const float* gate, const float* up, int64_t cols, BlockQ8A* out) {
  SwiGluToQ8A(ActiveKernels(), gate, up, cols, out);
}

}  // namespace ari::runtime::kernels
