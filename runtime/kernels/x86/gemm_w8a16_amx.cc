// AMX-INT8 W8A16 GEMM (prefill), on the driver of amx_common.h.
// The tiles multiply bytes, the activations are int16 (BlockQ16A). Each activation is, as
// the bytes in memory, a = lo + 256 hi (lo unsigned, hi signed), so one group's 32 int16 are
// one 64-byte A row read in place (one cache line: the Q16 row layout, layout.h), and two dot
// products against "spread" weights give the exact int32 group dot without splitting the
// activations:
//   B_lo row kk, weight row n: [w(2kk), 0, w(2kk+1), 0]  TDPBUSD (A unsigned): sum w lo
//   B_hi row kk, weight row n: [0, w(2kk), 0, w(2kk+1)]  TDPBSSD (A signed):   sum w hi
//   isum = 256 * sum w hi + sum w lo = sum w a   (|isum| < 2^27: exact in int32)
// B_lo / B_hi are pair vectors (lane = row, the row's int16 weights 2p, 2p + 1, as the AVX2
// tier's GEMM repack in w8a16_q16.h) of both row blocks, masked to their low bytes / shifted
// up by 8.
// Then acc = fma(float(isum), d_w * d_a, acc) as the scalar spec: bit-identical results.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/amx_common.h"

namespace ari::runtime::kernels::internal {
namespace {

// Tile registers (all 16 rows x 64 bytes): C_lo / C_hi of group i of a batch in tmm 2i /
// tmm 2i + 1, A in tmm4 / tmm5 (alternating), B_lo in tmm6, B_hi in tmm7. As for W4A8
// (gemm_w4a8_amx.cc), a batch runs in phases: its dot products, its tile stores, then the
// vector scaling. GCC's tile intrinsics take the register number as a literal.
constexpr int64_t kBHalf = int64_t{16} * 64;  // one B tile
constexpr int64_t kBBytes = 2 * kBHalf;
constexpr int kBatchGroups = 2;
constexpr int kCInts = kAmxTokens * kAmxRows;

template <int kGroups>
inline void DotBatch(const BlockQ16A* xg, int64_t ldxb, const int8_t* bg, int32_t (*c)[kCInts]) {
  _tile_loadd(4, xg[0].qs, ldxb);
  _tile_loadd(6, bg, 64);
  _tile_loadd(7, bg + kBHalf, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_dpbusd(0, 4, 6);
  _tile_dpbssd(1, 4, 7);
  if constexpr (kGroups > 1) {
    _tile_loadd(5, xg[1].qs, ldxb);
    _tile_loadd(6, bg + kBBytes, 64);
    _tile_loadd(7, bg + kBBytes + kBHalf, 64);
    _tile_zero(2);
    _tile_zero(3);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
  _tile_stored(0, c[0], 64);
  _tile_stored(1, c[1], 64);
  if constexpr (kGroups > 1) {
    _tile_stored(2, c[2], 64);
    _tile_stored(3, c[3], 64);
  }
}

// acc[t] = fma(float(256 hi[t][.] + lo[t][.]), d_w * d_a(t), acc[t]) for the tile's tokens
// (d_a(t) = da[t * lda]).
inline void ScaleGroup(const int32_t* lo, const int32_t* hi, __m512 dw, const float* da,
                       int64_t lda, __m512 acc[kAmxTokens]) {
#pragma GCC unroll 16
  for (int t = 0; t < kAmxTokens; ++t) {
    const __m512i isum =
        _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(hi + kAmxRows * int64_t{t}), 8),
                         _mm512_load_si512(lo + kAmxRows * int64_t{t}));
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(da[t * lda]));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[t]);
  }
}

