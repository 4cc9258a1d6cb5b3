// Reference fp32 forward pass of a llama/qwen2 decoder, one function per block of the model
// diagram:
//
//   tokens -> Embed -> [ RmsNorm -> Attention(QKV (+bias), RoPE, GQA, KV cache) -> +residual
//                        RmsNorm -> FeedForward(SwiGLU)                         -> +residual
//                      ] x n_layers -> RmsNorm -> Classifier -> logits
//
// Weights of any supported type are dequantized row by row; every dot product accumulates
// in fp32 in index order (the same arithmetic as llama2.c's run.c, so its greedy outputs
// are reproduced exactly). Speed is the kernels' business, not this file's.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/core/error.h"
#include "runtime/core/types.h"
#include "runtime/model/model_weights.h"

namespace ari::runtime {

class Session;

// Runs `tokens` at positions session.position() .. position()+n-1 (a prefill chunk or one
// decode token), appends their keys/values to the KV cache, advances the position and
// returns the logits: the last token's [vocab], or with SessionOptions::all_logits one row
// per token [n, vocab] (then n must be <= max_batch). Chunks longer than max_batch run as
// several internal chunks. Errors: empty input, token id out of range, context full.
Result<std::span<const float>> Forward(Session& session, std::span<const TokenId> tokens);

// The blocks, exposed for tests and for the optimized paths to compare against.
namespace blocks {

// out[r] = x[r] * w * 1/sqrt(mean(x^2) + eps), for n_rows rows of n.
void RmsNorm(float* out, const float* x, const float* weight, int64_t n, int64_t n_rows, float eps);
// out[t, r] = sum_c W[r, c] * x[t, c] for t < n_tokens; `row` is scratch of W.cols floats.
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* out, float* row);
// Rotates n_heads heads of head_dim in `vec` (one token) by the angles of one position.
void Rope(float* vec, int32_t n_heads, int32_t head_dim, const float* cos, const float* sin,
          bool neox);
// In-place softmax over n values.
void Softmax(float* x, int64_t n);
// out = silu(gate) * up, elementwise over n.
void SwiGlu(float* gate_inout, const float* up, int64_t n);

}  // namespace blocks
}  // namespace ari::runtime
