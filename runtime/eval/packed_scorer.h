// Scoring a text through the engine's packed forward pass (runtime/engine/fast_forward.h):
// the logits of every position of a window, at a packed precision (W8A16 / W4A8), a layer
// drop level (the pack's calibrated drop order) and a KV type. What ari-ppl and
// ari-quality measure on a pack; the fp32 reference path (runtime/eval/perplexity.h on a
// plain GGUF) stays the specification they are compared with.
//
// Memory: the workspace, one KV cache, the drop mask and the [window, vocab] logits are
// allocated once at Create(); Score() performs no heap allocation.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"
#include "runtime/kernels/layout.h"

namespace ari::runtime {

class Model;
struct PackedWeights;

struct ScorerOptions {
  int32_t window = 256;  // longest window scored at once (capped by the context length)
  int threads = 1;       // pool participants
  KvType kv_type = KvType::kF16;
};

class PackedScorer {
 public:
  // `model` must be a pack (ari-pack) and outlive the scorer; a plain GGUF is kFormat.
  static Result<std::unique_ptr<PackedScorer>> Create(const Model& model,
                                                      const ScorerOptions& opts = {});
  ~PackedScorer();
  PackedScorer(const PackedScorer&) = delete;
  PackedScorer& operator=(const PackedScorer&) = delete;

  // Sets the blocks skipped by the next Score() calls: layer drop level `level` of the
  // pack's importance (DropOrder). kUnsupported when level > 0 and the pack has no
  // importance (made without --calibrate). Returns the blocks skipped.
  Result<std::span<const int32_t>> SetDropLevel(int32_t level);

  // Runs `tokens` (1 .. window) from position 0 at `precision` and returns their logits,
  // [n, vocab] (row t after token t), valid until the next call. No allocation.
  Result<std::span<const float>> Score(std::span<const TokenId> tokens,
                                       kernels::PackedPrecision precision);

  int32_t window() const { return window_; }
  int32_t max_drop_level() const;  // n_layers - 2 with importance, else 0
  int64_t vocab_size() const;

 private:
  PackedScorer() = default;
  struct State;
  std::unique_ptr<State> s_;
  int32_t window_ = 0;
};

}  // namespace ari::runtime
