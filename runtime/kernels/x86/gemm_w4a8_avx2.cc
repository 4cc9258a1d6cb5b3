// AVX2 W4A8 GEMM (prefill): y[t * ldy + r] = sum_k W[r][k] * x[t][k] on packed Q4 weights
// (layout.h) and BlockQ8A activations. Arithmetic per (row, token, group) exactly as the
// scalar reference (scalar_matmul.cc): the exact int32 group dot, then
// acc = fma(float(isum - 8 * sum), d_w * d_a, acc) in group order from acc = 0, so the
// output is bit-identical to the scalar GEMM and to N GEMVs (tests/runtime/
// kernels_matmul_test.cc, fast_forward_test.cc).
//
// Micro-kernel: one row block (8 rows, one int32 lane per row) x 6 tokens (then 4, then a
// 1-3 token tail). Per group the four 32-byte nibble vectors are unpacked one at a time
// (low / high nibbles: 2 registers) and each unpacked vector serves all tokens of the tile
// before the next is loaded: a weight byte is unpacked once per token tile, and only lo,
// hi, the int16 partial sums and the fp32 accumulators are live. vpmaddubsw multiplies the
// unsigned nibbles (0..15) with the signed activation quads (broadcast from memory) into
// exact int16 pair sums (|8 x 2 x 15 x 127| = 30480 < 2^15), vpmaddwd folds them to int32;
// the Q4 zero point is removed with the block's precomputed activation sum (8 * sum).
// The 6- and 4-token tiles are inline assembly (fixed register allocation; g++ 12 spilled
// the intrinsic version), the 1-3 token tails use the intrinsic W4Tile<NT>. Measured
// (kernels_bench, one thread, 5632x2048 x 128 tokens): 20-24 ms -> 16.5-19 ms CPU; see
// /work/notes/gemm_report.md. Per token and group the kernel issues 8 vpmaddubsw, 7 vpaddw,
// 1 vpmaddwd, shift/sub/convert/mul/fma (the spec's exact float sequence) plus 1/6 of the
// unpack: about 24 vector ops per 256 MACs, near the two multiply pipes of Zen 3.
//
// Blocking (row chunks of about 256 KiB packed weights, token tiles sweeping each chunk)
// and tile choice are gemm_driver.h's, with this file's W4BlockTiles as the micro-kernel.
#include <immintrin.h>

#include <cstring>

#include "runtime/kernels/gemm_driver.h"
#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/x86/avx2_common.h"

namespace ari::runtime::kernels::internal {
namespace {

constexpr int kTokenTile = 4;
constexpr int kWideTile = 6;  // tokens per tile of the main loop (W4Tile6Asm)

// Constants of the assembly kernels (memory operands).
alignas(32) const int8_t kMask[32] = {15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
                                      15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
                                      15, 15, 15, 15, 15, 15, 15, 15, 15, 15};
alignas(32) const int16_t kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

// One row block against NT tokens over all groups; acc[t] = 8 row outputs of token t.
template <int NT>
inline void W4Tile(const std::byte* block, int64_t groups, const BlockQ8A* const* xt,
                   __m256 acc[kTokenTile]) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  const std::byte* tile = block;
  for (int64_t g = 0; g < groups; ++g, tile += kW4TileBytes) {
    const __m256i* nib = reinterpret_cast<const __m256i*>(tile + 16);
    __m256i s[NT];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m256i raw = _mm256_loadu_si256(nib + v);
      const __m256i lo = _mm256_and_si256(raw, mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) {
        const int8_t* q = xt[t][g].qs + int64_t{4} * v;
        const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, Bcast4(q)),
                                           _mm256_maddubs_epi16(hi, Bcast4(q + 16)));
        s[t] = v == 0 ? p : _mm256_add_epi16(s[t], p);
      }
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile)));
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const BlockQ8A& a = xt[t][g];
      const __m256i isum =
          _mm256_sub_epi32(_mm256_madd_epi16(s[t], ones), _mm256_set1_epi32(8 * a.sum));
      acc[t] =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dw, _mm256_set1_ps(a.d)), acc[t]);
    }
  }
}

