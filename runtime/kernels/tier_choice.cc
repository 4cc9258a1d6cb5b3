#include "runtime/kernels/tier_choice.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/pack.h"
#include "runtime/kernels/tier_timings_file.h"

namespace ari::runtime::kernels {
namespace {

using Clock = std::chrono::steady_clock;

// The family's function of a table, as an address (to find tiers that share one).
const void* FamilyFn(const KernelTable& t, MatmulFamily f) {
  switch (f) {
    case MatmulFamily::kGemvW8A16: return reinterpret_cast<const void*>(t.gemv_w8a16);
    case MatmulFamily::kGemmW8A16: return reinterpret_cast<const void*>(t.gemm_w8a16);
    case MatmulFamily::kGemvW4A8: return reinterpret_cast<const void*>(t.gemv_w4a8);
    case MatmulFamily::kGemmW4A8: break;
  }
  return reinterpret_cast<const void*>(t.gemm_w4a8);
}

bool MeasurementOff() {
  const char* env = std::getenv("ARI_KERNEL_CHOICE");
  return env != nullptr && std::strcmp(env, "own") == 0;
}

// 128-byte aligned scratch that frees itself.
struct Aligned {
  explicit Aligned(size_t bytes)
      : p(static_cast<std::byte*>(::operator new(bytes, std::align_val_t(128)))), n(bytes) {
    std::memset(p, 0, n);
  }
  ~Aligned() { ::operator delete(p, std::align_val_t(128)); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  std::byte* p;
  size_t n;
};

// The operands of one measurement: packed W8 and W4 matrices of pseudo-random weights and
// activations for `n` tokens.
struct Operands {
  Operands(const MeasureOptions& o)
      : w8(static_cast<size_t>(PackedBytes(PackedPrecision::kW8, o.rows, o.cols))),
        w4(static_cast<size_t>(PackedBytes(PackedPrecision::kW4, o.rows, o.cols))),
        x16(static_cast<size_t>(ActQ16ABlocks(o.cols) * o.gemm_n) * sizeof(BlockQ16A)),
        xq(static_cast<size_t>(ActQ8ABlocks(o.cols) * o.gemm_n) * sizeof(BlockQ8A)),
        y(static_cast<size_t>(o.rows * o.gemm_n) * sizeof(float)) {
    std::vector<float> src(static_cast<size_t>(o.rows * o.cols));
    uint32_t s = 12345;
    for (float& v : src) {
      s = s * 1664525u + 1013904223u;
      v = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) * 1e-3f;
    }
    ok = PackF32(PackedPrecision::kW8, src.data(), o.rows, o.cols, {w8.p, w8.n}).has_value() &&
         PackF32(PackedPrecision::kW4, src.data(), o.rows, o.cols, {w4.p, w4.n}).has_value();
    const KernelTable& k = KernelsFor(IsaTier::kScalar);
    for (int64_t t = 0; t < o.gemm_n; ++t) {
      const float* row = src.data() + t * o.cols;  // any values of the right range
      QuantizeActQ16A(k, row, o.cols,
                      reinterpret_cast<BlockQ16A*>(x16.p) + t * ActQ16ABlocks(o.cols));
      QuantizeActQ8A(k, row, o.cols, reinterpret_cast<BlockQ8A*>(xq.p) + t * ActQ8ABlocks(o.cols));
    }
    m8 = PackedMatrix{PackedPrecision::kW8, w8.p, o.rows, o.cols};
    m4 = PackedMatrix{PackedPrecision::kW4, w4.p, o.rows, o.cols};
  }
  Aligned w8, w4, x16, xq, y;
  PackedMatrix m8, m4;
  bool ok = false;
};

void RunOnce(const KernelTable& k, MatmulFamily f, const Operands& d, const MeasureOptions& o) {
  const auto* x16 = reinterpret_cast<const BlockQ16A*>(d.x16.p);
  const auto* xq = reinterpret_cast<const BlockQ8A*>(d.xq.p);
  auto* y = reinterpret_cast<float*>(d.y.p);
  switch (f) {
    case MatmulFamily::kGemvW8A16: return k.gemv_w8a16(d.m8, x16, y, 0, o.rows);
    case MatmulFamily::kGemmW8A16:
      return k.gemm_w8a16(d.m8, x16, ActQ16ABlocks(o.cols), o.gemm_n, y, o.rows, 0, o.rows);
    case MatmulFamily::kGemvW4A8: return k.gemv_w4a8(d.m4, xq, y, 0, o.rows);
    case MatmulFamily::kGemmW4A8:
      return k.gemm_w4a8(d.m4, xq, ActQ8ABlocks(o.cols), o.gemm_n, y, o.rows, 0, o.rows);
  }
}

// Best of `reps` calls after a warm-up, microseconds.
double TimeUs(const KernelTable& k, MatmulFamily f, const Operands& d, const MeasureOptions& o) {
  RunOnce(k, f, d, o);
  double best = 1e300;
  for (int r = 0; r < std::max(1, o.reps); ++r) {
    const auto t0 = Clock::now();
    RunOnce(k, f, d, o);
    best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

std::string_view MatmulFamilyName(MatmulFamily f) {
  switch (f) {
    case MatmulFamily::kGemvW8A16: return "GEMV W8A16";
    case MatmulFamily::kGemmW8A16: return "GEMM W8A16";
    case MatmulFamily::kGemvW4A8: return "GEMV W4A8";
    case MatmulFamily::kGemmW4A8: break;
  }
  return "GEMM W4A8";
}

std::span<const IsaTier> CandidateTiers(MatmulFamily f, IsaTier ceiling, bool include_scalar,
                                        std::array<IsaTier, kNumIsaTiers>& storage) {
  size_t n = 0;
  const void* seen[kNumIsaTiers] = {};
  for (IsaTier t = ceiling;; t = internal::LowerTier(t)) {
    if (IsaTierSupported(t) && IsaTierCompiled(t)) {
      const void* fn = FamilyFn(KernelsFor(t), f);
      if (std::find(seen, seen + n, fn) == seen + n &&
          (t != IsaTier::kScalar || include_scalar || n == 0)) {
        seen[n] = fn;
        storage[n++] = t;
      }
    }
    if (t == IsaTier::kScalar) break;
  }
  return {storage.data(), n};
}

TierTimings MeasureTierTimings(const MeasureOptions& o) {
  TierTimings t;
  if (MeasurementOff()) return t;
  std::array<IsaTier, kNumIsaTiers> storage{};
  std::unique_ptr<Operands> d;  // built only when some family has a choice to make
  for (int fi = 0; fi < kNumMatmulFamilies; ++fi) {
    const auto f = static_cast<MatmulFamily>(fi);
    const auto cand = CandidateTiers(f, BestIsaTier(), o.include_scalar, storage);
    if (cand.size() < 2) continue;
    if (!d) d = std::make_unique<Operands>(o);
    if (!d->ok) return t;
    for (IsaTier tier : cand) {
      t.us[static_cast<size_t>(fi)][static_cast<size_t>(tier)] = TimeUs(KernelsFor(tier), f, *d, o);
    }
  }
  return t;
}

IsaTier ChooseTier(const TierTimings& t, MatmulFamily f, std::span<const IsaTier> candidates) {
  if (candidates.empty()) return IsaTier::kScalar;
  IsaTier best = candidates.front();
  double best_us = t.us[static_cast<size_t>(f)][static_cast<size_t>(best)];
  for (IsaTier c : candidates.subspan(1)) {
    const double us = t.us[static_cast<size_t>(f)][static_cast<size_t>(c)];
    if (us >= 0 && (best_us < 0 || us < best_us)) {
      best = c;
      best_us = us;
    }
  }
  return best;
}

const TierTimings& ProcessTierTimings() {
  // One host, one set of timings (tier_timings_file.h): read the file when a process of
  // this host measured already, else measure and share.
  static const TierTimings timings = [] {
    if (MeasurementOff()) return TierTimings{};
    const std::filesystem::path path = TierTimingsPath();
    if (auto t = LoadTierTimings(path)) return *t;
    const TierTimings t = MeasureTierTimings(MeasureOptions{});
    if (!SaveTierTimings(path, t)) {
      std::fprintf(stderr, "ari: kernel tier timings not saved to %s (measured again next time)\n",
                   path.c_str());
    }
    return t;
  }();
  return timings;
}

std::array<IsaTier, kNumMatmulFamilies> ChosenTiers(IsaTier ceiling) {
  std::array<IsaTier, kNumMatmulFamilies> r{};
  std::array<IsaTier, kNumIsaTiers> storage{};
  for (int fi = 0; fi < kNumMatmulFamilies; ++fi) {
    const auto f = static_cast<MatmulFamily>(fi);
    r[static_cast<size_t>(fi)] =
        ChooseTier(ProcessTierTimings(), f, CandidateTiers(f, ceiling, false, storage));
  }
  return r;
}

const KernelTable& ChosenKernelsFor(IsaTier ceiling) {
  static const std::array<KernelTable, kNumIsaTiers> tables = [] {
    std::array<KernelTable, kNumIsaTiers> r{};
    for (int i = 0; i < kNumIsaTiers; ++i) {
      const auto tier = static_cast<IsaTier>(i);
      KernelTable k = KernelsFor(tier);
      if (IsaTierSupported(tier)) {
        const auto chosen = ChosenTiers(tier);
        const KernelTable& gemv_w8a16 = KernelsFor(chosen[0]);
        const KernelTable& gemm_w8a16 = KernelsFor(chosen[1]);
        const KernelTable& gemv_w4a8 = KernelsFor(chosen[2]);
        const KernelTable& gemm_w4a8 = KernelsFor(chosen[3]);
        k.gemv_w8a16 = gemv_w8a16.gemv_w8a16;
        k.gemv_w8a16_tier = gemv_w8a16.gemv_w8a16_tier;
        k.gemm_w8a16 = gemm_w8a16.gemm_w8a16;
        k.gemm_w8a16_tier = gemm_w8a16.gemm_w8a16_tier;
        k.gemv_w4a8 = gemv_w4a8.gemv_w4a8;
        k.gemv_w4a8_tier = gemv_w4a8.gemv_w4a8_tier;
        k.gemm_w4a8 = gemm_w4a8.gemm_w4a8;
        k.gemm_w4a8_tier = gemm_w4a8.gemm_w4a8_tier;
      }
      r[static_cast<size_t>(i)] = k;
    }
    return r;
  }();
  return tables[static_cast<size_t>(ceiling)];
}

std::string TierChoiceReport() {
  std::string s;
  const auto chosen = ChosenTiers(BestIsaTier());
  std::array<IsaTier, kNumIsaTiers> storage{};
  for (int fi = 0; fi < kNumMatmulFamilies; ++fi) {
    const auto f = static_cast<MatmulFamily>(fi);
    const auto cand = CandidateTiers(f, BestIsaTier(), false, storage);
    s += std::string(MatmulFamilyName(f)) + ": ";
    if (cand.size() == 1) {
      s += std::string(IsaTierName(cand[0])) + " (the only candidate, not timed)\n";
      continue;
    }
    for (size_t i = 0; i < cand.size(); ++i) {
      const double us =
          ProcessTierTimings().us[static_cast<size_t>(fi)][static_cast<size_t>(cand[i])];
      char b[64];
      std::snprintf(b, sizeof b, "%s%s %.1f us", i ? ", " : "",
                    std::string(IsaTierName(cand[i])).c_str(), us);
      s += b;
    }
    s += " -> " + std::string(IsaTierName(chosen[static_cast<size_t>(fi)])) + "\n";
  }
  return s;
}

}  // namespace ari::runtime::kernels
