// An own loop over forward.h's blocks:: functions that runs the reference fp32 transformer
// over one window of tokens (positions 0 .. n-1, one chunk), with two things Forward()
// does not offer: skipping whole blocks (layer drop) and observing each block's input and
// output hidden states (layer calibration). The arithmetic is the reference's (same
// blocks, same accumulation order); a test checks its logits against Forward().
//
// Tooling, not the hot path: buffers are allocated once at Create() for `max_tokens`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/types.h"

namespace ari::runtime {

class Model;

class BlockLoop {
 public:
  // Called after block `layer` ran: `in` and `out` are its input and output residual
  // streams, n rows of dim floats.
  using Observer = std::function<void(int32_t layer, const float* in, const float* out, int64_t n)>;

  // max_tokens: longest window (capped by the model's context length).
  static Result<std::unique_ptr<BlockLoop>> Create(const Model& model, int32_t max_tokens);

  int32_t max_tokens() const { return max_tokens_; }

  // Runs `tokens` (1 .. max_tokens) from position 0. Blocks listed in `skip` leave the
  // residual stream unchanged (their KV is never computed). With want_logits, returns
  // [n, vocab] logits (row t predicts token t + 1); otherwise an empty span.
  Result<std::span<const float>> Run(std::span<const TokenId> tokens, std::span<const int32_t> skip,
                                     bool want_logits, const Observer& observer = {});

 private:
  explicit BlockLoop(const Model& model) : model_(&model) {}
  void Attention(int32_t layer, int64_t n);
  void FeedForward(int32_t layer, int64_t n);

  const Model* model_;
  int32_t max_tokens_ = 0;
  std::vector<float> x_, in_, xb_, xb2_, q_, k_, v_, hb_, hb2_, att_, row_, vec_, logits_;
  std::vector<float> rope_cos_, rope_sin_;
};

}  // namespace ari::runtime
