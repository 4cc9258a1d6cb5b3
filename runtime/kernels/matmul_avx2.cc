// AVX2 + FMA + F16C matmul kernels (see layout.h for the packed formats and
// scalar_matmul.cc for the arithmetic they implement).
//
// W8A16: per row and group, 8 fp32 lanes form s = sum q * x (mul, then 3 fma in element
//   order), then acc = fma(s, d, acc) over groups, then a fixed horizontal sum; GEMV and GEMM use the same per-(row, token) operation sequence,
//   so GEMM output is bit-identical to N GEMVs.
// W4A8: per row block and group, maddubs (u8 weights x s8 activations) over broadcast 4-byte
//   activation quads gives, per row, the exact group dot in one int32 lane; then
//   fma(float(isum - 8 sum), d_w * d_a, acc): bit-identical to the scalar reference.
// GEMV: software prefetch a few tiles ahead (measured +15-25 % W4A8 streaming, see
// docs/benchmarks.md "Profile" 2); prefetches never fault, so reading past the end is safe.
// GEMM blocking: rows are processed in chunks of about kChunkWeightBytes of packed weights
// (kept in L2); inside a chunk, token tiles of kTokenTile sweep all row blocks. Every weight
// byte is read from memory once per call, activations once per row chunk.
#include <immintrin.h>

#include <cstring>

#include "runtime/kernels/kernel_tiers.h"

namespace ari::runtime::kernels::internal {
namespace {

constexpr int64_t kChunkWeightBytes = 256 * 1024;
// GEMV software prefetch distance (bytes ahead in the row block's tile stream).
constexpr int64_t kW4PrefetchBytes = 8 * kW4TileBytes;
constexpr int64_t kW8PrefetchBytes = 4 * kW8TileBytes;
constexpr int kTokenTile = 4;    // W4A8 GEMM: tokens per tile (8 rows x 4 tokens)
constexpr int kW8TokenTile = 4;  // W8A16 GEMM: 2 rows x 4 tokens per register tile

// Local min/max: no std:: templates in ISA-specific files (see kernel_tiers.h).
inline int64_t Min64(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t Max64(int64_t a, int64_t b) { return a > b ? a : b; }

inline float Hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

inline __m256 LoadQ8(const std::byte* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline __m256 LoadF16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 ScaleF16(const std::byte* p) { return _mm256_set1_ps(_cvtsh_ss(LoadU16(p))); }

// Stores lanes of `v` (rows 8b .. 8b+7) that fall in [r0, r1) to y[row].
inline void StoreRows(__m256 v, float* y, int64_t b, int64_t r0, int64_t r1) {
  const int64_t base = b * kRowInterleave;
  if (base >= r0 && base + kRowInterleave <= r1) {
    _mm256_storeu_ps(y + base, v);
    return;
  }
  alignas(32) float tmp[kRowInterleave];
  _mm256_store_ps(tmp, v);
  for (int i = 0; i < kRowInterleave; ++i) {
    if (base + i >= r0 && base + i < r1) y[base + i] = tmp[i];
  }
}

// ---------------------------------------------------------------- W8A16

// Lane i of the 8 row scales, broadcast (one vpermps instead of a scalar fp16 conversion
// and broadcast per row).
inline __m256 Lane(__m256 v, int i) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(i)); }

void GemvW8A16Avx2(const PackedMatrix& w, const uint16_t* x, float* y, int64_t r0,
                   int64_t r1) {
  const int64_t groups = Groups(w.cols);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* tile = w.data + b * groups * kW8TileBytes;
    __m256 acc[kRowInterleave];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g, tile += kW8TileBytes) {
      const char* pf = reinterpret_cast<const char*>(tile) + kW8PrefetchBytes;
      for (int l = 0; l < 5; ++l) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);  // 272 B < 5 lines
      const uint16_t* xg = x + g * kGroup;
      const __m256 x0 = LoadF16x8(xg);
      const __m256 x1 = LoadF16x8(xg + 8);
      const __m256 x2 = LoadF16x8(xg + 16);
      const __m256 x3 = LoadF16x8(xg + 24);
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)));
#pragma GCC unroll 8
      for (int i = 0; i < kRowInterleave; ++i) {
        const std::byte* q = tile + 16 + 32 * i;
        __m256 s = _mm256_mul_ps(LoadQ8(q), x0);
        s = _mm256_fmadd_ps(LoadQ8(q + 8), x1, s);
        s = _mm256_fmadd_ps(LoadQ8(q + 16), x2, s);
        s = _mm256_fmadd_ps(LoadQ8(q + 24), x3, s);
        acc[i] = _mm256_fmadd_ps(s, Lane(d, i), acc[i]);
      }
    }
    for (int i = 0; i < kRowInterleave; ++i) {
      const int64_t r = b * kRowInterleave + i;
      if (r >= r0 && r < r1) y[r] = Hsum(acc[i]);
    }
  }
}

