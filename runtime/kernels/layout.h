// Data layouts the kernels read and write. All multi-byte values are little-endian.
//
// Common terms: a matrix has `rows` output rows (M) and `cols` inputs (K). K is split into
// G = ceil(K / 32) groups of 32 ("quant groups", as GGUF Q8_0/Q4_0). When K % 32 != 0 the
// last group is zero-padded: padded weights are 0 (W8: q = 0; W4: q = 8, i.e. value 0) and
// activation rows are padded with zeros to Kp = 32 * G elements by the converters below, so
// kernels never handle a tail. Rows are interleaved in blocks of kRowInterleave = 8 rows;
// when M % 8 != 0 the last row block is padded with zero rows (scale 0), whose outputs are
// never written.
//
// ---- W8A16 packed weights (PackedPrecision::kW8) ----
// Per row block b (rows 8b .. 8b+7), groups g = 0 .. G-1 in order, each a 272-byte tile:
//   bytes [0, 16):    8 x fp16 scale d[r]     (r = row within the block, GGUF Q8_0 `d`)
//   bytes [16, 272):  8 x 32 int8 quants, row r at [16 + 32 r, 16 + 32 r + 32), element j of
//                     the group at offset j  (GGUF Q8_0 `qs`, unchanged)
// Row block b starts at byte b * G * 272. Value: w[r][32 g + j] = d[r] * q[r][j].
// Values are byte-identical to GGUF Q8_0 blocks (d and qs), only the order changes, so a
// Q8_0 GGUF row packs without requantization.
//
// ---- W4A8 packed weights (PackedPrecision::kW4) ----
// Per row block b, groups g = 0 .. G-1 in order, each a 144-byte tile:
//   bytes [0, 16):    8 x fp16 scale d[r]     (GGUF Q4_0 `d`)
//   bytes [16, 144):  128 bytes of nibbles. Byte 16 + 32 v + 4 r + e (v = 0..3, r = row
//                     0..7, e = 0..3) holds, in its low nibble, quant q[r][4 v + e] and in
//                     its high nibble q[r][16 + 4 v + e]; q in 0..15.
// Value: w[r][32 g + j] = d[r] * (q[r][j] - 8)  (GGUF Q4_0 semantics, same d and nibbles).
// Why: one 32-byte load, masked (low) or shifted (high), gives for all 8 rows 4 consecutive
// quants each, in the 4-byte lane of that row; broadcasting 4 activation bytes to all lanes
// lets maddubs/madd (AVX2), vpdpbusd (VNNI) or sdot (NEON) produce one int32 per row with
// no horizontal reduction, and the 8 per-row results of a group land in one vector that is
// scaled by the 8 row scales at once.
//
// ---- W8A16 activations: Q16 rows of BlockQ16A (64 bytes per group of 32) ----
// Per group: int16 qs[32] and an fp32 scale d: x[j] ~= d * qs[j], qs in [-32767, 32767],
// d = max|x| / 32767, qs = round-to-nearest-even(x * (1 / d)) (d below FLT_MIN, or a zero
// group, gives d = 0 and qs = 0). A row of K activations is G blocks of qs (one per group),
// then the G scales, zero padded to whole blocks: ActQ16ABlocks(K) = G + ceil(G / 16)
// blocks, G * 68 bytes when G % 16 == 0 (Q16Scales finds the scales). So every group's
// 64 bytes start 64-byte aligned when the row does: one cache line per group for the AMX
// tile rows (a 68-byte block with d first split 15 of 16 groups over two lines; aligned,
// the AMX GEMM ran 10-14% faster, docs/benchmarks.md) and for the vector loads.
// 16-bit integers rather than fp16 so the weight x activation products are exact
// int32 dot products (vpmaddwd / vpdpwssd on x86, smlal on ARM) instead of an fp32 FMA per
// weight: the kernels do 2-4x fewer operations per weight and W8A16 decode streams at the
// memory's speed. Quality: the rounding error is at most d / 2 = max|x| / 65534 per value,
// below fp16's 2^-11 relative error for every value above 1/32 of its group's maximum, and
// far below the Q8_0 weight error (max|w| / 254) for all; docs/benchmarks.md "Quality"
// has the stories260K golden agreement. Internal format, never stored in files.
//
// ---- W4A8 activations: BlockQ8A (40 bytes per group of 32) ----
// float d; int32 sum; int8 qs[32]: x[j] ~= d * qs[j], qs in [-127, 127], d = max|x| / 127,
// qs = round-to-nearest-even(x / d) computed as x * (1 / d), sum = sum of qs[j] (precomputed
// for the Q4_0 zero point: sum_j (q_j - 8) a_j = sum_j q_j a_j - 8 * sum). Internal format
// (fp32 d, not GGUF's fp16), never stored in files.
//
// ---- Outputs ----
// fp32. GEMV writes y[r] for r in [r0, r1); GEMM writes y[t * ldy + r] (token-major, so a
// layer's output rows are the next layer's activation rows).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ari::runtime::kernels {

