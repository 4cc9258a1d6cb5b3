#include "runtime/model/model_config.h"

#include <limits>

#include "runtime/gguf/gguf.h"

namespace ari::runtime {
namespace {

constexpr uint64_t kMaxDim = 1u << 20;  // sanity bound for any single dimension

Result<int32_t> ReadDim(const GgufFile& f, const std::string& key) {
  auto v = f.GetUint(key);
  if (!v) {
    return MakeError(v.error().code, f.name() + ": model metadata: " + v.error().message);
  }
  if (*v == 0 || *v > kMaxDim) {
    return MakeError(ErrorCode::kFormat, f.name() + ": " + key + " = " + std::to_string(*v) +
                                             " is out of range [1, " + std::to_string(kMaxDim) +
                                             "]");
  }
  return static_cast<int32_t>(*v);
}

Result<int32_t> ReadDimOr(const GgufFile& f, const std::string& key, int32_t def) {
  if (!f.Has(key)) return def;
  return ReadDim(f, key);
}

Result<float> ReadPositiveFloatOr(const GgufFile& f, const std::string& key, float def) {
  auto v = f.GetFloatOr(key, def);
  if (!v) return MakeError(v.error().code, f.name() + ": " + v.error().message);
  if (!(*v > 0.0f) || *v == std::numeric_limits<float>::infinity()) {
    return MakeError(ErrorCode::kFormat,
                     f.name() + ": " + key + " = " + std::to_string(*v) + " must be > 0");
  }
  return *v;
}

// general.architecture (and what it implies) and general.name.
Result<void> ReadArchitecture(const GgufFile& f, ModelConfig& c) {
  auto arch = f.GetString("general.architecture");
  if (!arch) {
    return MakeError(arch.error().code, f.name() + ": " + arch.error().message);
  }
  c.arch_name = std::string(*arch);
  if (c.arch_name == "llama") {
    c.arch = Architecture::kLlama;
    c.rope_type = RopeType::kNormal;
  } else if (c.arch_name == "qwen2") {
    c.arch = Architecture::kQwen2;
    c.rope_type = RopeType::kNeox;
    c.qkv_bias = true;
  } else {
    return MakeError(ErrorCode::kUnsupported, f.name() + ": architecture '" + c.arch_name +
                                                  "' is not supported (supported: llama, qwen2)");
  }
  if (auto n = f.GetString("general.name")) c.name = std::string(*n);
  return {};
}

// The block's sizes; `a` is the architecture's key prefix ("llama.").
Result<void> ReadSizes(const GgufFile& f, const std::string& a, ModelConfig& c) {
  auto dim = ReadDim(f, a + "embedding_length");
  if (!dim) return std::unexpected(dim.error());
  auto layers = ReadDim(f, a + "block_count");
  if (!layers) return std::unexpected(layers.error());
  auto heads = ReadDim(f, a + "attention.head_count");
  if (!heads) return std::unexpected(heads.error());
  auto kv_heads = ReadDimOr(f, a + "attention.head_count_kv", *heads);
  if (!kv_heads) return std::unexpected(kv_heads.error());
  auto ffn = ReadDim(f, a + "feed_forward_length");
  if (!ffn) return std::unexpected(ffn.error());
  auto ctx = ReadDim(f, a + "context_length");
  if (!ctx) return std::unexpected(ctx.error());
  c.dim = *dim;
  c.n_layers = *layers;
  c.n_heads = *heads;
  c.n_kv_heads = *kv_heads;
  c.ffn_dim = *ffn;
  c.context_length = *ctx;
  return {};
}

// Head dim, RoPE and the norm's epsilon (after ReadSizes).
Result<void> ReadAttention(const GgufFile& f, const std::string& a, ModelConfig& c) {
  if (c.dim % c.n_heads != 0 && !f.Has(a + "attention.key_length")) {
    return MakeError(ErrorCode::kFormat, f.name() + ": embedding_length " + std::to_string(c.dim) +
                                             " is not a multiple of head_count " +
                                             std::to_string(c.n_heads));
  }
  auto head_dim = ReadDimOr(f, a + "attention.key_length", c.dim / c.n_heads);
  if (!head_dim) return std::unexpected(head_dim.error());
  c.head_dim = *head_dim;
  auto v_len = ReadDimOr(f, a + "attention.value_length", c.head_dim);
  if (!v_len) return std::unexpected(v_len.error());
  if (*v_len != c.head_dim) {
    return MakeError(ErrorCode::kUnsupported,
                     f.name() + ": attention.value_length != key_length is not supported");
  }
  auto rope_dims = ReadDimOr(f, a + "rope.dimension_count", c.head_dim);
  if (!rope_dims) return std::unexpected(rope_dims.error());
  if (*rope_dims != c.head_dim) {
    return MakeError(ErrorCode::kUnsupported, f.name() + ": partial RoPE (rope.dimension_count " +
                                                  std::to_string(*rope_dims) + " != head dim " +
                                                  std::to_string(c.head_dim) +
                                                  ") is not supported");
  }
  auto theta = ReadPositiveFloatOr(f, a + "rope.freq_base", 10000.0f);
  if (!theta) return std::unexpected(theta.error());
  c.rope_theta = *theta;
  auto eps = ReadPositiveFloatOr(f, a + "attention.layer_norm_rms_epsilon",
                                 c.arch == Architecture::kQwen2 ? 1e-6f : 1e-5f);
  if (!eps) return std::unexpected(eps.error());
  c.rms_eps = *eps;
  return {};
}

// The vocabulary size from the token embedding; tied or untied classifier.
Result<void> ReadVocab(const GgufFile& f, ModelConfig& c) {
  const TensorInfo* embd = f.FindTensor("token_embd.weight");
  if (embd == nullptr) {
    return MakeError(ErrorCode::kNotFound, f.name() + ": tensor token_embd.weight is missing");
  }
  if (embd->ne[1] <= 0 || embd->ne[1] > std::numeric_limits<int32_t>::max()) {
    return MakeError(ErrorCode::kFormat, f.name() + ": token_embd.weight has a bad vocab size");
  }
  c.vocab_size = static_cast<int32_t>(embd->ne[1]);
  // ari-pack hook: a pack names an untied classifier output.weight.w8 (see pack_file.h).
  c.tied_embeddings =
      f.FindTensor("output.weight") == nullptr && f.FindTensor("output.weight.w8") == nullptr;
  return {};
}

}  // namespace

std::string_view ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kLlama: return "llama";
    case Architecture::kQwen2: return "qwen2";
  }
  return "unknown";
}

