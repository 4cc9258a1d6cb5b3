// Internal: per-tier kernel tables (defined in the tier's own translation units).
#pragma once

#include "runtime/kernels/kernels.h"

namespace ari::runtime::kernels::internal {

// Loads an unaligned little-endian uint16 (fp16 scale) from packed bytes. `static`: this
// header is included by translation units built with different ISA flags, so shared
// (COMDAT) helpers must not exist; SIMD files likewise avoid std:: algorithm templates.
static inline uint16_t LoadU16(const std::byte* p) {
  return static_cast<uint16_t>(static_cast<unsigned>(p[0]) | (static_cast<unsigned>(p[1]) << 8));
}

// Next lower tier of the same family (kScalar stays kScalar).
IsaTier LowerTier(IsaTier tier);

// min/max for the SIMD files (instead of std::min/std::max templates, see above).
static inline int64_t Min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t Max64(int64_t a, int64_t b) { return a > b ? a : b; }

}  // namespace ari::runtime::kernels::internal

namespace ari::runtime::kernels::internal {

// Kernel entry points per tier. The tables are built in dispatch.cc (base ISA) from these
// addresses only: no code of an ISA-specific file runs before its tier is known to work.
namespace scalar {
void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1);
void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1);
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1);
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1);
void QuantizeQ8A(const float* x, int64_t n, BlockQ8A* out);
void QuantizeQ16A(const float* x, int64_t n, BlockQ16A* qs, float* d);
void ConvertF16(const float* x, int64_t n, uint16_t* out);
void ConvertBf16(const float* x, int64_t n, uint16_t* out);
float SumSquares(const float* x, int64_t n);
void ScaleMul(const float* x, const float* w, float s, int64_t n, float* out);
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
void AttnScoresF16(const float* q, const uint16_t* k, int64_t ldk, int64_t d, int64_t nt,
                   float scale, float* out);
void AttnScoresF32(const float* q, const float* k, int64_t ldk, int64_t d, int64_t nt, float scale,
                   float* out);
void Softmax(float* x, int64_t n);
void AttnValuesF16(const float* p, const uint16_t* v, int64_t ldv, int64_t d, int64_t nt,
                   float* out);
void AttnValuesF32(const float* p, const float* v, int64_t ldv, int64_t d, int64_t nt, float* out);
}  // namespace scalar
#if defined(__x86_64__)
namespace avx2 {
void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1);
void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1);
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1);
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1);
void QuantizeQ8A(const float* x, int64_t n, BlockQ8A* out);
void QuantizeQ16A(const float* x, int64_t n, BlockQ16A* qs, float* d);
void ConvertF16(const float* x, int64_t n, uint16_t* out);
void ConvertBf16(const float* x, int64_t n, uint16_t* out);
float SumSquares(const float* x, int64_t n);
void ScaleMul(const float* x, const float* w, float s, int64_t n, float* out);
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
void AttnScoresF16(const float* q, const uint16_t* k, int64_t ldk, int64_t d, int64_t nt,
                   float scale, float* out);
void AttnScoresF32(const float* q, const float* k, int64_t ldk, int64_t d, int64_t nt, float scale,
                   float* out);
void Softmax(float* x, int64_t n);
void AttnValuesF16(const float* p, const uint16_t* v, int64_t ldv, int64_t d, int64_t nt,
                   float* out);
void AttnValuesF32(const float* p, const float* v, int64_t ldv, int64_t d, int64_t nt, float* out);
}  // namespace avx2
namespace avx512 {
void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1);
void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1);
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1);
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1);
}  // namespace avx512
// AVX-512 + AMX-INT8: the prefill GEMMs on tiles (x86/gemm_*_amx.cc); every other entry of
// the tier is the AVX-512 one.
namespace amx {
void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1);
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1);
}  // namespace amx
#endif
#if defined(__aarch64__)
// Baseline NEON (armv8-a): matmuls and element-wise kernels of all three NEON tiers.
namespace neon {
void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1);
void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1);
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1);
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1);
void QuantizeQ8A(const float* x, int64_t n, BlockQ8A* out);
void QuantizeQ16A(const float* x, int64_t n, BlockQ16A* qs, float* d);
void ConvertF16(const float* x, int64_t n, uint16_t* out);
void ConvertBf16(const float* x, int64_t n, uint16_t* out);
float SumSquares(const float* x, int64_t n);
void ScaleMul(const float* x, const float* w, float s, int64_t n, float* out);
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
void AttnScoresF16(const float* q, const uint16_t* k, int64_t ldk, int64_t d, int64_t nt,
                   float scale, float* out);
void AttnScoresF32(const float* q, const float* k, int64_t ldk, int64_t d, int64_t nt, float scale,
                   float* out);
void Softmax(float* x, int64_t n);
void AttnValuesF16(const float* p, const uint16_t* v, int64_t ldv, int64_t d, int64_t nt,
                   float* out);
void AttnValuesF32(const float* p, const float* v, int64_t ldv, int64_t d, int64_t nt, float* out);
}  // namespace neon
// armv8.2-a+dotprod: W4A8 with sdot (kNeonDotprod; kNeonI8mm uses its GEMV).
namespace dotprod {
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1);
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1);
}  // namespace dotprod
// armv8.2-a+i8mm: W4A8 GEMM with smmla (kNeonI8mm).
namespace i8mm {
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1);
}  // namespace i8mm
#endif

}  // namespace ari::runtime::kernels::internal
