// llama.cpp's quantizer as an oracle for ARI's GGUF block decoding: an F32 llama model of
// random weights whose rows are multiples of 256 (K-quant super-blocks), quantized by
// llama-quantize (found under ARI_PEERS_DIR: environment, else the CMake cache, else
// ../shared/peers) into Q4_1, Q5_0, Q5_1, Q4_K_M, Q5_K_M and Q6_K files, once per process.
//
// The weights are not i.i.d.: each 32-element sub-block of a row has its own magnitude and
// its own offset, so a decoder that applies the wrong sub-block's scale or min, or puts a
// nibble in the wrong element, is off by much more than one quantization step.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/tensor_types.h"
#include "runtime/gguf/gguf.h"
#include "tests/common/test_util.h"

namespace ari::testing {

// ARI_PEERS_DIR (environment) wins; then the CMake cache; then ../shared/peers.
inline std::filesystem::path PeersDir() {
  if (const char* env = std::getenv("ARI_PEERS_DIR"); env && *env) return env;
  if (auto v = CMakeCacheValue("ARI_PEERS_DIR:PATH="); !v.empty()) return v;
  return SourceDir() / "../shared/peers";
}

inline std::filesystem::path LlamaQuantizeBin() {
  return PeersDir() / "llama.cpp/bin/llama-quantize";
}

// The model: llama, dim 256, ffn 768, 2 blocks, 4 heads (2 KV heads), vocab 512, untied
// classifier. All matrices F32, rows of 256 or 768 elements.
struct QuantModelSpec {
  int dim = 256, ffn = 768, n_layers = 2, n_heads = 4, n_kv_heads = 2, vocab = 512, ctx = 256;
};

using F32Weights = std::map<std::string, std::vector<float>>;  // by tensor name, row-major

// Sub-block magnitudes (mean square ~1) and offsets (in units of the row's std).
inline float SubBlockMagnitude(int64_t row, int64_t sub) {
  static constexpr float kMag[8] = {0.35f, 1.6f, 0.7f, 1.0f, 2.2f, 0.5f, 1.3f, 0.9f};
  return kMag[(sub + row) % 8];
}
inline float SubBlockOffset(int64_t row, int64_t sub) {
  static constexpr float kOff[5] = {-1.0f, 0.0f, 1.0f, 0.5f, -0.5f};
  return 0.4f * kOff[(3 * sub + row) % 5];
}

// Writes the F32 GGUF to `path`; `truth` receives every tensor's values.
inline bool WriteQuantTestModel(const QuantModelSpec& s, const std::filesystem::path& path,
                                F32Weights* truth) {
  namespace rt = runtime;
  rt::GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "ari quant golden (random weights)");
  w.SetUint32("general.file_type", 0);
  w.SetUint32("llama.vocab_size", static_cast<uint32_t>(s.vocab));
  w.SetUint32("llama.context_length", static_cast<uint32_t>(s.ctx));
  w.SetUint32("llama.embedding_length", static_cast<uint32_t>(s.dim));
  w.SetUint32("llama.block_count", static_cast<uint32_t>(s.n_layers));
  w.SetUint32("llama.feed_forward_length", static_cast<uint32_t>(s.ffn));
  w.SetUint32("llama.attention.head_count", static_cast<uint32_t>(s.n_heads));
  w.SetUint32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads));
  w.SetUint32("llama.rope.dimension_count", static_cast<uint32_t>(s.dim / s.n_heads));
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  uint32_t seed = 7;
  bool ok = true;
  auto add = [&](const std::string& name, int rows, int cols, bool matrix) {
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(rows) * static_cast<size_t>(cols));
    const float std_dev = 1.0f / std::sqrt(static_cast<float>(cols));
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) {
        float& x = v[static_cast<size_t>(r) * static_cast<size_t>(cols) + static_cast<size_t>(c)];
        if (!matrix) {
          x = 1.0f + 0.05f * u(rng);
          continue;
        }
        const int sub = c / 32;
        x = std_dev * (SubBlockOffset(r, sub) + SubBlockMagnitude(r, sub) * 1.732f * u(rng));
      }
    }
    std::vector<int64_t> ne = {cols};
    if (matrix) ne.push_back(rows);
    ok = ok && w.AddTensor(name, rt::TensorType::kF32, ne, std::as_bytes(std::span(v))).has_value();
    (*truth)[name] = std::move(v);
  };
  const int kv = s.dim / s.n_heads * s.n_kv_heads;
  add("token_embd.weight", s.vocab, s.dim, true);
  add("output_norm.weight", 1, s.dim, false);
  add("output.weight", s.vocab, s.dim, true);
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", 1, s.dim, false);
    add(p + "attn_q.weight", s.dim, s.dim, true);
    add(p + "attn_k.weight", kv, s.dim, true);
    add(p + "attn_v.weight", kv, s.dim, true);
    add(p + "attn_output.weight", s.dim, s.dim, true);
    add(p + "ffn_norm.weight", 1, s.dim, false);
    add(p + "ffn_gate.weight", s.ffn, s.dim, true);
    add(p + "ffn_up.weight", s.ffn, s.dim, true);
    add(p + "ffn_down.weight", s.dim, s.ffn, true);
  }
  return ok && w.WriteFile(path).has_value();
}

