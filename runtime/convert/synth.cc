#include "runtime/convert/synth.h"

#include <array>
#include <cmath>
#include <cstring>
#include <vector>

namespace ari::runtime {

namespace {

constexpr std::array<SynthPreset, 5> kPresets = {{
    // name, arch, dim, ffn, layers, heads, kv_heads, ctx, theta, eps, qkv_bias, tied
    {"tinyllama-1.1b", "llama", 2048, 5632, 22, 32, 4, 2048, 10000.0f, 1e-5f, false, false},
    {"llama-0.3b", "llama", 1024, 2816, 24, 16, 4, 2048, 10000.0f, 1e-5f, false, false},
    {"qwen2.5-0.5b", "qwen2", 896, 4864, 24, 14, 2, 32768, 1000000.0f, 1e-6f, true, true},
    {"tiny", "llama", 64, 172, 2, 4, 2, 512, 10000.0f, 1e-5f, false, false},
    {"tiny-qwen2", "qwen2", 64, 172, 2, 4, 2, 512, 1000000.0f, 1e-6f, true, true},
}};

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ULL;
  }
  return h;
}

// Fills n floats uniform in [center - half, center + half).
void FillUniform(uint64_t& state, float center, float half, float* out, int64_t n) {
  constexpr float kScale = 1.0f / 16777216.0f;  // 2^-24
  int64_t i = 0;
  for (; i + 1 < n; i += 2) {
    const uint64_t r = SplitMix64(state);
    const float u0 = static_cast<float>(r >> 40) * kScale;
    const float u1 = static_cast<float>((r >> 8) & 0xFFFFFF) * kScale;
    out[i] = center + (2.0f * u0 - 1.0f) * half;
    out[i + 1] = center + (2.0f * u1 - 1.0f) * half;
  }
  if (i < n) {
    const float u = static_cast<float>(SplitMix64(state) >> 40) * kScale;
    out[i] = center + (2.0f * u - 1.0f) * half;
  }
}

uint32_t FileType(TensorType t) {  // llama_ftype
  switch (t) {
    case TensorType::kF32: return 0;
    case TensorType::kF16: return 1;
    case TensorType::kQ4_0: return 2;
    case TensorType::kQ8_0: return 7;
    case TensorType::kBF16: return 32;
    default: return 0;  // types ari-synth does not write (ParseTensorTypeName refuses them)
  }
}

// Encodes one row of floats into `type`.
void EncodeRow(TensorType type, const float* src, std::byte* dst, int64_t n) {
  switch (type) {
    case TensorType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case TensorType::kF16:
    case TensorType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = type == TensorType::kF16 ? Fp32ToFp16(src[i]) : Fp32ToBf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case TensorType::kQ8_0:
    case TensorType::kQ4_0: QuantizeRow(type, src, dst, n); return;
    default: return;  // not reached: ParseTensorTypeName accepts only the types above
  }
}

struct TensorPlan {
  std::string name;
  TensorType type;
  std::vector<int64_t> ne;  // ne[0] = row length
  float center;             // mean of the uniform distribution
  float half_width;         // half of its width
};

