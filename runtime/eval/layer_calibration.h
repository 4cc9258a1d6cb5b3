// Layer importance for layer drop, and the drop order derived from it.
//
// A block's influence is 1 - mean cosine similarity between its input and output residual
// streams over a calibration text (every token of every window counts once). A block that
// barely changes the stream (cosine ~1) has influence ~0 and is the first to drop. The
// values lie in [0, 2]. Computed with the reference fp32 blocks (runtime/eval/block_loop.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"

namespace ari::runtime {

class Model;

struct CalibrationOptions {
  // Tokens per window; each window runs from position 0 (capped by the context length).
  // Consecutive windows do not overlap. A last window shorter than 2 tokens is ignored.
  int32_t window = 256;
};

// Per-block influence in [0, 2], one value per block. Errors: fewer than 2 tokens, token
// ids out of range.
Result<std::vector<float>> CalibrateLayerImportance(const Model& model,
                                                    std::span<const TokenId> text_tokens,
                                                    const CalibrationOptions& opts = {});

// Blocks skipped at drop level `level`: the `level` least influential blocks, never the
// first or the last block (so at most n_layers - 2; larger levels are clamped, level <= 0
// drops nothing). Ties go to the lower block index. Returned in ascending block order.
std::vector<int32_t> DropOrder(std::span<const float> importance, int32_t level);

}  // namespace ari::runtime
