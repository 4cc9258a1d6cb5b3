// AMX-INT8 W4A8 GEMM (prefill), on the driver of amx_common.h.
// Per group of 32 columns and pair of row blocks (16 rows): B = the 16 rows' quants minus 8
// (the Q4_0 zero point, so int8 in [-8, 7]) in the tiles' layout, 8 rows of 64 bytes: B row
// kk holds, for each weight row n, its quants 4 kk .. 4 kk + 3. The packed W4 tile already
// has that order (layout.h: byte 32 v + 4 r + e holds quants 4 v + e and 16 + 4 v + e of
// row r), so the repack is a mask or a shift and a subtraction per 64 bytes. A = 16 tokens'
// 32 int8 activations, read in place (BlockQ8A::qs, stride ldx blocks). TDPBSSD then gives
// sum_j (q_j - 8) a_j = isum - 8 * sum exactly, the scalar spec's integer, and the fma
// step is the spec's: bit-identical results.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/amx_common.h"

namespace ari::runtime::kernels::internal {
namespace {

// Tile registers: C (int32 16 x 16) tmm0-3 for up to 4 groups, A (16 tokens x 32 bytes)
// tmm4 / tmm5 and B (8 x 64 bytes) tmm6 / tmm7, alternating. Measured on the Intel Xeon
// (AMX) host, the tile unit and the vector units do not overlap here, and a tile store
// stalls the vector loads issued after it; so a batch runs in phases: all its dot
// products, all its stores, then the vector scaling (batches of 4 groups: 21.4 ns per 16 x
// 16 x 32 group against 27.4 ns with group-by-group double buffering, docs/benchmarks.md).
// GCC's tile intrinsics take the register number as a literal.
constexpr int64_t kBBytes = int64_t{8} * 64;
constexpr int kBatchGroups = 4;

// Group i of the batch: operands into tmm4 + i % 2 / tmm6 + i % 2, dot product into tmm i.
template <int kGroups>
inline void DotBatch(const BlockQ8A* xg, int64_t ldxb, const int8_t* bg,
                     int32_t (*c)[kAmxTokens * kAmxRows]) {
  _tile_loadd(4, xg[0].qs, ldxb);
  _tile_loadd(6, bg, 64);
  _tile_zero(0);
  _tile_dpbssd(0, 4, 6);
  if constexpr (kGroups > 1) {
    _tile_loadd(5, xg[1].qs, ldxb);
    _tile_loadd(7, bg + kBBytes, 64);
    _tile_zero(1);
    _tile_dpbssd(1, 5, 7);
  }
  if constexpr (kGroups > 2) {
    _tile_loadd(4, xg[2].qs, ldxb);
    _tile_loadd(6, bg + 2 * kBBytes, 64);
    _tile_zero(2);
    _tile_dpbssd(2, 4, 6);
  }
  if constexpr (kGroups > 3) {
    _tile_loadd(5, xg[3].qs, ldxb);
    _tile_loadd(7, bg + 3 * kBBytes, 64);
    _tile_zero(3);
    _tile_dpbssd(3, 5, 7);
  }
  _tile_stored(0, c[0], 64);
  if constexpr (kGroups > 1) _tile_stored(1, c[1], 64);
  if constexpr (kGroups > 2) _tile_stored(2, c[2], 64);
  if constexpr (kGroups > 3) _tile_stored(3, c[3], 64);
}

// acc[t] = fma(float(c[t][.]), d_w * d_a(t), acc[t]) for the 16 tokens of the tile.
inline void ScaleGroup(const int32_t* c, __m512 dw, const BlockQ8A* xg, int64_t ldx,
                       __m512 acc[kAmxTokens]) {
#pragma GCC unroll 16
  for (int t = 0; t < kAmxTokens; ++t) {
    const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(xg[t * ldx].d));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c + kAmxRows * int64_t{t})),
                             scale, acc[t]);
  }
}

struct W4Amx {
  using Act = BlockQ8A;
  using TileAct = const BlockQ8A*;
  static TileAct TileAt(const BlockQ8A* x, int64_t ldx, int64_t /*groups*/, int64_t t, int64_t g) {
    return x + t * ldx + g;
  }
  static constexpr int64_t kTileBytes = kW4TileBytes;
  static constexpr int64_t kSliceGroups = 64;  // 32 KiB of B tiles
  static constexpr int64_t kRepackBytes = kBBytes;

  static TileConfig Config() {
    TileConfig c;
    for (int i = 0; i < kBatchGroups; ++i) c.Set(i, kAmxTokens, 64);  // C
    for (int i = 0; i < 2; ++i) {
      c.Set(4 + i, kAmxTokens, kGroup);  // A
      c.Set(6 + i, kGroup / 4, 64);      // B
    }
    return c;
  }

  // B tiles and fp32 row scales of groups [0, ng) of row blocks a (rows 0-7) and b (8-15).
  static void Repack(const std::byte* a, const std::byte* b, int64_t ng, int8_t* bq, __m512* wd) {
    const __m512i mask = _mm512_set1_epi8(0x0f);
    const __m512i eight = _mm512_set1_epi8(8);
    for (int64_t g = 0; g < ng; ++g, a += kW4TileBytes, b += kW4TileBytes, bq += kBBytes) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const __m512i raw = _mm512_inserti64x4(
            _mm512_castsi256_si512(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 16 + int64_t{32} * v))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + int64_t{32} * v)), 1);
        const __m512i lo = _mm512_sub_epi8(_mm512_and_si512(raw, mask), eight);
        const __m512i hi =
            _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(raw, 4), mask), eight);
        _mm512_store_si512(bq + int64_t{64} * v, lo);
        _mm512_store_si512(bq + int64_t{64} * (4 + v), hi);
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
  static void Batch(const BlockQ8A* x, int64_t ldx, const int8_t* bq, const __m512* wd, int64_t g,
                    __m512 acc[kAmxTokens]) {
    alignas(64) int32_t c[N][kAmxTokens * kAmxRows];
    DotBatch<N>(x + g, ldx * static_cast<int64_t>(sizeof(BlockQ8A)), bq + g * kBBytes, c);
#pragma GCC unroll 4
    for (int i = 0; i < N; ++i) ScaleGroup(c[i], wd[g + i], x + g + i, ldx, acc);
  }

  static constexpr auto Narrow = avx512::GemmW4A8;  // fewer than 16 tokens
};

}  // namespace

namespace amx {
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1) {
  GemmAmx<W4Amx>(w, x, ldx, n, y, ldy, r0, r1);
}
}  // namespace amx

}  // namespace ari::runtime::kernels::internal
