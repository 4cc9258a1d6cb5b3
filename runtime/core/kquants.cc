#include "runtime/core/kquants.h"

#include <cstring>

#include "runtime/core/tensor_types.h"

namespace ari::runtime {

void KScaleMin(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
    return;
  }
  *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
  *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
}

namespace {

// One Q4_K / Q5_K super-block; qh == nullptr for Q4_K.
void DequantizeQ45K(float d, float dmin, const uint8_t* scales, const uint8_t* qs,
                    const uint8_t* qh, float* out) {
  for (int c = 0; c < 4; ++c) {
    int sc_lo = 0, m_lo = 0, sc_hi = 0, m_hi = 0;
    KScaleMin(scales, 2 * c, &sc_lo, &m_lo);
    KScaleMin(scales, 2 * c + 1, &sc_hi, &m_hi);
    const float d_lo = d * static_cast<float>(sc_lo), min_lo = dmin * static_cast<float>(m_lo);
    const float d_hi = d * static_cast<float>(sc_hi), min_hi = dmin * static_cast<float>(m_hi);
    const uint8_t* q = qs + ptrdiff_t{32} * c;
    float* y = out + ptrdiff_t{64} * c;
    for (int l = 0; l < 32; ++l) {
      int lo = q[l] & 15, hi = q[l] >> 4;
      if (qh != nullptr) {
        lo |= ((qh[l] >> (2 * c)) & 1) << 4;
        hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
      }
      y[l] = d_lo * static_cast<float>(lo) - min_lo;
      y[l + 32] = d_hi * static_cast<float>(hi) - min_hi;
    }
  }
}

}  // namespace

void DequantizeRowQ4K(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    BlockQ4_K blk{};
    std::memcpy(&blk, src + b * sizeof(BlockQ4_K), sizeof blk);
    DequantizeQ45K(Fp16ToFp32(blk.d), Fp16ToFp32(blk.dmin), blk.scales, blk.qs, nullptr,
                   dst + b * kSuperBlock);
  }
}

void DequantizeRowQ5K(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    BlockQ5_K blk{};
    std::memcpy(&blk, src + b * sizeof(BlockQ5_K), sizeof blk);
    DequantizeQ45K(Fp16ToFp32(blk.d), Fp16ToFp32(blk.dmin), blk.scales, blk.qs, blk.qh,
                   dst + b * kSuperBlock);
  }
}

void DequantizeRowQ6K(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    BlockQ6_K blk{};
    std::memcpy(&blk, src + b * sizeof(BlockQ6_K), sizeof blk);
    const float d = Fp16ToFp32(blk.d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk.ql + ptrdiff_t{64} * h;
      const uint8_t* qh = blk.qh + ptrdiff_t{32} * h;
      const int8_t* sc = blk.scales + ptrdiff_t{8} * h;
      float* y = dst + b * kSuperBlock + ptrdiff_t{128} * h;
      for (int l = 0; l < 32; ++l) {
        const int k = l / 16;
        const int q0 = ((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[k]) * static_cast<float>(q0);
        y[l + 32] = d * static_cast<float>(sc[k + 2]) * static_cast<float>(q1);
        y[l + 64] = d * static_cast<float>(sc[k + 4]) * static_cast<float>(q2);
        y[l + 96] = d * static_cast<float>(sc[k + 6]) * static_cast<float>(q3);
      }
    }
  }
}

}  // namespace ari::runtime
