// The blueprint of a transformer: every hyperparameter the forward pass needs, read
// from GGUF metadata (`<arch>.*` keys, llama.cpp names). No weights, no state.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/core/error.h"

namespace ari::runtime {

class GgufFile;

enum class Architecture : uint8_t { kLlama, kQwen2 };

// How RoPE pairs the dimensions of one head.
enum class RopeType : uint8_t {
  kNormal,  // adjacent pairs (2i, 2i+1): GGUF "llama" (also llama2.c)
  kNeox,    // halves (i, i + head_dim/2): GGUF "qwen2"
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  std::string arch_name;        // "llama" / "qwen2" (general.architecture)
  std::string name;             // general.name, may be empty
  int32_t dim = 0;              // <arch>.embedding_length
  int32_t n_layers = 0;         // <arch>.block_count
  int32_t n_heads = 0;          // <arch>.attention.head_count
  int32_t n_kv_heads = 0;       // <arch>.attention.head_count_kv (default n_heads)
  int32_t head_dim = 0;         // <arch>.attention.key_length (default dim / n_heads)
  int32_t ffn_dim = 0;          // <arch>.feed_forward_length
  int32_t vocab_size = 0;       // token_embd.weight ne[1]
  int32_t context_length = 0;   // <arch>.context_length
  float rope_theta = 10000.0f;  // <arch>.rope.freq_base
  float rms_eps = 1e-5f;        // <arch>.attention.layer_norm_rms_epsilon
  RopeType rope_type = RopeType::kNormal;
  bool qkv_bias = false;         // qwen2: attn_q/k/v.bias
  bool tied_embeddings = false;  // no output.weight: the classifier is token_embd

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  int32_t gqa_group() const { return n_heads / n_kv_heads; }  // query heads per KV head

  // Reads and validates the config of `file`. Unknown architecture -> kUnsupported.
  static Result<ModelConfig> FromGguf(const GgufFile& file);
  // Consistency checks (positive sizes, heads divide, even head_dim...). kFormat on error.
  Result<void> Validate() const;
  std::string ToString() const;  // one line, for logs and ari-run
};

std::string_view ArchitectureName(Architecture a);

}  // namespace ari::runtime