// W4Tile<4> in inline assembly with a fixed register allocation: g++ 12 hoists the
// activation broadcasts of the intrinsic version and spills ~46 ymm values per group
// (measured 30 ms vs 25 ms for 5632x2048 x 128 tokens). ymm15 nibble mask, ymm14 int16 ones,
// ymm12/13 lo/hi nibbles (ymm12 = row scales after the nibbles), ymm0-3 int16 partial sums
// (then int32 / fp32 group dots), ymm4-7 fp32 accumulators, ymm8-11 temporaries.
// BlockQ8A: d at +0, sum at +4, qs at +8.
// The inline-assembly strings stay one instruction per line:
// clang-format off
#define ARI_W4_PAIR(V, T, A, TA, TB)                                   \
  "vpbroadcastd " #V "*4+8(%[" #A "],%[off]), %%ymm" #TA "\n\t"        \
  "vpbroadcastd " #V "*4+24(%[" #A "],%[off]), %%ymm" #TB "\n\t"       \
  "vpmaddubsw %%ymm" #TA ", %%ymm12, %%ymm" #TA "\n\t"                 \
  "vpmaddubsw %%ymm" #TB ", %%ymm13, %%ymm" #TB "\n\t"
#define ARI_W4_FIRST(T, A, TA, TB) \
  ARI_W4_PAIR(0, T, A, TA, TB) "vpaddw %%ymm" #TA ", %%ymm" #TB ", %%ymm" #T "\n\t"
#define ARI_W4_NEXT(V, T, A, TA, TB)                          \
  ARI_W4_PAIR(V, T, A, TA, TB) "vpaddw %%ymm" #TA ", %%ymm" #TB ", %%ymm" #TA "\n\t" \
  "vpaddw %%ymm" #TA ", %%ymm" #T ", %%ymm" #T "\n\t"
#define ARI_W4_UNPACK(V)                                    \
  "vmovdqu 16+32*" #V "(%[w]), %%ymm13\n\t"                \
  "vpand %%ymm15, %%ymm13, %%ymm12\n\t"                    \
  "vpsrlw $4, %%ymm13, %%ymm13\n\t"                        \
  "vpand %%ymm15, %%ymm13, %%ymm13\n\t"
#define ARI_W4_V(V)                                                            \
  ARI_W4_UNPACK(V) ARI_W4_NEXT(V, 0, a0, 8, 9) ARI_W4_NEXT(V, 1, a1, 10, 11) \
      ARI_W4_NEXT(V, 2, a2, 8, 9) ARI_W4_NEXT(V, 3, a3, 10, 11)
#define ARI_W4_FINISH(T, A, ACC)                              \
  "vpmaddwd %%ymm14, %%ymm" #T ", %%ymm" #T "\n\t"          \
  "vpbroadcastd 4(%[" #A "],%[off]), %%ymm8\n\t"             \
  "vbroadcastss 0(%[" #A "],%[off]), %%ymm9\n\t"             \
  "vpslld $3, %%ymm8, %%ymm8\n\t"                           \
  "vpsubd %%ymm8, %%ymm" #T ", %%ymm" #T "\n\t"             \
  "vmulps %%ymm9, %%ymm12, %%ymm9\n\t"                      \
  "vcvtdq2ps %%ymm" #T ", %%ymm" #T "\n\t"                  \
  "vfmadd231ps %%ymm9, %%ymm" #T ", %%ymm" #ACC "\n\t"

