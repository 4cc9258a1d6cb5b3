// Deterministic pseudo-random numbers for scenario generators.
//
// std::*_distribution output is implementation-defined (it differs between
// standard libraries and versions), so the generators use only this: the
// xoshiro256** generator (Blackman & Vigna) seeded through SplitMix64, and
// distributions written out here. Given a seed, every integer result is
// identical on every platform; results that go through std::log / std::cos /
// std::sqrt (exponential, normal) are identical wherever libm is (glibc's
// log/exp/sin/cos are correctly rounded in practice), and the generators round
// times to whole milliseconds and temperatures to 0.1 C, which hides last-bit
// differences in all but astronomically rare cases.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace ari::sim {

// SplitMix64 step: also used to derive independent sub-seeds.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Seed for stream `stream` of a generator seeded with `seed`: streams are
// independent, so adding draws to one leaves the others unchanged.
inline uint64_t SubSeed(uint64_t seed, uint64_t stream) {
  uint64_t s = seed ^ (0xD1B54A32D192ED03ull * (stream + 1));
  SplitMix64(s);
  return SplitMix64(s);
}

class Prng {
 public:
  explicit Prng(uint64_t seed) {
    uint64_t s = seed;
    for (auto& w : s_) w = SplitMix64(s);
  }

  uint64_t NextU64() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n) (n > 0), without modulo bias (Lemire).
  uint64_t Below(uint64_t n) {
    unsigned __int128 m = static_cast<unsigned __int128>(NextU64()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(NextU64()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  bool Bernoulli(double p) { return Uniform() < p; }
  // Exponential with the given mean (> 0): inter-arrival times of a Poisson process.
  double Exponential(double mean) { return -mean * std::log1p(-Uniform()); }
  // Normal(mean, stddev) by Box-Muller (one value per call; no cached state).
  double Normal(double mean, double stddev) {
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    return mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4] = {};
};

}  // namespace ari::sim