// In: r[n] = 16 dwords of row n. Out: r[p] = dword p of every row (lane n = row n). Within
// each 128-bit lane a 4 x 4 transpose per group of 4 rows (unpack 32 / 64), then a 4 x 4
// transpose of the lanes (shuffle_i32x4).
inline void Transpose16x16(__m512i r[16]) {
  __m512i v[4][4];  // v[q][j], lane L: rows 4q .. 4q + 3 of column 4L + j
#pragma GCC unroll 4
  for (int64_t q = 0; q < 4; ++q) {
    const __m512i a0 = _mm512_unpacklo_epi32(r[4 * q], r[4 * q + 1]);
    const __m512i a1 = _mm512_unpackhi_epi32(r[4 * q], r[4 * q + 1]);
    const __m512i a2 = _mm512_unpacklo_epi32(r[4 * q + 2], r[4 * q + 3]);
    const __m512i a3 = _mm512_unpackhi_epi32(r[4 * q + 2], r[4 * q + 3]);
    v[q][0] = _mm512_unpacklo_epi64(a0, a2);
    v[q][1] = _mm512_unpackhi_epi64(a0, a2);
    v[q][2] = _mm512_unpacklo_epi64(a1, a3);
    v[q][3] = _mm512_unpackhi_epi64(a1, a3);
  }
#pragma GCC unroll 4
  for (int64_t j = 0; j < 4; ++j) {
    const __m512i s0 = _mm512_shuffle_i32x4(v[0][j], v[1][j], 0x44);
    const __m512i s1 = _mm512_shuffle_i32x4(v[0][j], v[1][j], 0xee);
    const __m512i s2 = _mm512_shuffle_i32x4(v[2][j], v[3][j], 0x44);
    const __m512i s3 = _mm512_shuffle_i32x4(v[2][j], v[3][j], 0xee);
    r[j] = _mm512_shuffle_i32x4(s0, s2, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(s0, s2, 0xdd);
    r[8 + j] = _mm512_shuffle_i32x4(s1, s3, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(s1, s3, 0xdd);
  }
}

// A token tile's Q16 activations from a group on: the quants (rows ldx blocks apart) and
// their scales (rows ldx * kQ16ScalesPerBlock floats apart).
struct Q16Tile {
  const BlockQ16A* qs;
  const float* d;
};

struct W8Amx {
  using Act = BlockQ16A;
  using TileAct = Q16Tile;
  static Q16Tile TileAt(const BlockQ16A* x, int64_t ldx, int64_t groups, int64_t t, int64_t g) {
    return {x + t * ldx + g, Q16Scales(x + t * ldx, groups) + g};
  }
  static constexpr int64_t kTileBytes = kW8TileBytes;
  // 24 KiB of B tiles: with a token tile's 13 KiB of activations the slice fits the 48 KiB
  // L1. 16 groups (32 + 17 KiB) did not: W8A16 pp128 with `ari-perf -t 2 -p 128 -n 0 -r 5`
  // on the Intel Xeon (AMX) host, 14 alternated rounds, paired 12 / 16 ratios 0.98-1.09,
  // median 1.05; 8, 10 and 14 groups no better than 12 (docs/benchmarks.md).
  static constexpr int64_t kSliceGroups = 12;
  static constexpr int64_t kRepackBytes = kBBytes;

  static TileConfig Config() {
    TileConfig c;
    for (int t = 0; t < 8; ++t) c.Set(t, 16, 64);
    return c;
  }

  // B_lo, B_hi and fp32 row scales of groups [0, ng) of row blocks a (rows 0-7), b (8-15):
  // the 16 rows' int8 weights widened to int16 (row n: dword p = weights 2p, 2p + 1), a
  // 16 x 16 dword transpose (pair vector p: dword n = row n's pair p), then the low bytes /
  // the bytes shifted up.
  static void Repack(const std::byte* a, const std::byte* b, int64_t ng, int8_t* bq, __m512* wd) {
    const __m512i low_bytes = _mm512_set1_epi16(0x00ff);
    for (int64_t g = 0; g < ng; ++g, a += kW8TileBytes, b += kW8TileBytes, bq += kBBytes) {
      __m512i r[16];
#pragma GCC unroll 16
      for (int n = 0; n < 16; ++n) {
        const std::byte* row = (n < 8 ? a : b) + 16 + int64_t{32} * (n & 7);
        r[n] = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)));
      }
      Transpose16x16(r);
#pragma GCC unroll 16
      for (int p = 0; p < 16; ++p) {
        _mm512_store_si512(bq + int64_t{64} * p, _mm512_and_si512(r[p], low_bytes));
        _mm512_store_si512(bq + kBHalf + int64_t{64} * p, _mm512_slli_epi16(r[p], 8));
      }
      wd[g] = _mm512_cvtph_ps(_mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1));
    }
  }

  static constexpr int kBatch = kBatchGroups;

  // Groups [g, g + N) of a token tile (x: token 0 at the slice's first group): the tile
  // products and stores, then the scaling in group order.
  template <int N>
  static void Batch(Q16Tile x, int64_t ldx, const int8_t* bq, const __m512* wd, int64_t g,
                    __m512 acc[kAmxTokens]) {
    alignas(64) int32_t c[2 * N][kCInts];
    DotBatch<N>(x.qs + g, ldx * static_cast<int64_t>(sizeof(BlockQ16A)), bq + g * kBBytes, c);
#pragma GCC unroll 2
    for (int i = 0; i < N; ++i) {
      ScaleGroup(c[2 * i], c[2 * i + 1], wd[g + i], x.d + g + i, ldx * kQ16ScalesPerBlock, acc);
    }
  }

  static constexpr auto Narrow = avx512::GemmW8A16;  // fewer than 16 tokens
};

}  // namespace

namespace amx {
void GemmW8A16(const PackedMatrix& w, const BlockQ16A* x, int64_t ldx, int64_t n, float* y,
               int64_t ldy, int64_t r0, int64_t r1) {
  GemmAmx<W8Amx>(w, x, ldx, n, y, ldy, r0, r1);
}
}  // namespace amx

}  // namespace ari::runtime::kernels::internal