void W4Tile4Asm(const std::byte* block, int64_t groups, const BlockQ8A* const* xt,
                __m256 out[kTokenTile]) {
  const std::byte* w = block;
  int64_t off = 0;
  const int64_t off_end = groups * static_cast<int64_t>(sizeof(BlockQ8A));
  __asm__ volatile(
      "vmovdqa %[mask], %%ymm15\n\t"
      "vmovdqa %[ones], %%ymm14\n\t"
      "vxorps %%ymm4, %%ymm4, %%ymm4\n\t"
      "vxorps %%ymm5, %%ymm5, %%ymm5\n\t"
      "vxorps %%ymm6, %%ymm6, %%ymm6\n\t"
      "vxorps %%ymm7, %%ymm7, %%ymm7\n\t"
      "test %[end], %[end]\n\t"
      "jle 2f\n\t"
      "1:\n\t"
      ARI_W4_UNPACK(0)
      ARI_W4_FIRST(0, a0, 8, 9) ARI_W4_FIRST(1, a1, 10, 11)
      ARI_W4_FIRST(2, a2, 8, 9) ARI_W4_FIRST(3, a3, 10, 11)
      ARI_W4_V(1) ARI_W4_V(2) ARI_W4_V(3)
      "vcvtph2ps (%[w]), %%ymm12\n\t"
      ARI_W4_FINISH(0, a0, 4) ARI_W4_FINISH(1, a1, 5)
      ARI_W4_FINISH(2, a2, 6) ARI_W4_FINISH(3, a3, 7)
      "add $144, %[w]\n\t"
      "add $40, %[off]\n\t"
      "cmp %[end], %[off]\n\t"
      "jl 1b\n\t"
      "2:\n\t"
      "vmovups %%ymm4, 0(%[out])\n\t"
      "vmovups %%ymm5, 32(%[out])\n\t"
      "vmovups %%ymm6, 64(%[out])\n\t"
      "vmovups %%ymm7, 96(%[out])\n\t"
      : [w] "+r"(w), [off] "+r"(off)
      : [a0] "r"(xt[0]), [a1] "r"(xt[1]), [a2] "r"(xt[2]), [a3] "r"(xt[3]),
        [end] "r"(off_end), [out] "r"(out), [mask] "m"(kMask), [ones] "m"(kOnes)
      : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
        "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

// Six tokens: s in ymm0-5, acc in ymm6-11, lo/hi ymm12/13 (ymm12 = row scales after the
// nibbles), temporaries ymm14/15; nibble mask and int16 ones from memory operands.
#define ARI_W6_UNPACK(V)                                    \
  "vmovdqu 16+32*" #V "(%[w]), %%ymm13\n\t"                \
  "vpand %[mask], %%ymm13, %%ymm12\n\t"                    \
  "vpsrlw $4, %%ymm13, %%ymm13\n\t"                        \
  "vpand %[mask], %%ymm13, %%ymm13\n\t"
#define ARI_W6_V(V)                                                                    \
  ARI_W6_UNPACK(V) ARI_W4_NEXT(V, 0, a0, 14, 15) ARI_W4_NEXT(V, 1, a1, 14, 15)       \
      ARI_W4_NEXT(V, 2, a2, 14, 15) ARI_W4_NEXT(V, 3, a3, 14, 15)                    \
          ARI_W4_NEXT(V, 4, a4, 14, 15) ARI_W4_NEXT(V, 5, a5, 14, 15)
#define ARI_W6_FINISH(T, A, ACC)                              \
  "vpmaddwd %[ones], %%ymm" #T ", %%ymm" #T "\n\t"          \
  "vpbroadcastd 4(%[" #A "],%[off]), %%ymm14\n\t"            \
  "vbroadcastss 0(%[" #A "],%[off]), %%ymm15\n\t"            \
  "vpslld $3, %%ymm14, %%ymm14\n\t"                         \
  "vpsubd %%ymm14, %%ymm" #T ", %%ymm" #T "\n\t"            \
  "vmulps %%ymm15, %%ymm12, %%ymm15\n\t"                    \
  "vcvtdq2ps %%ymm" #T ", %%ymm" #T "\n\t"                  \
  "vfmadd231ps %%ymm15, %%ymm" #T ", %%ymm" #ACC "\n\t"

void W4Tile6Asm(const std::byte* block, int64_t groups, const BlockQ8A* const* xt,
                __m256 out[kWideTile]) {
  const std::byte* w = block;
  int64_t off = 0;
  const int64_t off_end = groups * static_cast<int64_t>(sizeof(BlockQ8A));
  __asm__ volatile(
      "vxorps %%ymm6, %%ymm6, %%ymm6\n\t"
      "vxorps %%ymm7, %%ymm7, %%ymm7\n\t"
      "vxorps %%ymm8, %%ymm8, %%ymm8\n\t"
      "vxorps %%ymm9, %%ymm9, %%ymm9\n\t"
      "vxorps %%ymm10, %%ymm10, %%ymm10\n\t"
      "vxorps %%ymm11, %%ymm11, %%ymm11\n\t"
      "test %[end], %[end]\n\t"
      "jle 2f\n\t"
      "1:\n\t"
      ARI_W6_UNPACK(0)
      ARI_W4_FIRST(0, a0, 14, 15) ARI_W4_FIRST(1, a1, 14, 15)
      ARI_W4_FIRST(2, a2, 14, 15) ARI_W4_FIRST(3, a3, 14, 15)
      ARI_W4_FIRST(4, a4, 14, 15) ARI_W4_FIRST(5, a5, 14, 15)
      ARI_W6_V(1) ARI_W6_V(2) ARI_W6_V(3)
      "vcvtph2ps (%[w]), %%ymm12\n\t"
      ARI_W6_FINISH(0, a0, 6) ARI_W6_FINISH(1, a1, 7)
      ARI_W6_FINISH(2, a2, 8) ARI_W6_FINISH(3, a3, 9)
      ARI_W6_FINISH(4, a4, 10) ARI_W6_FINISH(5, a5, 11)
      "add $144, %[w]\n\t"
      "add $40, %[off]\n\t"
      "cmp %[end], %[off]\n\t"
      "jl 1b\n\t"
      "2:\n\t"
      "vmovups %%ymm6, 0(%[out])\n\t"
      "vmovups %%ymm7, 32(%[out])\n\t"
      "vmovups %%ymm8, 64(%[out])\n\t"
      "vmovups %%ymm9, 96(%[out])\n\t"
      "vmovups %%ymm10, 128(%[out])\n\t"
      "vmovups %%ymm11, 160(%[out])\n\t"
      : [w] "+r"(w), [off] "+r"(off)
      : [a0] "r"(xt[0]), [a1] "r"(xt[1]), [a2] "r"(xt[2]), [a3] "r"(xt[3]), [a4] "r"(xt[4]),
        [a5] "r"(xt[5]), [end] "r"(off_end), [out] "r"(out), [mask] "m"(kMask),
        [ones] "m"(kOnes)
      : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
        "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

#undef ARI_W6_UNPACK
#undef ARI_W6_V
#undef ARI_W6_FINISH
#undef ARI_W4_PAIR
#undef ARI_W4_FIRST
#undef ARI_W4_NEXT
#undef ARI_W4_UNPACK
#undef ARI_W4_V
#undef ARI_W4_FINISH
// clang-format on

// The micro-kernel of the driver (gemm_driver.h, row blocks): tiles of 6 tokens while at
// least 6 remain, then 4 (both assembly), then the 1-3 token tail (intrinsics).
struct W4BlockTiles : Avx2W4A8Tiles {
  static constexpr int kTileTokens[] = {kWideTile, kTokenTile};  // tails 1-3
  using Acc = __m256[kWideTile];

  template <int NT>
  static void Tile(const std::byte* block, int64_t groups, const BlockQ8A* const* xt, Acc& acc) {
    if constexpr (NT == kWideTile) {
      W4Tile6Asm(block, groups, xt, acc);
    } else if constexpr (NT == kTokenTile) {
      W4Tile4Asm(block, groups, xt, acc);
    } else {
      // Accumulate in registers, not in `acc` (memory the assembly tiles write).
      __m256 tail[kTokenTile];
      W4Tile<NT>(block, groups, xt, tail);
      for (int t = 0; t < NT; ++t) acc[t] = tail[t];
    }
  }
};

}  // namespace

namespace avx2 {
void GemmW4A8(const PackedMatrix& w, const BlockQ8A* x, int64_t ldx, int64_t n, float* y,
              int64_t ldy, int64_t r0, int64_t r1) {
  GemmRowBlockTiles<W4BlockTiles>(w, x, ldx, n, y, ldy, r0, r1);
}
}  // namespace avx2

}  // namespace ari::runtime::kernels::internal
