// What layer drop saves: prefill and decode time per token at every drop level of a pack,
// measured through the Engine (RunChunk with ChunkKnobs::layer_drop), and the time
// factors relative to drop 0 that the simulator's cost model uses (sim/cost_model.h,
// "layer_drop_cost"). A dropped block still projects K and V (runtime/engine/
// fast_forward.h), so a level saves less than its share of the blocks. Driven by
// ari-dropcost (runtime/tools/dropcost.cc).
//
// Levels are measured interleaved (rep 1: levels 0..max, rep 2: ...) so that a change of
// the machine's load spreads over every level; each figure is the median over reps.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"

namespace ari::runtime {

struct DropCostOptions {
  std::filesystem::path model;  // a pack with layer importance (ari-pack --calibrate)
  Precision precision = Precision::kW8A16;
  int threads = 2;
  int prompt_tokens = 64;  // one prefill chunk
  int n_gen = 32;          // one decode chunk
  int reps = 3;
  int max_level = -1;  // -1: the pack's maximum (n_layers - 2)
};

struct DropCostLevel {
  int32_t drop = 0;
  double prefill_ms_per_token = 0, decode_ms_per_token = 0;  // medians
  double prefill_factor = 1, decode_factor = 1;              // time / time at drop 0
  double prefill_fit = 1, decode_fit = 1;                    // 1 - slope x drop (below)
};

struct DropCostResult {
  std::string model, precision;
  int32_t layers = 0, threads = 0, prompt_tokens = 0, n_gen = 0, reps = 0;
  std::vector<DropCostLevel> levels;  // 0 .. max
  // Least-squares slope of 1 - factor against the level (a line through (0, 1)): the
  // share of drop-0 time one dropped block saves. On a shared machine the per-level
  // medians are noisy; the line over all levels is what the cost model gets by default.
  double prefill_slope = 0, decode_slope = 0;
  std::string ToTable() const;
  // {"layers": L, "source": "...", "prefill": [...], "decode": [...]}: the cost model's
  // "layer_drop_cost" object, fitted factors (raw: the per-level medians' factors).
  std::string ToCostJson(bool raw = false) const;
};

Result<DropCostResult> MeasureDropCost(const DropCostOptions& o);

}  // namespace ari::runtime
