// The packed forward pass: the same diagram as runtime/model/forward.h (the fp32 reference, which
// stays the specification), on a dual-precision pack with the kernels of runtime/kernels:
//
//   tokens -> Embed (row read from the mapping) ->
//     [ RmsNorm fused with the activation format (fp16 for W8A16, Q8A for W4A8)
//       -> Q,K,V (one pool dispatch, GEMM for chunks / GEMV for one token) (+bias) -> RoPE
//       -> K,V stored in the KV cache (F16, F32 or INT8) -> causal GQA attention (heads x tokens
//       split over the pool) -> activation format -> O -> +residual
//       -> RmsNorm+format -> gate,up (one dispatch) -> SwiGLU fused with the format
//       -> down -> +residual ] x n_layers
//   -> RmsNorm+format (last token) -> classifier (packed, split over the pool) -> logits
//
// Matrices are split into pieces of whole 8-row blocks (4 per participant) that the pool
// hands out dynamically (ThreadPool::RunUnits): on a shared machine a preempted or sleeping
// worker does fewer pieces instead of stalling the token; results do not depend on who ran
// a piece. SwiGLU runs inside the gate/up dispatch on each piece's rows.
// Only the active precision's packed tensors are read. Layer drop: a dropped block leaves
// the residual stream unchanged, but its input's RmsNorm + K and V projections (+RoPE, KV
// store) still run, so the KV cache stays complete and the drop level can fall again at
// any chunk without recomputation. A dropped block therefore saves Q, attention, O and the
// feed-forward, not its whole time (measured per level: docs/memory.md, "Layer drop").
// INT8 KV: rows of int8 values + per-head, per-group float scales (runtime/kernels/
// kv_int8.h); attention reads them directly (scalar reference / AVX2). A live F16/F32
// cache converts to INT8 in place (ConvertKv): an INT8 row is never larger than an F16
// row, so the INT8 rows of K (and of V) stay inside the F16 K (V) half of the slot.
// Optional: MADV_WILLNEED on layer l + 1's packed weights (this precision's only) while
// layer l computes (SetPrefetch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/thread_pool.h"
#include "runtime/core/types.h"
#include "runtime/kernels/layout.h"
#include "runtime/model/pack_file.h"

namespace ari::runtime {

class Model;
struct LayerWeights;
class PagingAdvisor;

// One slot's KV cache: K and V each [n_layers, ctx] rows of RowBytes(type) bytes: kv_dim
// F16 (uint16) or F32 values, or an INT8 row (int8 values, then float group scales).
struct KvCacheView {
  KvType type = KvType::kF16;
  void* k = nullptr;
  void* v = nullptr;
  int32_t ctx = 0;
  static uint64_t Bytes(const ModelConfig& c, KvType type, int32_t ctx);  // K + V
  static uint64_t RowBytes(const ModelConfig& c, KvType type);            // one row
  // INT8 scale group of the model (0: INT8 KV unsupported for its head_dim).
  static int32_t Int8Group(const ModelConfig& c);
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
  // Run; the caller may modify them, e.g. the sampler). drop_mask: n_layers flags
  // (1 = block dropped) or null. No allocation.
  Result<float*> Run(std::span<const TokenId> tokens, int32_t pos0, const KvCacheView& kv,
                     kernels::PackedPrecision precision, const uint8_t* drop_mask, ThreadPool& pool,
                     int threads);

  // As Run, but the logits of every position into `logits` (row t, vocab floats, after
  // token t; at least tokens.size() x vocab floats, caller-owned): scoring a text
  // (perplexity, agreement) in chunks through the packed path. No allocation.
  Result<void> RunAllLogits(std::span<const TokenId> tokens, int32_t pos0, const KvCacheView& kv,
                            kernels::PackedPrecision precision, const uint8_t* drop_mask,
                            ThreadPool& pool, int threads, std::span<float> logits);

  // Converts the first `positions` positions of every layer of `kv` to `to` in place
  // (kv.k / kv.v keep their addresses; rows are re-strided from the start of each half,
  // so the target row size must not exceed the source's: F32/F16 -> INT8, F32 -> F16).
  // Uses the workspace as scratch; no allocation. On success kv.type == to.
  Result<void> ConvertKv(KvCacheView& kv, KvType to, int32_t positions) const;

  // Page-cache prefetch of the next layer's weights (null = off). `advisors[p]` covers the
  // packed matrices of precision p per layer (PagingAdvisor::PrefetchLayer). Not owned.
  void SetPrefetch(const PagingAdvisor* w8, const PagingAdvisor* w4) {
    prefetch_[0] = w8;
    prefetch_[1] = w4;
  }
  // Next-layer prefetches refused since Init (a refusal costs only speed).
  uint64_t prefetch_failures() const { return prefetch_failures_; }
  // Next-layer prefetches made since Init (what ran: ChunkResult::layer_prefetches).
  uint64_t prefetch_calls() const { return prefetch_calls_; }

