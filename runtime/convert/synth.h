// Random-weight GGUF models of realistic shapes ("ari-synth"): benchmarks and tests get
// real sizes without downloads. Tensor names and metadata follow llama.cpp (llama/qwen2
// architectures); the vocabulary (every tokenizer.* key) is copied from a vocab GGUF.
//
// Weights: each matrix uniform with std 1/sqrt(fan_in) (fan_in = ne[0], the row length),
// so activations stay O(1) through the layers and logits have std ~1; norm weights
// 1 + U(-0.05, 0.05); biases std 0.02. Every tensor has its own PRNG stream derived from
// (seed, tensor name): same seed -> same bytes. Tensors are produced while the file is
// written (streaming), so a 2.2 GB model never sits in memory twice.
//
// Quantized types need rows that are a multiple of 32; a matrix whose row length is not
// (e.g. ffn_down of "tiny", ffn 172) is stored as F16 instead, like llama.cpp's fallback.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "runtime/core/error.h"
#include "runtime/core/tensor_types.h"
#include "runtime/gguf/gguf.h"

namespace ari::runtime {

struct SynthPreset {
  std::string_view name;
  std::string_view arch;  // "llama" or "qwen2"
  int64_t dim = 0;        // embedding_length
  int64_t ffn = 0;        // feed_forward_length
  int64_t layers = 0;     // block_count
  int64_t heads = 0;      // attention.head_count
  int64_t kv_heads = 0;   // attention.head_count_kv
  int64_t context = 0;    // context_length
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool qkv_bias = false;         // blk.N.attn_{q,k,v}.bias
  bool tied_embeddings = false;  // no output.weight; the head reuses token_embd
};

// tinyllama-1.1b, llama-0.3b, qwen2.5-0.5b, tiny, tiny-qwen2.
std::span<const SynthPreset> SynthPresets();
Result<SynthPreset> FindSynthPreset(std::string_view name);  // kNotFound lists the names

// "f32", "f16", "bf16", "q8_0", "q4_0" (case-insensitive).
Result<TensorType> ParseTensorTypeName(std::string_view name);

struct SynthOptions {
  SynthPreset preset;
  TensorType type = TensorType::kF16;  // type of the matrices (norms and biases stay F32)
  uint64_t seed = 1;
};

struct SynthSummary {
  int64_t vocab_size = 0;
  int64_t n_params = 0;
  int n_tensors = 0;
  int n_fallback_f16 = 0;  // matrices stored as F16 because their rows are not 32-multiples
  uint64_t file_bytes = 0;
};

// Builds a writer holding the metadata and streaming tensor fillers. The vocabulary is
// copied from `vocab` (its tokenizer.* keys; vocab size = tokenizer.ggml.tokens length),
// so `vocab` need not outlive the writer.
Result<GgufWriter> BuildSynthModel(const SynthOptions& opts, const GgufFile& vocab,
                                   SynthSummary* summary = nullptr);

// Opens the vocab GGUF, builds and writes `out`.
Result<SynthSummary> WriteSynthModel(const SynthOptions& opts,
                                     const std::filesystem::path& vocab_path,
                                     const std::filesystem::path& out);

}  // namespace ari::runtime
