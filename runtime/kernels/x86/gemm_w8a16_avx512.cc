// AVX-512 VNNI W8A16 GEMV and GEMM on int16 activations: vpdpwssd on 256-bit vectors
// (AVX512-VL), 12 tokens per GEMM tile in the 32 vector registers (x86/w8a16_q16.h has the
// bodies and the arithmetic, shared with the AVX2 tier).
#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/w8a16_q16.h"

namespace ari::runtime::kernels::internal::avx512 {

// 12 tokens per tile: 12 int32 sums + 12 fp32 accumulators + weights in 32 ymm registers.
void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1) {
  GemmQ16</*kVnni=*/true, 12>(w, x, ldx, n, y, ldy, r0, r1);
}

void GemvW8A16(const PackedMatrix& w, const BlockQ16A* x, float* y, int64_t r0, int64_t r1) {
  GemvQ16</*kVnni=*/true>(w, x, y, r0, r1);
}

}  // namespace ari::runtime::kernels::internal::avx512
