// Streaming-read helpers shared by the benchmark programs (kernels_bench, decode_bench):
// the sum of a buffer's 64-bit words, the read-bandwidth reference next to the kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ari::runtime::bench {
namespace {

// Any CPU: two independent 64-bit sums, 16 bytes per step (bytes: a multiple of 16).
uint64_t SumScalar(const std::byte* p, size_t bytes) {
  uint64_t s0 = 0, s1 = 0;
  for (size_t i = 0; i < bytes; i += 16) {
    uint64_t a = 0, b = 0;
    std::memcpy(&a, p + i, 8);
    std::memcpy(&b, p + i + 8, 8);
    s0 += a;
    s1 += b;
  }
  return s0 + s1;
}

#if defined(__x86_64__)
// 4 x 256-bit accumulators, 128 bytes per step (p 32-byte aligned, bytes a multiple of 128).
__attribute__((target("avx2"))) uint64_t SumAvx2(const std::byte* p, size_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < bytes; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t v[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(v), s);
  return v[0] + v[1] + v[2] + v[3];
}
#endif

}  // namespace
}  // namespace ari::runtime::bench
