// AVX2 W8A16 GEMM (prefill): y[t * ldy + r] = sum_k W[r][k] * x[t][k] on packed Q8 weights
// (layout.h) and fp16 activations. Per (row, token) the operation sequence is the GEMV's
// (matmul_avx2.cc GemvW8A16Avx2): per group s = w0 * x0, then s = fma(w_c, x_c, s) for the
// other three 8-element chunks, acc = fma(s, d, acc), and a fixed horizontal sum at the
// end, so GEMM output is bit-identical to N GEMVs (tests/runtime/kernels_matmul_test.cc,
// fast_forward_test.cc).
//
// Cost model: an fp32 MAC needs one FMA lane, so the bound is 16 MAC/cycle; the old kernel
// (2 rows x 4 tokens, fp16 -> fp32 conversion of every activation vector per use) spent
// more operations converting than multiplying. Here the activations of a token tile are
// converted to fp32 once per K slice into a small stack buffer (kSliceGroups x 6 tokens =
// 12 KiB, L1) and read as FMA memory operands; one row x 6 tokens per register tile
// (6 partial sums + 6 accumulators + weights + scale = 14 ymm), each weight vector
// converted once for 6 tokens. Accumulators persist across K slices in a stack buffer
// (exact fp32 stores), so the per-(row, token) sequence is unchanged.
#include <immintrin.h>

#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/avx2_common.h"

namespace ari::runtime::kernels::internal {
namespace {

constexpr int kTokens = 6;               // tokens per tile
constexpr int64_t kSliceGroups = 16;     // K slice: 16 groups = 512 activations
constexpr int64_t kMaxChunkBlocks = 16;  // row blocks per chunk (accumulator buffer)
constexpr int64_t kChunkWeightBytes = int64_t{256} * 1024;

// Row i of the row block whose group-g0 tile is `tile`, over `ng` groups, against NT tokens
// of `xs` ([g][NT][32] fp32). acc[t] in/out.
template <int NT>
inline void W8Row(const std::byte* tile, int i, int64_t ng, const float* xs, __m256 acc[kTokens]) {
  for (int64_t g = 0; g < ng; ++g, tile += kW8TileBytes, xs += int64_t{NT} * kGroup) {
    const std::byte* q = tile + 16 + int64_t{32} * i;
    __m256 s[NT];
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256 wv = LoadQ8(q + int64_t{8} * c);
#pragma GCC unroll 6
      for (int t = 0; t < NT; ++t) {
        const __m256 xv = _mm256_load_ps(xs + int64_t{kGroup} * t + int64_t{8} * c);
        s[t] = c == 0 ? _mm256_mul_ps(wv, xv) : _mm256_fmadd_ps(wv, xv, s[t]);
      }
    }
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(LoadU16(tile + int64_t{2} * i)));
#pragma GCC unroll 6
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_fmadd_ps(s[t], d, acc[t]);
  }
}

template <int NT>
void W8Tile(const PackedMatrix& w, const uint16_t* x, int64_t ldx, float* y, int64_t ldy,
            int64_t rb0, int64_t rb1, int64_t row_base, float* xs, float* accbuf) {
  const int64_t groups = Groups(w.cols);
  const int64_t block_bytes = groups * kW8TileBytes;
  for (int64_t gs = 0; gs < groups; gs += kSliceGroups) {
    const int64_t ng = Min64(kSliceGroups, groups - gs);
    for (int64_t g = 0; g < ng; ++g) {
      for (int t = 0; t < NT; ++t) {
        const uint16_t* src = x + t * ldx + (gs + g) * kGroup;
        float* dst = xs + (g * NT + t) * kGroup;
        for (int c = 0; c < 4; ++c) {
          _mm256_store_ps(dst + int64_t{8} * c,
                          _mm256_cvtph_ps(_mm_loadu_si128(
                              reinterpret_cast<const __m128i*>(src + int64_t{8} * c))));
        }
      }
    }
    for (int64_t r = rb0; r < rb1; ++r) {
      float* ab = accbuf + (r - row_base) * kTokens * 8;
      __m256 acc[kTokens];
      for (int t = 0; t < NT; ++t) {
        acc[t] = gs == 0 ? _mm256_setzero_ps() : _mm256_load_ps(ab + int64_t{8} * t);
      }
      const std::byte* tile = w.data + (r / kRowInterleave) * block_bytes + gs * kW8TileBytes;
      W8Row<NT>(tile, static_cast<int>(r % kRowInterleave), ng, xs, acc);
      for (int t = 0; t < NT; ++t) _mm256_store_ps(ab + int64_t{8} * t, acc[t]);
    }
  }
  for (int64_t r = rb0; r < rb1; ++r) {
    const float* ab = accbuf + (r - row_base) * kTokens * 8;
    for (int t = 0; t < NT; ++t) y[t * ldy + r] = Hsum(_mm256_load_ps(ab + int64_t{8} * t));
  }
}

void GemmW8A16Sliced(const PackedMatrix& w, const uint16_t* x, int64_t ldx, int64_t n, float* y,
                     int64_t ldy, int64_t r0, int64_t r1) {
  if (r0 >= r1 || n <= 0) return;
  alignas(32) float xs[kSliceGroups * kTokens * kGroup];                     // 12 KiB
  alignas(32) float accbuf[kMaxChunkBlocks * kRowInterleave * kTokens * 8];  // 24 KiB
  const int64_t block_bytes = Groups(w.cols) * kW8TileBytes;
  const int64_t chunk_rows =
      kRowInterleave * Min64(kMaxChunkBlocks, Max64(1, kChunkWeightBytes / block_bytes));
  for (int64_t c0 = r0; c0 < r1; c0 += chunk_rows) {
    const int64_t c1 = Min64(r1, c0 + chunk_rows);
    for (int64_t t0 = 0; t0 < n; t0 += kTokens) {
      const int nt = static_cast<int>(Min64(kTokens, n - t0));
      const uint16_t* xt = x + t0 * ldx;
      float* yt = y + t0 * ldy;
      switch (nt) {
        case 6: W8Tile<6>(w, xt, ldx, yt, ldy, c0, c1, c0, xs, accbuf); break;
        case 5: W8Tile<5>(w, xt, ldx, yt, ldy, c0, c1, c0, xs, accbuf); break;
        case 4: W8Tile<4>(w, xt, ldx, yt, ldy, c0, c1, c0, xs, accbuf); break;
        case 3: W8Tile<3>(w, xt, ldx, yt, ldy, c0, c1, c0, xs, accbuf); break;
        case 2: W8Tile<2>(w, xt, ldx, yt, ldy, c0, c1, c0, xs, accbuf); break;
        default: W8Tile<1>(w, xt, ldx, yt, ldy, c0, c1, c0, xs, accbuf); break;
      }
    }
  }
}

}  // namespace

namespace avx2 {
void GemmW8A16(const PackedMatrix& w, const uint16_t* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1) {
  GemmW8A16Sliced(w, x, ldx, n, y, ldy, r0, r1);
}
}  // namespace avx2

}  // namespace ari::runtime::kernels::internal
