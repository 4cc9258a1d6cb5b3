// The weights of a transformer as const views into the mapped GGUF file (llama.cpp tensor
// names). Nothing is copied: the reference forward pass dequantizes row by row.
// Shapes are written [rows, cols] = [ne1, ne0]: a matrix maps cols inputs to rows outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/tensor_types.h"
#include "runtime/model/model_config.h"

namespace ari::runtime {

class GgufFile;

// A 2-D tensor viewed in place: `rows` rows of `cols` elements of `type`, row-major.
// 1-D tensors (norms, biases) are a single row.
struct WeightMatrix {
  TensorType type = TensorType::kF32;
  const std::byte* data = nullptr;  // into the mapping; null when absent
  int64_t rows = 0;
  int64_t cols = 0;
  uint64_t row_bytes = 0;

  bool present() const { return data != nullptr; }
  const std::byte* RowData(int64_t r) const { return data + static_cast<uint64_t>(r) * row_bytes; }
  // The row as fp32 in place when the type is F32 (and aligned), else nullptr.
  const float* F32Row(int64_t r) const;
  // Dequantizes row r into dst[cols].
  void ReadRow(int64_t r, float* dst) const;
};

struct LayerWeights {
  WeightMatrix attn_norm;    // [1, dim]          blk.N.attn_norm.weight
  WeightMatrix attn_q;       // [q_dim, dim]      blk.N.attn_q.weight
  WeightMatrix attn_k;       // [kv_dim, dim]     blk.N.attn_k.weight
  WeightMatrix attn_v;       // [kv_dim, dim]     blk.N.attn_v.weight
  WeightMatrix attn_q_bias;  // [1, q_dim]        blk.N.attn_q.bias (qwen2 only)
  WeightMatrix attn_k_bias;  // [1, kv_dim]       blk.N.attn_k.bias (qwen2 only)
  WeightMatrix attn_v_bias;  // [1, kv_dim]       blk.N.attn_v.bias (qwen2 only)
  WeightMatrix attn_output;  // [dim, q_dim]      blk.N.attn_output.weight
  WeightMatrix ffn_norm;     // [1, dim]          blk.N.ffn_norm.weight
  WeightMatrix ffn_gate;     // [ffn_dim, dim]    blk.N.ffn_gate.weight (w1)
  WeightMatrix ffn_up;       // [ffn_dim, dim]    blk.N.ffn_up.weight   (w3)
  WeightMatrix ffn_down;     // [dim, ffn_dim]    blk.N.ffn_down.weight (w2)
};

struct ModelWeights {
  WeightMatrix token_embd;           // [vocab, dim]  token_embd.weight
  WeightMatrix output_norm;          // [1, dim]      output_norm.weight
  WeightMatrix output;               // [vocab, dim]  output.weight (== token_embd when tied)
  std::vector<LayerWeights> layers;  // [n_layers]

  // Finds every tensor the config needs and checks its shape and type.
  static Result<ModelWeights> FromGguf(const GgufFile& file, const ModelConfig& config);
  // Bytes of all weight data referenced (the tied classifier counted once).
  uint64_t TotalBytes() const;
  // Widest row of any matrix (scratch size for one dequantized row).
  int64_t MaxCols() const;
};

}  // namespace ari::runtime