GgufWriter::TensorFiller MakeFiller(TensorPlan plan, uint64_t seed) {
  return [plan = std::move(plan), seed](std::span<std::byte> out) -> Result<void> {
    const int64_t row_len = plan.ne[0];
    int64_t rows = 1;
    for (size_t i = 1; i < plan.ne.size(); ++i) rows *= plan.ne[i];
    auto row_bytes = RowBytes(plan.type, row_len);
    if (!row_bytes) return std::unexpected(row_bytes.error());
    if (out.size() != *row_bytes * static_cast<uint64_t>(rows)) {
      return MakeError(ErrorCode::kInternal, "synth: size mismatch for tensor " + plan.name);
    }
    uint64_t state = seed ^ Fnv1a(plan.name);
    (void)SplitMix64(state);
    std::vector<float> row(static_cast<size_t>(row_len));
    for (int64_t r = 0; r < rows; ++r) {
      FillUniform(state, plan.center, plan.half_width, row.data(), row_len);
      EncodeRow(plan.type, row.data(), out.data() + static_cast<uint64_t>(r) * *row_bytes, row_len);
    }
    return {};
  };
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::span<const SynthPreset> SynthPresets() { return kPresets; }

Result<SynthPreset> FindSynthPreset(std::string_view name) {
  std::string names;
  for (const auto& p : kPresets) {
    if (p.name == name) return p;
    names += names.empty() ? "" : ", ";
    names += p.name;
  }
  return MakeError(ErrorCode::kNotFound,
                   "unknown preset '" + std::string(name) + "' (known: " + names + ")");
}

Result<TensorType> ParseTensorTypeName(std::string_view name) {
  const std::string n = Lower(name);
  if (n == "f32") return TensorType::kF32;
  if (n == "f16") return TensorType::kF16;
  if (n == "bf16") return TensorType::kBF16;
  if (n == "q8_0") return TensorType::kQ8_0;
  if (n == "q4_0") return TensorType::kQ4_0;
  return MakeError(ErrorCode::kInvalidArgument,
                   "unknown tensor type '" + std::string(name) + "' (f32, f16, bf16, q8_0, q4_0)");
}

namespace {

Result<void> CheckPreset(const SynthPreset& p) {
  if (p.dim <= 0 || p.ffn <= 0 || p.layers <= 0 || p.heads <= 0 || p.kv_heads <= 0 ||
      p.dim % p.heads != 0 || p.heads % p.kv_heads != 0 || p.context <= 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "synth: inconsistent shape for preset '" + std::string(p.name) + "'");
  }
  if (p.arch != "llama" && p.arch != "qwen2") {
    return MakeError(ErrorCode::kUnsupported, "synth: architecture '" + std::string(p.arch) + "'");
  }
  return {};
}

// The vocabulary size of a vocab GGUF (its tokenizer.ggml.tokens).
Result<int64_t> VocabSize(const GgufFile& vocab) {
  auto tokens = vocab.GetArray("tokenizer.ggml.tokens");
  if (!tokens) {
    return MakeError(tokens.error().code,
                     vocab.name() + ": not a vocab GGUF: " + tokens.error().message);
  }
  if (tokens->elem_type != GgufValueType::kString || tokens->count == 0 ||
      tokens->count > (1u << 24)) {
    return MakeError(ErrorCode::kFormat, vocab.name() +
                                             ": tokenizer.ggml.tokens must be a "
                                             "non-empty string array");
  }
  return static_cast<int64_t>(tokens->count);
}

void WriteMetadata(const SynthOptions& opts, const GgufFile& vocab, int64_t n_vocab,
                   GgufWriter& w) {
  const SynthPreset& p = opts.preset;
  const int64_t head_dim = p.dim / p.heads;
  const std::string a(p.arch);
  w.SetString("general.architecture", a);
  w.SetString("general.name", std::string(p.name) + " (ari-synth random weights, seed " +
                                  std::to_string(opts.seed) + ")");
  w.SetUint32("general.file_type", FileType(opts.type));
  if (opts.type == TensorType::kQ8_0 || opts.type == TensorType::kQ4_0) {
    w.SetUint32("general.quantization_version", 2);
  }
  w.SetUint32(a + ".vocab_size", static_cast<uint32_t>(n_vocab));
  w.SetUint32(a + ".context_length", static_cast<uint32_t>(p.context));
  w.SetUint32(a + ".embedding_length", static_cast<uint32_t>(p.dim));
  w.SetUint32(a + ".block_count", static_cast<uint32_t>(p.layers));
  w.SetUint32(a + ".feed_forward_length", static_cast<uint32_t>(p.ffn));
  w.SetUint32(a + ".attention.head_count", static_cast<uint32_t>(p.heads));
  w.SetUint32(a + ".attention.head_count_kv", static_cast<uint32_t>(p.kv_heads));
  w.SetFloat32(a + ".rope.freq_base", p.rope_theta);
  w.SetFloat32(a + ".attention.layer_norm_rms_epsilon", p.rms_eps);
  w.SetUint32(a + ".rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.CopyMetadata(vocab, "tokenizer.");
}

// Every tensor of the preset, with random values of the scale each kind needs; counts
// them into `sum`.
Result<void> AddTensors(const SynthOptions& opts, int64_t n_vocab, GgufWriter& w,
                        SynthSummary& sum) {
  const SynthPreset& p = opts.preset;
  const int64_t head_dim = p.dim / p.heads;
  const int64_t kv_dim = head_dim * p.kv_heads;
  auto add = [&](std::string name, TensorType type, std::vector<int64_t> ne, float center,
                 float half) -> Result<void> {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    sum.n_params += n;
    ++sum.n_tensors;
    TensorPlan plan{name, type, ne, center, half};
    return w.AddTensor(std::move(name), type, ne, MakeFiller(std::move(plan), opts.seed));
  };
  const float kSqrt3 = std::sqrt(3.0f);
  auto matrix = [&](std::string name, int64_t in, int64_t out_dim) -> Result<void> {
    TensorType t = opts.type;
    if (in % BlockSize(t) != 0) {
      t = TensorType::kF16;
      ++sum.n_fallback_f16;
    }
    const float std_dev = 1.0f / std::sqrt(static_cast<float>(in));
    return add(std::move(name), t, {in, out_dim}, 0.0f, std_dev * kSqrt3);
  };
  auto norm = [&](std::string name, int64_t n) {
    return add(std::move(name), TensorType::kF32, {n}, 1.0f, 0.05f);
  };
  auto bias = [&](std::string name, int64_t n) {
    return add(std::move(name), TensorType::kF32, {n}, 0.0f, 0.02f * kSqrt3);
  };

  Result<void> ok = matrix("token_embd.weight", p.dim, n_vocab);
  if (ok) ok = norm("output_norm.weight", p.dim);
  if (ok && !p.tied_embeddings) ok = matrix("output.weight", p.dim, n_vocab);
  for (int64_t l = 0; ok && l < p.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    ok = norm(b + "attn_norm.weight", p.dim);
    if (ok) ok = matrix(b + "attn_q.weight", p.dim, p.dim);
    if (ok) ok = matrix(b + "attn_k.weight", p.dim, kv_dim);
    if (ok) ok = matrix(b + "attn_v.weight", p.dim, kv_dim);
    if (ok && p.qkv_bias) ok = bias(b + "attn_q.bias", p.dim);
    if (ok && p.qkv_bias) ok = bias(b + "attn_k.bias", kv_dim);
    if (ok && p.qkv_bias) ok = bias(b + "attn_v.bias", kv_dim);
    if (ok) ok = matrix(b + "attn_output.weight", p.dim, p.dim);
    if (ok) ok = norm(b + "ffn_norm.weight", p.dim);
    if (ok) ok = matrix(b + "ffn_gate.weight", p.dim, p.ffn);
    if (ok) ok = matrix(b + "ffn_up.weight", p.dim, p.ffn);
    if (ok) ok = matrix(b + "ffn_down.weight", p.ffn, p.dim);
  }
  return ok;
}

}  // namespace

Result<GgufWriter> BuildSynthModel(const SynthOptions& opts, const GgufFile& vocab,
                                   SynthSummary* summary) {
  if (auto r = CheckPreset(opts.preset); !r) return std::unexpected(r.error());
  auto n_vocab = VocabSize(vocab);
  if (!n_vocab) return std::unexpected(n_vocab.error());
  GgufWriter w;
  WriteMetadata(opts, vocab, *n_vocab, w);
  SynthSummary sum;
  sum.vocab_size = *n_vocab;
  if (auto ok = AddTensors(opts, *n_vocab, w, sum); !ok) return std::unexpected(ok.error());
  sum.file_bytes = w.EstimatedFileSize();
  if (summary) *summary = sum;
  return w;
}

Result<SynthSummary> WriteSynthModel(const SynthOptions& opts,
                                     const std::filesystem::path& vocab_path,
                                     const std::filesystem::path& out) {
  auto vocab = GgufFile::Open(vocab_path);
  if (!vocab) return std::unexpected(vocab.error());
  SynthSummary summary;
  auto writer = BuildSynthModel(opts, *vocab, &summary);
  if (!writer) return std::unexpected(writer.error());
  if (auto ok = writer->WriteFile(out); !ok) return std::unexpected(ok.error());
  return summary;
}

}  // namespace ari::runtime
