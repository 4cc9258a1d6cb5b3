// Import of llama2.c checkpoints and tokenizers into GGUF ("llama" architecture, SPM vocab).
//
// Checkpoint formats (little-endian, as llama2.c's export.py writes them):
//  - legacy v0 fp32: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size
//    (negative: unshared classifier), seq_len), then fp32 tok_embeddings, attention norms,
//    wq, wk, wv, wo, ffn norms, w1, w2, w3, final norm, freq_cis_real/imag (skipped),
//    [classifier].
//  - v1 fp32 ("ak42", version 1, 256-byte header with a shared-classifier byte): norms
//    first, then tok_embeddings, wq..wo, w1, w2, w3, [classifier].
//  - v2 Q8_0 ("ak42", version 2, 256-byte header + group size): fp32 norms, then per tensor
//    and per layer int8 values followed by fp32 scales, one scale per group of `group size`
//    consecutive values of the FLATTENED tensor (groups cross rows when a row's length is
//    not a multiple of the group size).
// llama2.c's RoPE rotates adjacent pairs, which is GGUF llama's "normal" RoPE: Q/K are
// copied as they are (no permutation).
//
// Q8_0 storage choice: GGUF Q8_0 holds fp16 scales; llama2.c holds fp32 scales. A tensor is
// written as Q8_0 (byte-exact values) only when its rows are whole groups (row length a
// multiple of 32, group size 32) and every scale is exactly representable in fp16. Otherwise
// (the default, Q80Storage::kExact) it is written as F32 holding q * s exactly as runq.c
// dequantizes it: identical weights, 4x the bytes. Q80Storage::kQ8_0 forces Q8_0 for every
// row-aligned tensor with scales rounded to fp16 (relative weight change <= 2^-11).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include "runtime/core/error.h"

namespace ari::runtime {

class GgufWriter;

enum class Q80Storage : uint8_t { kExact, kQ8_0 };

struct Llama2cImportOptions {
  Q80Storage q80 = Q80Storage::kExact;
  std::string name = "llama2.c";  // general.name
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
};

struct Llama2cHeader {
  int32_t version = 0;  // 0 legacy, 1 fp32, 2 Q8_0
  int32_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0;
  int32_t vocab_size = 0, seq_len = 0;
  bool shared_classifier = true;
  int32_t group_size = 0;  // v2 only
  uint64_t header_bytes = 0;
};

struct Llama2cImportReport {
  Llama2cHeader header;
  int32_t tensors_q8_0 = 0;    // written as Q8_0
  int32_t tensors_f32 = 0;     // written as F32 (incl. norms)
  int32_t scales_rounded = 0;  // Q8_0 scales changed by fp16 rounding (kQ8_0 only)
};

Result<Llama2cHeader> ReadLlama2cHeader(std::span<const std::byte> checkpoint);

// Adds general.*, llama.* metadata and all tensors of `checkpoint` to `out`.
Result<Llama2cImportReport> ImportLlama2cCheckpoint(std::span<const std::byte> checkpoint,
                                                    const Llama2cImportOptions& opts,
                                                    GgufWriter& out);

// Adds tokenizer.ggml.* metadata (model "llama", tokens, scores, token_type, bos 1, eos 2,
// unk 0, add_bos, add_space_prefix) from a llama2.c tokenizer.bin holding vocab_size tokens.
Result<void> ImportLlama2cTokenizer(std::span<const std::byte> tokenizer_bin, int32_t vocab_size,
                                    GgufWriter& out);

// Files in, GGUF file out (what ari-convert does).
Result<Llama2cImportReport> ConvertLlama2c(const std::filesystem::path& checkpoint,
                                           const std::filesystem::path& tokenizer,
                                           const std::filesystem::path& out,
                                           const Llama2cImportOptions& opts = {});

}  // namespace ari::runtime
