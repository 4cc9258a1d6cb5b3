// llama.cpp's "K-quants" (Q4_K, Q5_K, Q6_K): 256-element super-blocks, byte-compatible with
// GGUF / ggml. Only dequantization (the scalar reference, the specification) lives here;
// ARI never writes these types, it re-quantizes them into its own W8/W4 packs.
//
// Q4_K / Q5_K: 8 sub-blocks of 32 elements, each with a 6-bit scale sc[j] and a 6-bit min
// m[j], both relative to the fp16 super-block scales d and dmin:
//     x = d * sc[j] * q - dmin * m[j]     (q in 0..15 for Q4_K, 0..31 for Q5_K)
// The 16 six-bit values are packed in 12 bytes (KScaleMin):
//     j < 4:  sc[j] = s[j] & 63            m[j] = s[j + 4] & 63
//     j >= 4: sc[j] = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4
//             m[j]  = (s[j + 4] >> 4) | (s[j]     >> 6) << 4
// Element order: the 256 elements are 4 chunks of 64; chunk c uses qs[32c .. 32c + 32):
// element 64c + l (l < 32) is the low nibble of qs[32c + l] (sub-block 2c), element
// 64c + 32 + l its high nibble (sub-block 2c + 1). Q5_K adds the fifth bit from qh[l]:
// bit 2c for the low-nibble element, bit 2c + 1 for the high-nibble one.
//
// Q6_K: 16 sub-blocks of 16 elements with int8 scales sc[k]; x = d * sc[k] * (q - 32),
// q = 4 low bits (ql) | 2 high bits (qh) << 4. Two halves of 128 elements; half h uses
// ql[64h .. 64h + 64), qh[32h .. 32h + 32), sc[8h .. 8h + 8). Within a half, for l < 32:
//     element l      : ql[l]      & 15, qh[l] bits 0-1, scale sc[l / 16]
//     element l + 32 : ql[l + 32] & 15, qh[l] bits 2-3, scale sc[l / 16 + 2]
//     element l + 64 : ql[l]      >> 4, qh[l] bits 4-5, scale sc[l / 16 + 4]
//     element l + 96 : ql[l + 32] >> 4, qh[l] bits 6-7, scale sc[l / 16 + 6]
#pragma once

#include <cstddef>
#include <cstdint>

namespace ari::runtime {

inline constexpr int kSuperBlock = 256;  // QK_K
inline constexpr int kKScaleBytes = 12;  // K_SCALE_SIZE

struct BlockQ4_K {
  uint16_t d;     // fp16: super-block scale of the scales
  uint16_t dmin;  // fp16: super-block scale of the mins
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kSuperBlock / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must match ggml (144 bytes)");

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must match ggml (176 bytes)");

struct BlockQ6_K {
  uint8_t ql[kSuperBlock / 2];  // low 4 bits
  uint8_t qh[kSuperBlock / 4];  // high 2 bits
  int8_t scales[kSuperBlock / 16];
  uint16_t d;  // fp16
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must match ggml (210 bytes)");

// Sub-block j (0..7) scale and min from the 12 packed bytes of a Q4_K / Q5_K block.
void KScaleMin(const uint8_t* scales, int j, int* sc, int* m);

// Dequantize n elements (n a multiple of 256; a trailing partial block is ignored).
// `src` need not be aligned.
void DequantizeRowQ4K(const std::byte* src, float* dst, int64_t n);
void DequantizeRowQ5K(const std::byte* src, float* dst, int64_t n);
void DequantizeRowQ6K(const std::byte* src, float* dst, int64_t n);

}  // namespace ari::runtime
