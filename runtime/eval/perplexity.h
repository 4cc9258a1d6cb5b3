// Perplexity of a model on a token sequence, and top-1 agreement between two runs: the
// quality figures of layer drop (docs/memory.md).
//
// The text is cut into windows of `window` tokens that overlap by one token; each window
// runs from position 0 and predicts its tokens 1 .. n-1, so every token after the first is
// predicted exactly once. Without skipped blocks the reference path runs (Session +
// Forward with all_logits); with skipped blocks (or use_block_loop) runtime/eval/block_loop.h.
// A pack runs through the packed forward pass instead (ComputePackedPerplexity).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"
#include "runtime/kernels/layout.h"

namespace ari::runtime {

class Model;
class PackedScorer;

struct PerplexityOptions {
  int32_t window = 256;              // capped by the model's context length; >= 2
  std::vector<int32_t> skip_layers;  // blocks to skip (layer drop), e.g. from DropOrder
  bool use_block_loop = false;       // force the block loop even with nothing skipped
};

struct PerplexityResult {
  double perplexity = 0;      // exp(mean_nll)
  double mean_nll = 0;        // mean negative log-likelihood, nats per token
  int64_t predictions = 0;    // tokens predicted
  std::vector<TokenId> top1;  // argmax at every predicted position (first max wins)
};

Result<PerplexityResult> ComputePerplexity(const Model& model, std::span<const TokenId> tokens,
                                           const PerplexityOptions& opts = {});

// Fraction of positions (over the shorter length) where a[i] == b[i]; 0 when empty.
// The same windows scored through the packed forward pass (PackedScorer: its window, its
// current drop level) at `precision`. kFormat for ComputePerplexity on a pack (it has no
// fp32 weights), so a pack is never scored as if it were a plain file.
Result<PerplexityResult> ComputePackedPerplexity(PackedScorer& scorer,
                                                 std::span<const TokenId> tokens,
                                                 kernels::PackedPrecision precision);

double Top1Agreement(std::span<const TokenId> a, std::span<const TokenId> b);

}  // namespace ari::runtime
