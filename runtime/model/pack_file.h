// Dual-precision packs: a GGUF that holds every linear weight twice, in the kernels' own
// interleaved layouts (runtime/kernels/layout.h): W8 (8-bit, 272-byte tiles) and W4
// (4-bit, 144-byte tiles). Loading a pack is the usual mmap + metadata walk; the packed
// tensors are used in place (no repacking, no anonymous copy).
//
// File format (ari.pack.version 1):
//  - every metadata key of the source (tokenizer.*, <arch>.*, general.*), plus
//      ari.pack.version (u32 = 1), ari.pack.source (string: source general.name or file),
//      ari.pack.group_size (u32 = 32), ari.pack.row_interleave (u32 = 8),
//      ari.pack.encoding (string, the carrier rule below),
//      ari.pack.layer_importance (f32 array [n_layers], only when known: see PackOptions),
//      ari.pack.source_key / ari.pack.source_path (strings, automatic packs: pack_cache.h)
//  - `<name>.w8` and `<name>.w4` for each linear weight `<name>` (blk.N.attn_q/k/v/output,
//    blk.N.ffn_gate/up/down .weight and output.weight; for tied embeddings the classifier
//    is packed as token_embd.weight.w8/.w4). GGUF has no raw-bytes tensor type that every
//    reader accepts, so the packed bytes are carried by an F32 tensor of shape
//    ne = [RowBlockBytes / 4, RowBlocks] (tiles are multiples of 16 bytes); the logical
//    rows x cols come from the model config. Any GGUF reader (ari-gguf) can list them.
//  - norms and biases as F32 (F16/BF16 sources converted), token_embd.weight unchanged
//    (any supported type, K-quants included; rows are read on demand with DequantizeRow).
//  - source types (docs/runtime.md, "Supported tensor types"): Q8_0 -> W8 and Q4_0 -> W4
//    keep their blocks; every other pair (F32/F16/BF16, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K
//    sources) is dequantized to fp32 and re-quantized to Q8_0 / Q4_0 groups of 32.
//  - the original linear weights are NOT kept: Precision::kReference needs a plain GGUF.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/kernels/layout.h"
#include "runtime/model/model_config.h"

namespace ari::runtime {

class GgufFile;

// Version 1 interleaved each matrix's .w8 and .w4 tensors; version 2 groups them by
// precision (WritePack). Both bind the same way; only the resident set of a run differs.
inline constexpr uint32_t kPackVersion = 2;
inline constexpr uint32_t kOldestPackVersion = 1;

struct PackOptions {
  // Per-block influence (1 - mean cosine(input, output) of each block over a calibration
  // text), filled by runtime/layer_calibration (ari-pack --calibrate). Empty: not stored,
  // and layer drop is then unavailable for this pack. Size must be n_layers when set.
  std::vector<float> layer_importance;
  bool verbose = false;  // one line per tensor on stderr
  // Automatic packs (pack_cache.h): the source's identity, stored as ari.pack.source_key and
  // ari.pack.source_path so a cached pack can be matched to (and checked against) its source.
  std::string source_key;
  std::string source_path;
  // Called after each packed matrix is written (done of total, both precisions counted).
  std::function<void(int done, int total)> progress;
};

struct PackSummary {
  uint64_t bytes_written = 0;
  int32_t matrices = 0;  // linear weights packed (each in both precisions)
  double seconds = 0;
};

// Reads a plain GGUF (weights of any supported type: F32/F16/BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K) and writes the pack. Errors name the tensor and its type.
Result<PackSummary> WritePack(const std::filesystem::path& in, const std::filesystem::path& out,
                              const PackOptions& opts = {});

// True if the file carries ari.pack.version.
bool IsPack(const GgufFile& f);

// Index of a precision in the per-precision arrays below.
constexpr int PrecisionIndex(kernels::PackedPrecision p) { return static_cast<int>(p); }

struct PackedLayer {
  kernels::PackedMatrix q, k, v, o, gate, up, down;
};

// Views of a pack's packed matrices (into the mapping).
struct PackedWeights {
  std::array<std::vector<PackedLayer>, 2> layers;   // [precision][layer]
  std::array<kernels::PackedMatrix, 2> classifier;  // [precision]
  std::vector<float> layer_importance;              // empty when not calibrated
  uint32_t version = 0;
  std::string source;

  // Bytes of packed weights one token touches in precision p (all layers + classifier).
  uint64_t BytesPerToken(kernels::PackedPrecision p) const;
};

// Binds every packed tensor of `f` for `config`, checking sizes. kFormat on mismatch.
Result<PackedWeights> BindPack(const GgufFile& f, const ModelConfig& config);

}  // namespace ari::runtime