// Rows i, i+1 of one row block against NT tokens (same per-(row, token) operations as
// GemvW8A16Avx2).
template <int NT>
void W8PairTile(const std::byte* block, int64_t groups, int i, const uint16_t* const* xt,
                float out[2][kW8TokenTile]) {
  __m256 acc0[NT], acc1[NT];
  for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
  const std::byte* tile = block;
  for (int64_t g = 0; g < groups; ++g, tile += kW8TileBytes) {
    const std::byte* q0 = tile + 16 + 32 * i;
    const std::byte* q1 = q0 + 32;
    __m256 s0[NT], s1[NT];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256 w0 = LoadQ8(q0 + 8 * c);
      const __m256 w1 = LoadQ8(q1 + 8 * c);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) {
        const __m256 xv = LoadF16x8(xt[t] + g * kGroup + 8 * c);
        s0[t] = c == 0 ? _mm256_mul_ps(w0, xv) : _mm256_fmadd_ps(w0, xv, s0[t]);
        s1[t] = c == 0 ? _mm256_mul_ps(w1, xv) : _mm256_fmadd_ps(w1, xv, s1[t]);
      }
    }
    const __m256 d0 = ScaleF16(tile + 2 * i);
    const __m256 d1 = ScaleF16(tile + 2 * i + 2);
    for (int t = 0; t < NT; ++t) {
      acc0[t] = _mm256_fmadd_ps(s0[t], d0, acc0[t]);
      acc1[t] = _mm256_fmadd_ps(s1[t], d1, acc1[t]);
    }
  }
  for (int t = 0; t < NT; ++t) {
    out[0][t] = Hsum(acc0[t]);
    out[1][t] = Hsum(acc1[t]);
  }
}

void GemmW8A16Avx2(const PackedMatrix& w, const uint16_t* x, int64_t ldx, int64_t n,
                   float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (r0 >= r1 || n <= 0) return;
  const int64_t groups = Groups(w.cols);
  const int64_t block_bytes = groups * kW8TileBytes;
  const int64_t b0 = r0 / kRowInterleave;
  const int64_t b1 = (r1 + kRowInterleave - 1) / kRowInterleave;
  const int64_t chunk = Max64(1, kChunkWeightBytes / block_bytes);
  for (int64_t cb = b0; cb < b1; cb += chunk) {
    const int64_t ce = Min64(b1, cb + chunk);
    for (int64_t t0 = 0; t0 < n; t0 += kW8TokenTile) {
      const int nt = static_cast<int>(Min64(kW8TokenTile, n - t0));
      const uint16_t* xt[kW8TokenTile];
      for (int t = 0; t < kW8TokenTile; ++t) xt[t] = x + (t0 + Min64(t, nt - 1)) * ldx;
      for (int64_t b = cb; b < ce; ++b) {
        const std::byte* block = w.data + b * block_bytes;
        for (int i = 0; i < kRowInterleave; i += 2) {
          const int64_t row = b * kRowInterleave + i;
          if (row + 1 < r0 || row >= r1) continue;
          float out[2][kW8TokenTile];
          switch (nt) {
            case 4: W8PairTile<4>(block, groups, i, xt, out); break;
            case 3: W8PairTile<3>(block, groups, i, xt, out); break;
            case 2: W8PairTile<2>(block, groups, i, xt, out); break;
            default: W8PairTile<1>(block, groups, i, xt, out); break;
          }
          for (int p = 0; p < 2; ++p) {
            if (row + p < r0 || row + p >= r1) continue;
            for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + row + p] = out[p][t];
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------- W4A8

inline void UnpackW4(const std::byte* nibbles, __m256i lo[4], __m256i hi[4]) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int v = 0; v < 4; ++v) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(nibbles + 32 * v));
    lo[v] = _mm256_and_si256(raw, mask);
    hi[v] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  }
}

inline __m256i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Per row (lane) of the block: sum_j q[row][j] * a.qs[j] (exact: |int16 partial| <= 8 *
// 2 * 15 * 128 = 30720).
inline __m256i DotW4(const __m256i lo[4], const __m256i hi[4], const BlockQ8A& a) {
  __m256i s = _mm256_maddubs_epi16(lo[0], Bcast4(a.qs));
  s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[0], Bcast4(a.qs + 16)));
  for (int v = 1; v < 4; ++v) {
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(lo[v], Bcast4(a.qs + 4 * v)));
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(hi[v], Bcast4(a.qs + 16 + 4 * v)));
  }
  return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

