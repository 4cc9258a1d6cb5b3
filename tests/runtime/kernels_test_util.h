// Shared helpers for the kernel tests (not a test executable itself).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "runtime/kernels/cpu_features.h"
#include "runtime/kernels/kernels.h"

namespace ari::runtime::kernels::testing {

// Normalized mean squared error of `got` against `want`: sum (g - w)^2 / sum w^2
// (absolute squared error when `want` is all zero).
inline double Nmse(std::span<const float> got, std::span<const float> want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0.0 ? num / den : num;
}

inline std::vector<float> RandomVec(std::mt19937& rng, size_t n, float sigma = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A 128-byte aligned byte buffer; At(offset) deliberately misaligns views into it.
class TestBuffer {
 public:
  explicit TestBuffer(size_t bytes, size_t max_offset = 128)
      : size_(bytes + max_offset),
        data_(static_cast<std::byte*>(std::aligned_alloc(128, RoundUp(size_)))) {}
  std::byte* At(size_t offset) { return data_.get() + offset; }

 private:
  static size_t RoundUp(size_t n) { return (n + 127) / 128 * 128; }
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  size_t size_;
  std::unique_ptr<std::byte, Free> data_;
};

// SIMD tiers to test against the scalar reference: every non-scalar tier; the test skips
// (with a message) when this CPU cannot run it.
inline std::vector<IsaTier> SimdTiers() {
  return {IsaTier::kAvx2, IsaTier::kAvx512Vnni,  IsaTier::kAmx,
          IsaTier::kNeon, IsaTier::kNeonDotprod, IsaTier::kNeonI8mm};
}

inline std::string TierParamName(const ::testing::TestParamInfo<IsaTier>& info) {
  return std::string(IsaTierName(info.param));
}

#define ARI_REQUIRE_TIER(tier)                                                             \
  if (!::ari::runtime::kernels::IsaTierSupported(tier)) {                                  \
    GTEST_SKIP() << "this CPU cannot run ISA tier " << IsaTierName(tier)                   \
                 << " (best here: " << IsaTierName(BestIsaTier()) << "); path not tested"; \
  }                                                                                        \
  if (!::ari::runtime::kernels::IsaTierCompiled(tier)) {                                   \
    GTEST_SKIP() << "no kernels for ISA tier " << IsaTierName(tier)                        \
                 << " in this build (falls back to a lower tier)";                         \
  }

}  // namespace ari::runtime::kernels::testing