  int32_t max_tokens() const { return max_tokens_; }

  // The matmul kernels this forward pass ran since the last Take, noted per participant
  // on its own thread around every matmul unit: per kind the tiers of the table entries
  // called (bit t = IsaTier t: the entry's own tier, below the table's where the tier
  // choice picked a lower one or the table shares a lower tier's kernel), and the GEMM
  // calls the AMX kernels counted on tiles (kernels::TileGemmsOnThisThread). Take between
  // dispatches (the pool's barrier orders the notes before it).
  struct MatmulsRan {
    uint32_t gemv_tiers = 0;
    uint32_t gemm_tiers = 0;
    uint64_t tile_gemms = 0;
  };
  MatmulsRan TakeMatmulsRan();
  void ResetMatmulsRan() {
    for (RanNotes& c : ran_) c.ran = MatmulsRan{};
  }
  struct alignas(64) RanNotes {  // one cache line per participant (written only by it)
    MatmulsRan ran;
  };

 private:
  struct Buffers {
    float* x;                 // [n, dim]
    float* y;                 // [n, dim]   o / down outputs
    float* q;                 // [n, q_dim]
    float* k;                 // [n, kv_dim]
    float* v;                 // [n, kv_dim]
    float* att_out;           // [n, q_dim]
    float* hg;                // [n, ffn]
    float* hu;                // [n, ffn]
    kernels::BlockQ16A* a16;  // [n, ActQ16ABlocks(max_k)]: Q16 rows
    kernels::BlockQ8A* aq;    // [n, Groups(max_k)]
    float* att;               // [participants, att_stride]
    float* logits;            // [vocab]
    float* rope_cos;          // [ctx, head_dim / 2]
    float* rope_sin;
  };
  void PrepareAct(const float* x, int64_t n, int64_t cols, const float* norm,
                  kernels::PackedPrecision p) const;
  // One pool dispatch over `count` matrices (rows split statically). swiglu: count == 2
  // (gate, up) and each participant applies SwiGLU to its rows in place into y[0].
  void MatMuls(const kernels::PackedMatrix* const* w, float* const* y, int count, int64_t n,
               ThreadPool& pool, int threads, bool swiglu = false) const;
  void StoreKv(int32_t layer, int64_t n, int32_t pos0, const KvCacheView& kv) const;
  void Attention(int32_t layer, int64_t n, int32_t pos0, const KvCacheView& kv, ThreadPool& pool,
                 int threads) const;
  // Embedding and every block of Run() (threads already clamped); leaves the residual
  // stream of the chunk in b_.x.
  Result<void> RunBlocks(std::span<const TokenId> tokens, int32_t pos0, const KvCacheView& kv,
                         kernels::PackedPrecision p, const uint8_t* drop_mask, ThreadPool& pool,
                         int threads);
  // The steps of Run(). A chunk's size, positions, KV type and token ids are usable.
  Result<void> CheckChunk(std::span<const TokenId> tokens, int32_t pos0,
                          const KvCacheView& kv) const;
  // Per block: Q (unless the block is dropped), K and V of the chunk, biased and rotated.
  void ProjectQkv(const LayerWeights& L, const PackedLayer& P, int64_t n, int32_t pos0,
                  kernels::PackedPrecision p, bool dropped, ThreadPool& pool, int threads) const;
  // Attention over the KV cache, the output projection and the residual.
  void AttendAndAdd(int32_t layer, const PackedLayer& P, int64_t n, int32_t pos0,
                    const KvCacheView& kv, kernels::PackedPrecision p, ThreadPool& pool,
                    int threads) const;
  // The SwiGLU feed-forward block and the residual.
  void FeedForwardAndAdd(const LayerWeights& L, const PackedLayer& P, int64_t n,
                         kernels::PackedPrecision p, ThreadPool& pool, int threads) const;

  const Model* model_ = nullptr;
  const PackedWeights* packed_ = nullptr;
  Buffers b_{};
  int32_t max_tokens_ = 0;
  int32_t ctx_ = 0;
  int participants_ = 1;
  int64_t att_stride_ = 0;
  int64_t max_k_ = 0;
  const PagingAdvisor* prefetch_[2] = {nullptr, nullptr};
  mutable uint64_t prefetch_failures_ = 0;  // RunBlocks runs on the calling thread only
  mutable uint64_t prefetch_calls_ = 0;
  mutable std::vector<RanNotes> ran_;  // per participant, sized by Init
};

}  // namespace ari::runtime
