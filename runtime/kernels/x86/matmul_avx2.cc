// AVX2 + FMA + F16C matmul kernels (see layout.h for the packed formats and
// scalar_matmul.cc for the arithmetic they implement).
//
// W4A8: per row block and group, maddubs (u8 weights x s8 activations) over broadcast 4-byte
//   activation quads gives, per row, the exact group dot in one int32 lane; then
//   fma(float(isum - 8 sum), d_w * d_a, acc): bit-identical to the scalar reference.
// GEMV: software prefetch a few tiles ahead (measured +15-25 % W4A8 streaming, see
// docs/benchmarks.md "Profile" 2); prefetches never fault, so reading past the end is safe.
// W8A16 (GEMV and GEMM) lives in gemm_w8a16_avx2.cc, the W4A8 GEMM in gemm_w4a8_avx2.cc.
#include <immintrin.h>

#include <cstring>

#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/avx2_common.h"

namespace ari::runtime::kernels::internal {
namespace {

// GEMV: four weight streams per thread (GemvRowBlocks), each prefetched 8 tiles ahead.
// AVX2 tier forced (a timings file), interleaved ari-perf decode on the AMD EPYC (Zen 5)
// host, TinyLlama W4A8, 2 threads: 1 -> 2 streams 54.3 / 54.2 / 57.1 -> 65.2 / 62.6 /
// 65.5 t/s; 2 -> 4 streams, 5 rounds, paired ratios 1.11-1.18 (docs/benchmarks.md).
constexpr int64_t kGemvPrefetchTiles = 8;
constexpr int kGemvStreams = 4;

// ---------------------------------------------------------------- W4A8

inline void UnpackW4(const std::byte* nibbles, __m256i lo[4], __m256i hi[4]) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int v = 0; v < 4; ++v) {
    const __m256i raw =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(nibbles + int64_t{32} * v));
    lo[v] = _mm256_and_si256(raw, mask);
    hi[v] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  }
}

// Per row (lane) of the block: sum_j q[row][j] * a.qs[j] (exact: |int16 partial| <= 8 *
// 2 * 15 * 128 = 30720).
inline __m256i DotW4(const __m256i lo[4], const __m256i hi[4], const BlockQ8A& a) {
  __m256i s = _mm256_maddubs_epi16(lo[0], Bcast4(a.qs));
  s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[0], Bcast4(a.qs + 16)));
  for (int v = 1; v < 4; ++v) {
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(lo[v], Bcast4(a.qs + int64_t{4} * v)));
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[v], Bcast4(a.qs + 16 + int64_t{4} * v)));
  }
  return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

void GemvW4A8Avx2(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  GemvRowBlocks<kW4TileBytes, kGemvPrefetchTiles, kGemvStreams>(
      w, y, r0,
      r1, [x](const std::byte* tile, int64_t g, __m256 acc) __attribute__((always_inline)) {
        __m256i lo[4], hi[4];
        UnpackW4(tile + 16, lo, hi);
        return W4Accumulate(DotW4(lo, hi, x[g]), x[g], LoadRowScales(tile), acc);
      });
}

}  // namespace

namespace avx2 {
// GemvW8A16, GemmW8A16: runtime/kernels/x86/gemm_w8a16_avx2.cc
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) {
  GemvW4A8Avx2(w, x, y, r0, r1);
}
// GemmW4A8: runtime/kernels/x86/gemm_w4a8_avx2.cc
}  // namespace avx2

}  // namespace ari::runtime::kernels::internal