// One llama-quantize run: its type argument, whether --pure was passed, and the GGUF
// tensor types the file must contain (others may appear too; all are reported).
struct QuantVariant {
  const char* ftype;
  bool pure;
  std::vector<runtime::TensorType> expect;
};

inline const std::vector<QuantVariant>& QuantVariants() {
  using runtime::TensorType;
  static const std::vector<QuantVariant> v = {
      {"Q4_1", true, {TensorType::kQ4_1}},
      {"Q5_0", true, {TensorType::kQ5_0}},
      {"Q5_1", true, {TensorType::kQ5_1}},
      {"Q4_K_M", false, {TensorType::kQ4_K, TensorType::kQ6_K}},
      {"Q5_K_M", false, {TensorType::kQ5_K, TensorType::kQ6_K}},
      {"Q6_K", true, {TensorType::kQ6_K}},
  };
  return v;
}

struct QuantFiles {
  bool ok = false;
  std::string skip;  // why the quantizer could not run (test skips), empty when ok
  std::filesystem::path dir, f32;
  std::map<std::string, std::filesystem::path> by_ftype;
  F32Weights truth;
};

// Removes the scratch directory when the test process exits.
struct ScratchRemover {
  std::filesystem::path dir;
  ~ScratchRemover() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

// Builds the F32 model and every variant once per process (in a scratch directory removed at
// exit; set ARI_KEEP_QUANT_FILES=1 to keep it).
inline const QuantFiles& LlamaQuantFiles() {
  static ScratchRemover remover;
  static QuantFiles q = [] {
    QuantFiles r;
    const auto bin = LlamaQuantizeBin();
    std::error_code ec;
    if (!std::filesystem::exists(bin, ec)) {
      r.skip = "llama-quantize not found at " + bin.string() +
               " (set ARI_PEERS_DIR or -DARI_PEERS_DIR=<dir holding llama.cpp/bin>)";
      return r;
    }
    r.dir = TempDir("llama_quant");
    if (std::getenv("ARI_KEEP_QUANT_FILES") == nullptr) remover.dir = r.dir;
    r.f32 = r.dir / "model-f32.gguf";
    if (!WriteQuantTestModel(QuantModelSpec{}, r.f32, &r.truth)) {
      r.skip = "could not write " + r.f32.string();
      return r;
    }
    const std::string lib = bin.parent_path().string();
    for (const QuantVariant& v : QuantVariants()) {
      const auto out = r.dir / (std::string("model-") + v.ftype + ".gguf");
      const auto log = r.dir / (std::string("quantize-") + v.ftype + ".log");
      const std::string cmd = "LD_LIBRARY_PATH='" + lib + "' '" + bin.string() + "' " +
                              (v.pure ? "--pure " : "") + "'" + r.f32.string() + "' '" +
                              out.string() + "' " + v.ftype + " 1 >'" + log.string() + "' 2>&1";
      if (std::system(cmd.c_str()) != 0) {
        r.skip = std::string("llama-quantize ") + v.ftype + " failed, see " + log.string();
        return r;
      }
      r.by_ftype[v.ftype] = out;
    }
    r.ok = true;
    return r;
  }();
  return q;
}

// NOLINTBEGIN(bugprone-macro-parentheses): `var` names the variable it declares
#define ARI_REQUIRE_LLAMA_QUANT(var)                                               \
  const auto& var = ::ari::testing::LlamaQuantFiles();                             \
  if (!var.ok) {                                                                   \
    if (var.skip.find("not found") != std::string::npos) GTEST_SKIP() << var.skip; \
    FAIL() << var.skip;                                                            \
  }
// NOLINTEND(bugprone-macro-parentheses)

}  // namespace ari::testing
