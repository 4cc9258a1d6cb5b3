// "Best" tier by measurement (issue 16): a higher ISA tier is not always the faster one
// for a kernel (on an Intel Xeon with AVX-512 the AVX-512 W4A8 GEMM and W8A16 GEMV measured
// slower than the AVX2 ones, docs/benchmarks.md "Tier choice"). So the table that the
// engine dispatches to (ActiveKernels) takes each matmul family from the fastest tier at
// or below the active one, measured once per process on a synthetic packed matrix; the
// element-wise and attention kernels stay the active tier's own. Lowering the tier (the
// governor's ISA knob) still bounds every kernel: a choice is never above the ceiling.
//
// Only distinct SIMD kernels are timed: scalar is never a candidate when a SIMD tier
// exists (it is the spec, not a contender), and tiers sharing one function (e.g. the NEON
// tiers' W8A16 matmuls) are timed once. A host with one SIMD tier (AVX2-only EPYC) times
// nothing and costs no start-up time. ARI_KERNEL_CHOICE=own turns the measurement off
// (every tier its own kernels), for A/B runs.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "runtime/kernels/cpu_features.h"
#include "runtime/kernels/kernels.h"

namespace ari::runtime::kernels {

enum class MatmulFamily : uint8_t { kGemvW8A16 = 0, kGemmW8A16, kGemvW4A8, kGemmW4A8 };
inline constexpr int kNumMatmulFamilies = 4;
std::string_view MatmulFamilyName(MatmulFamily f);

// Microseconds per call, per family and tier; < 0: not measured.
struct TierTimings {
  std::array<std::array<double, kNumIsaTiers>, kNumMatmulFamilies> us{};
  TierTimings() {
    for (auto& row : us) row.fill(-1.0);
  }
};

struct MeasureOptions {
  int64_t rows = 512, cols = 1024;  // W8A16 0.5 MiB, W4A8 0.3 MiB packed (cache-resident)
  // Activations per GEMM call: a prefill chunk (ChunkKnobs::prefill_tokens' default). At 16
  // tokens the AMX W8A16 GEMM's weight repack is paid by one token tile and it ties with
  // AVX-512; from 32 tokens on it is faster (docs/benchmarks.md "AMX").
  int64_t gemm_n = 64;
  int reps = 5;                 // best of, after one warm-up call
  bool include_scalar = false;  // tests only: time scalar too
};

// Candidate tiers of `f` at or below `ceiling` (same family chain), supported by this CPU
// and compiled, one per distinct function; without include_scalar, scalar only when it is
// the only one. Highest first.
std::span<const IsaTier> CandidateTiers(MatmulFamily f, IsaTier ceiling, bool include_scalar,
                                        std::array<IsaTier, kNumIsaTiers>& storage);

// Times every family on every candidate tier below BestIsaTier() (all of them when
// `include_scalar`).
TierTimings MeasureTierTimings(const MeasureOptions& o);

// The pure rule: the candidate with the smallest measured time; unmeasured candidates lose
// to measured ones; a tie, or nothing measured, keeps the highest candidate.
IsaTier ChooseTier(const TierTimings& t, MatmulFamily f, std::span<const IsaTier> candidates);

// Process-wide: measured on first use (thread-safe static), then fixed.
const TierTimings& ProcessTierTimings();
// The tier each family runs at under `ceiling`.
std::array<IsaTier, kNumMatmulFamilies> ChosenTiers(IsaTier ceiling);
// The table ActiveKernels() returns for `ceiling`: `ceiling`'s own table with each matmul
// taken from its chosen tier. Built once per tier.
const KernelTable& ChosenKernelsFor(IsaTier ceiling);
// One line per family with the timings and the choice (start-up logs, ari-bench).
std::string TierChoiceReport();

}  // namespace ari::runtime::kernels