inline constexpr int kGroup = 32;                     // quant group (GGUF QK8_0 == QK4_0)
inline constexpr int kRowInterleave = 8;              // rows per packed row block
inline constexpr int64_t kW8TileBytes = 16 + 8 * 32;  // 272
inline constexpr int64_t kW4TileBytes = 16 + 8 * 16;  // 144
inline constexpr int64_t kBufferAlign = 128;          // recommended buffer alignment

enum class PackedPrecision : uint8_t { kW8 = 0, kW4 = 1 };

// W4A8 activation group.
struct BlockQ8A {
  float d;
  int32_t sum;
  int8_t qs[kGroup];
};
static_assert(sizeof(BlockQ8A) == 40);

// W8A16 activation group's quants (its scale is in the row's scales, Q16Scales). Aligned
// as a float, so a row that is aligned as its type has aligned scales.
struct alignas(alignof(float)) BlockQ16A {
  int16_t qs[kGroup];
};
static_assert(sizeof(BlockQ16A) == 64);

// A packed matrix as kernels see it (a view: the bytes live in a mapped file or arena).
struct PackedMatrix {
  PackedPrecision precision = PackedPrecision::kW8;
  const std::byte* data = nullptr;
  int64_t rows = 0;  // M (logical, unpadded)
  int64_t cols = 0;  // K (logical, unpadded)
};

constexpr int64_t Groups(int64_t cols) { return (cols + kGroup - 1) / kGroup; }
constexpr int64_t PaddedCols(int64_t cols) { return Groups(cols) * kGroup; }
constexpr int64_t RowBlocks(int64_t rows) { return (rows + kRowInterleave - 1) / kRowInterleave; }
constexpr int64_t TileBytes(PackedPrecision p) {
  return p == PackedPrecision::kW8 ? kW8TileBytes : kW4TileBytes;
}
// Bytes of one packed row block (8 rows x all groups) and of the whole matrix.
constexpr int64_t RowBlockBytes(PackedPrecision p, int64_t cols) {
  return Groups(cols) * TileBytes(p);
}
constexpr int64_t PackedBytes(PackedPrecision p, int64_t rows, int64_t cols) {
  return RowBlocks(rows) * RowBlockBytes(p, cols);
}
// Blocks of a W8A16 activation row (Q16 row: the groups' quants, then their scales) and of
// a W4A8 one.
inline constexpr int64_t kQ16ScalesPerBlock = int64_t{sizeof(BlockQ16A) / sizeof(float)};  // 16
constexpr int64_t ActQ16ABlocks(int64_t cols) {
  return Groups(cols) + (Groups(cols) + kQ16ScalesPerBlock - 1) / kQ16ScalesPerBlock;
}
constexpr int64_t ActQ8ABlocks(int64_t cols) { return Groups(cols); }
// The scales of a Q16 row (`row`: its first block; `groups`: Groups(cols)). Token t of rows
// ldx blocks apart has its scales at Q16Scales(row, groups) + t * ldx * kQ16ScalesPerBlock.
inline const float* Q16Scales(const BlockQ16A* row, int64_t groups) {
  return reinterpret_cast<const float*>(row + groups);
}
inline float* Q16Scales(BlockQ16A* row, int64_t groups) {
  return reinterpret_cast<float*>(row + groups);
}

}  // namespace ari::runtime::kernels