inline __m256 W4Accumulate(__m256i isum, const BlockQ8A& a, __m256 dw, __m256 acc) {
  const __m256i adj = _mm256_sub_epi32(isum, _mm256_set1_epi32(8 * a.sum));
  const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(a.d));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(adj), scale, acc);
}

inline __m256 LoadScales(const std::byte* tile) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)));
}

void GemvW4A8Avx2(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0,
                  int64_t r1) {
  const int64_t groups = Groups(w.cols);
  for (int64_t b = r0 / kRowInterleave; b * kRowInterleave < r1; ++b) {
    const std::byte* tile = w.data + b * groups * kW4TileBytes;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
      const char* pf = reinterpret_cast<const char*>(tile) + kW4PrefetchBytes;
      _mm_prefetch(pf, _MM_HINT_T0);
      _mm_prefetch(pf + 64, _MM_HINT_T0);
      _mm_prefetch(pf + 128, _MM_HINT_T0);
      __m256i lo[4], hi[4];
      UnpackW4(tile + 16, lo, hi);
      acc = W4Accumulate(DotW4(lo, hi, x[g]), x[g], LoadScales(tile), acc);
    }
    StoreRows(acc, y, b, r0, r1);
  }
}

template <int NT>
void W4BlockTile(const std::byte* block, int64_t groups, const BlockQ8A* const* xt,
                 __m256 acc[kTokenTile]) {
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const std::byte* tile = block;
  for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
    __m256i lo[4], hi[4];
    UnpackW4(tile + 16, lo, hi);
    const __m256 dw = LoadScales(tile);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const BlockQ8A& a = xt[t][g];
      acc[t] = W4Accumulate(DotW4(lo, hi, a), a, dw, acc[t]);
    }
  }
}

void GemmW4A8Avx2(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n,
                  float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (r0 >= r1 || n <= 0) return;
  const int64_t groups = Groups(w.cols);
  const int64_t block_bytes = groups * kW4TileBytes;
  const int64_t b0 = r0 / kRowInterleave;
  const int64_t b1 = (r1 + kRowInterleave - 1) / kRowInterleave;
  const int64_t chunk = Max64(1, kChunkWeightBytes / block_bytes);
  for (int64_t cb = b0; cb < b1; cb += chunk) {
    const int64_t ce = Min64(b1, cb + chunk);
    for (int64_t t0 = 0; t0 < n; t0 += kTokenTile) {
      const int nt = static_cast<int>(Min64(kTokenTile, n - t0));
      const BlockQ8A* xt[kTokenTile];
      for (int t = 0; t < kTokenTile; ++t) xt[t] = x + (t0 + Min64(t, nt - 1)) * ldx;
      for (int64_t b = cb; b < ce; ++b) {
        const std::byte* block = w.data + b * block_bytes;
        __m256 acc[kTokenTile];
        switch (nt) {
          case 4: W4BlockTile<4>(block, groups, xt, acc); break;
          case 3: W4BlockTile<3>(block, groups, xt, acc); break;
          case 2: W4BlockTile<2>(block, groups, xt, acc); break;
          default: W4BlockTile<1>(block, groups, xt, acc); break;
        }
        for (int t = 0; t < nt; ++t) StoreRows(acc[t], y + (t0 + t) * ldy, b, r0, r1);
      }
    }
  }
}

}  // namespace

namespace avx2 {
void GemvW8A16(const PackedMatrix& w, const uint16_t* x, float* y, int64_t r0, int64_t r1) { GemvW8A16Avx2(w, x, y, r0, r1); }
void GemmW8A16(const PackedMatrix& w, const uint16_t* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) { GemmW8A16Avx2(w, x, ldx, n, y, ldy, r0, r1); }
void GemvW4A8(const PackedMatrix& w, const BlockQ8A* x, float* y, int64_t r0, int64_t r1) { GemvW4A8Avx2(w, x, y, r0, r1); }
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) { GemmW4A8Avx2(w, x, ldx, n, y, ldy, r0, r1); }
}  // namespace avx2

}  // namespace ari::runtime::kernels::internal
