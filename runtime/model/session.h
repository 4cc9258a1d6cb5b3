// The state of one conversation with a model: KV cache [layers, ctx, kv_dim] in fp32, the
// current position, and every activation buffer the forward pass needs, all allocated
// once at Create() from one 128-byte aligned arena. Nothing is allocated per token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "runtime/core/error.h"

namespace ari::runtime {

class Model;

struct SessionOptions {
  int32_t context_length = 0;  // KV capacity in tokens; 0 = the model's context length
  int32_t max_batch = 32;      // most tokens one forward chunk holds (longer prompts loop)
  bool all_logits = false;     // keep logits of every chunk position (perplexity), not only last
};

inline constexpr size_t kBufferAlignment = 128;

class Session {
 public:
  // Activation buffers, each 128-byte aligned; n = max_batch rows.
  struct Buffers {
    float* x;         // [n, dim]     residual stream
    float* xb;        // [n, dim]     normed input of a block / block output
    float* xb2;       // [n, q_dim]   attention output before attn_output
    float* q;         // [n, q_dim]   queries
    float* k;         // [n, kv_dim]  keys of the chunk (copied into the cache)
    float* v;         // [n, kv_dim]  values of the chunk
    float* hb;        // [n, ffn_dim] gate / SwiGLU output
    float* hb2;       // [n, ffn_dim] up
    float* att;       // [ctx]        attention scores of one head
    float* row;       // [max_cols]   one dequantized weight row
    float* vec;       // [max(dim, q_dim, ffn_dim)] one dequantized 1-D weight (norm, bias)
    float* logits;    // [n or 1, vocab]
    float* rope_cos;  // [ctx, head_dim / 2]
    float* rope_sin;  // [ctx, head_dim / 2]
  };

  static Result<std::unique_ptr<Session>> Create(const Model& model,
                                                 const SessionOptions& opts = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const { return *model_; }
  int32_t position() const { return position_; }
  int32_t context_length() const { return ctx_; }
  int32_t max_batch() const { return max_batch_; }
  bool all_logits() const { return all_logits_; }
  uint64_t arena_bytes() const { return arena_bytes_; }

  // Forget the conversation (KV contents are simply overwritten later).
  void Reset() {
    position_ = 0;
    n_logits_ = 0;
  }
  // Keep the first n positions only (rewind after a rejected continuation).
  Result<void> Truncate(int32_t n);

  // Logits of the last forward chunk: n_logits() rows of vocab floats (one row unless
  // all_logits). The last row is the last token's.
  std::span<const float> logits() const;
  std::span<float> mutable_last_logits();
  int32_t n_logits() const { return n_logits_; }

  // For the forward pass.
  const Buffers& buffers() const { return buf_; }
  float* KeyRow(int32_t layer, int32_t pos) { return key_cache_ + Offset(layer, pos); }
  float* ValueRow(int32_t layer, int32_t pos) { return value_cache_ + Offset(layer, pos); }
  const float* KeyRow(int32_t layer, int32_t pos) const { return key_cache_ + Offset(layer, pos); }
  const float* ValueRow(int32_t layer, int32_t pos) const {
    return value_cache_ + Offset(layer, pos);
  }
  void Advance(int32_t n_tokens, int32_t n_logits) {
    position_ += n_tokens;
    n_logits_ = n_logits;
  }

 private:
  explicit Session(const Model& model) : model_(&model) {}
  size_t Offset(int32_t layer, int32_t pos) const {
    return (static_cast<size_t>(layer) * static_cast<size_t>(ctx_) + static_cast<size_t>(pos)) *
           static_cast<size_t>(kv_dim_);
  }

  const Model* model_;
  int32_t ctx_ = 0;
  int32_t max_batch_ = 0;
  int32_t kv_dim_ = 0;
  int32_t vocab_ = 0;
  bool all_logits_ = false;
  int32_t position_ = 0;
  int32_t n_logits_ = 0;
  std::byte* arena_ = nullptr;
  uint64_t arena_bytes_ = 0;
  float* key_cache_ = nullptr;    // [layers, ctx, kv_dim]
  float* value_cache_ = nullptr;  // [layers, ctx, kv_dim]
  Buffers buf_{};
};

}  // namespace ari::runtime
