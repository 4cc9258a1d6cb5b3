// AVX2 W8A16 GEMV and GEMM on int16 activations: vpmaddwd + vpaddd (x86/w8a16_q16.h has the
// bodies and the arithmetic; the AVX-512 VNNI tier shares its weight repack).
#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/w8a16_q16.h"

namespace ari::runtime::kernels::internal::avx2 {

// 6 tokens per tile: 6 int32 sums + 6 fp32 accumulators + weights in 16 ymm registers.
void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1) {
  GemmQ16<6>(w, x, ldx, n, y, ldy, r0, r1);
}

void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  GemvQ16(w, x, y, r0, r1);
}

}  // namespace ari::runtime::kernels::internal::avx2