Result<ModelConfig> ModelConfig::FromGguf(const GgufFile& f) {
  ModelConfig c;
  if (auto r = ReadArchitecture(f, c); !r) return std::unexpected(r.error());
  const std::string a = c.arch_name + ".";
  if (auto r = ReadSizes(f, a, c); !r) return std::unexpected(r.error());
  if (auto r = ReadAttention(f, a, c); !r) return std::unexpected(r.error());
  if (auto r = ReadVocab(f, c); !r) return std::unexpected(r.error());
  if (auto r = c.Validate(); !r) {
    return MakeError(r.error().code, f.name() + ": " + r.error().message);
  }
  return c;
}

Result<void> ModelConfig::Validate() const {
  auto bad = [](std::string msg) { return MakeError(ErrorCode::kFormat, std::move(msg)); };
  if (dim <= 0 || n_layers <= 0 || n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 ||
      ffn_dim <= 0 || vocab_size <= 0 || context_length <= 0) {
    return bad("model config has a non-positive size: " + ToString());
  }
  if (n_heads % n_kv_heads != 0) {
    return bad("head_count " + std::to_string(n_heads) + " is not a multiple of head_count_kv " +
               std::to_string(n_kv_heads));
  }
  if (head_dim % 2 != 0) return bad("head dim " + std::to_string(head_dim) + " is odd (RoPE)");
  if (static_cast<int64_t>(n_heads) * head_dim > static_cast<int64_t>(kMaxDim)) {
    return bad("n_heads * head_dim is too large");
  }
  return {};
}

std::string ModelConfig::ToString() const {
  return arch_name + (name.empty() ? "" : " '" + name + "'") + ": dim " + std::to_string(dim) +
         ", layers " + std::to_string(n_layers) + ", heads " + std::to_string(n_heads) + "/" +
         std::to_string(n_kv_heads) + " (head dim " + std::to_string(head_dim) + "), ffn " +
         std::to_string(ffn_dim) + ", vocab " + std::to_string(vocab_size) + ", ctx " +
         std::to_string(context_length) + ", rope theta " + std::to_string(rope_theta) +
         (rope_type == RopeType::kNeox ? " (neox)" : " (normal)") + ", rms eps " +
         std::to_string(rms_eps) + (qkv_bias ? ", qkv bias" : "") +
         (tied_embeddings ? ", tied embeddings" : "");
}

}  // namespace ari::runtime
