// The packed forward pass: the same diagram as runtime/forward.h (the fp32 reference, which
// stays the specification), on a dual-precision pack with the kernels of runtime/kernels:
//
//   tokens -> Embed (row read from the mapping) ->
//     [ RmsNorm fused with the activation format (fp16 for W8A16, Q8A for W4A8)
//       -> Q,K,V (one pool dispatch, GEMM for chunks / GEMV for one token) (+bias) -> RoPE
//       -> K,V stored in the KV cache (F16 or F32) -> causal GQA attention (heads x tokens
//       split over the pool) -> activation format -> O -> +residual
//       -> RmsNorm+format -> gate,up (one dispatch) -> SwiGLU fused with the format
//       -> down -> +residual ] x n_layers
//   -> RmsNorm+format (last token) -> classifier (packed, split over the pool) -> logits
//
// Matrices are split statically over the pool's participants in whole 8-row blocks.
// Only the active precision's packed tensors are read. Layer drop: a dropped block leaves
// the residual stream unchanged, but its K and V projections still run (cheap with GQA) so
// the KV cache stays complete if the drop level later falls.
// INT8 KV is not implemented (KvType::kInt8 -> kUnsupported at Init).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "runtime/engine.h"
#include "runtime/error.h"
#include "runtime/kernels/layout.h"
#include "runtime/pack_file.h"
#include "runtime/thread_pool.h"
#include "runtime/tokenizer.h"

namespace ari::runtime {

class Model;

// One slot's KV cache: K and V each [n_layers, ctx, kv_dim] of F16 (uint16) or F32.
struct KvCacheView {
  KvType type = KvType::kF16;
  void* k = nullptr;
  void* v = nullptr;
  int32_t ctx = 0;
  static uint64_t Bytes(const ModelConfig& c, KvType type, int32_t ctx);  // K + V
};

class FastForward {
 public:
  // Workspace bytes for chunks of up to max_tokens, a context of ctx and `participants`
  // pool participants, with every buffer aligned to `align`.
  static uint64_t WorkspaceBytes(const ModelConfig& c, int32_t max_tokens, int32_t ctx,
                                 int participants, size_t align);

  // `workspace` must hold WorkspaceBytes(...) bytes aligned to `align` and outlive this.
  Result<void> Init(const Model& model, const PackedWeights& packed, std::byte* workspace,
                    uint64_t bytes, int32_t max_tokens, int32_t ctx, int participants,
                    size_t align);

  // Runs tokens at positions pos0 .. pos0+n-1 (n <= max_tokens, pos0+n <= kv.ctx), stores
  // their K/V in `kv`, and returns the last token's logits [vocab] (valid until the next
  // Run). drop_mask: n_layers flags (1 = block dropped) or null. No allocation.
  Result<const float*> Run(std::span<const TokenId> tokens, int32_t pos0,
                           const KvCacheView& kv, kernels::PackedPrecision precision,
                           const uint8_t* drop_mask, ThreadPool& pool, int threads);

  int32_t max_tokens() const { return max_tokens_; }

 private:
  struct Buffers {
    float* x;          // [n, dim]
    float* y;          // [n, dim]   o / down outputs
    float* q;          // [n, q_dim]
    float* k;          // [n, kv_dim]
    float* v;          // [n, kv_dim]
    float* att_out;    // [n, q_dim]
    float* hg;         // [n, ffn]
    float* hu;         // [n, ffn]
    uint16_t* a16;     // [n, PaddedCols(max_k)]
    kernels::BlockQ8A* aq;  // [n, Groups(max_k)]
    float* att;        // [participants, att_stride]
    float* logits;     // [vocab]
    float* rope_cos;   // [ctx, head_dim / 2]
    float* rope_sin;
  };
  void PrepareAct(const float* x, int64_t n, int64_t cols, const float* norm,
                  kernels::PackedPrecision p) const;
  void MatMuls(const kernels::PackedMatrix* const* w, float* const* y, int count, int64_t n,
               ThreadPool& pool, int threads) const;
  void StoreKv(int32_t layer, int64_t n, int32_t pos0, const KvCacheView& kv) const;
  void Attention(int32_t layer, int64_t n, int32_t pos0, const KvCacheView& kv,
                 ThreadPool& pool, int threads) const;

  const Model* model_ = nullptr;
  const PackedWeights* packed_ = nullptr;
  Buffers b_{};
  int32_t max_tokens_ = 0;
  int32_t ctx_ = 0;
  int participants_ = 1;
  int64_t att_stride_ = 0;
  int64_t max_k_ = 0;
};

}  // namespace ari::runtime
