#include "runtime/model/model_weights.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/gguf/gguf.h"

namespace ari::runtime {

const float* WeightMatrix::F32Row(int64_t r) const {
  const std::byte* p = RowData(r);
  if (type != TensorType::kF32 || reinterpret_cast<uintptr_t>(p) % alignof(float) != 0) {
    return nullptr;
  }
  return reinterpret_cast<const float*>(p);
}

void WeightMatrix::ReadRow(int64_t r, float* dst) const {
  ::ari::runtime::DequantizeRow(type, RowData(r), dst, cols);
}

namespace {

std::string ShapeString(const TensorInfo& t) {
  std::string s = "[";
  for (uint32_t i = 0; i < t.n_dims; ++i) {
    if (i) s += ", ";
    s += std::to_string(t.ne[i]);
  }
  return s + "]";
}

// Looks up `name` and checks it is a rows x cols matrix (ne0 = cols, ne1 = rows) of a
// supported type. A 1-D tensor is expected when rows == 0 (then it is one row of cols).
Result<WeightMatrix> Bind(const GgufFile& f, const std::string& name, int64_t rows, int64_t cols,
                          bool optional = false) {
  const TensorInfo* t = f.FindTensor(name);
  if (t == nullptr) {
    if (optional) return WeightMatrix{};
    return MakeError(ErrorCode::kNotFound, f.name() + ": tensor " + name + " is missing");
  }
  const bool vector = rows == 0;
  const int64_t want_rows = vector ? 1 : rows;
  const bool shape_ok = t->ne[0] == cols && t->ne[1] == want_rows && t->ne[2] == 1 &&
                        t->ne[3] == 1 && t->n_dims <= (vector ? 1u : 2u) && t->n_dims >= 1;
  if (!shape_ok) {
    std::string want(1, '[');
    want += std::to_string(cols);
    if (!vector) {
      want += ", ";
      want += std::to_string(rows);
    }
    want += ']';
    return MakeError(ErrorCode::kFormat, f.name() + ": tensor " + name + " has shape " +
                                             ShapeString(*t) + ", expected " + want +
                                             " (ne0 first)");
  }
  if (!IsSupportedTensorType(static_cast<uint32_t>(t->type))) {
    return MakeError(ErrorCode::kUnsupported, f.name() + ": tensor " + name +
                                                  " has unsupported type " +
                                                  std::to_string(static_cast<uint32_t>(t->type)));
  }
  auto row_bytes = RowBytes(t->type, cols);
  if (!row_bytes) {
    return MakeError(ErrorCode::kFormat,
                     f.name() + ": tensor " + name + ": " + row_bytes.error().message);
  }
  if (t->data == nullptr || t->nbytes < *row_bytes * static_cast<uint64_t>(want_rows)) {
    return MakeError(ErrorCode::kFormat, f.name() + ": tensor " + name + " data is too short");
  }
  if (vector && t->type != TensorType::kF32 && t->type != TensorType::kF16 &&
      t->type != TensorType::kBF16) {
    return MakeError(ErrorCode::kUnsupported, f.name() + ": 1-D tensor " + name +
                                                  " must be F32/F16/BF16, is " +
                                                  std::string(TensorTypeName(t->type)));
  }
  WeightMatrix m;
  m.type = t->type;
  m.data = t->data;
  m.rows = want_rows;
  m.cols = cols;
  m.row_bytes = *row_bytes;
  return m;
}

}  // namespace

Result<ModelWeights> ModelWeights::FromGguf(const GgufFile& f, const ModelConfig& c) {
  ModelWeights w;
  // ari-pack hook: a pack (runtime/model/pack_file.h) holds the linear weights only in packed
  // form (<name>.w8/.w4), so they are optional here and left absent.
  const bool packed = f.Has("ari.pack.version");
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ffn = c.ffn_dim;
  const int64_t vocab = c.vocab_size;
  auto bind = [&](WeightMatrix& dst, const std::string& name, int64_t rows, int64_t cols,
                  bool optional = false) -> Result<void> {
    auto m = Bind(f, name, rows, cols, optional);
    if (!m) return std::unexpected(m.error());
    dst = *m;
    return {};
  };
#define ARI_BIND(...)                                                      \
  do {                                                                     \
    if (auto r = bind(__VA_ARGS__); !r) return std::unexpected(r.error()); \
  } while (0)
  ARI_BIND(w.token_embd, "token_embd.weight", vocab, dim);
  ARI_BIND(w.output_norm, "output_norm.weight", 0, dim);
  if (c.tied_embeddings) {
    w.output = w.token_embd;
  } else {
    ARI_BIND(w.output, "output.weight", vocab, dim, packed);
  }
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    ARI_BIND(L.attn_norm, p + "attn_norm.weight", 0, dim);
    ARI_BIND(L.attn_q, p + "attn_q.weight", q_dim, dim, packed);
    ARI_BIND(L.attn_k, p + "attn_k.weight", kv_dim, dim, packed);
    ARI_BIND(L.attn_v, p + "attn_v.weight", kv_dim, dim, packed);
    ARI_BIND(L.attn_output, p + "attn_output.weight", dim, q_dim, packed);
    if (c.qkv_bias) {
      ARI_BIND(L.attn_q_bias, p + "attn_q.bias", 0, q_dim);
      ARI_BIND(L.attn_k_bias, p + "attn_k.bias", 0, kv_dim);
      ARI_BIND(L.attn_v_bias, p + "attn_v.bias", 0, kv_dim);
    }
    ARI_BIND(L.ffn_norm, p + "ffn_norm.weight", 0, dim);
    ARI_BIND(L.ffn_gate, p + "ffn_gate.weight", ffn, dim, packed);
    ARI_BIND(L.ffn_up, p + "ffn_up.weight", ffn, dim, packed);
    ARI_BIND(L.ffn_down, p + "ffn_down.weight", dim, ffn, packed);
  }
#undef ARI_BIND
  return w;
}

uint64_t ModelWeights::TotalBytes() const {
  auto bytes = [](const WeightMatrix& m) {
    return m.present() ? m.row_bytes * static_cast<uint64_t>(m.rows) : 0;
  };
  uint64_t total = bytes(token_embd) + bytes(output_norm);
  if (output.data != token_embd.data) total += bytes(output);
  for (const LayerWeights& L : layers) {
    for (const WeightMatrix* m :
         {&L.attn_norm, &L.attn_q, &L.attn_k, &L.attn_v, &L.attn_q_bias, &L.attn_k_bias,
          &L.attn_v_bias, &L.attn_output, &L.ffn_norm, &L.ffn_gate, &L.ffn_up, &L.ffn_down}) {
      total += bytes(*m);
    }
  }
  return total;
}

int64_t ModelWeights::MaxCols() const {
  int64_t m = std::max({token_embd.cols, output.cols, output_norm.cols});
  for (const LayerWeights& L : layers) {
    m = std::max({m, L.attn_q.cols, L.attn_output.cols, L.ffn_gate.cols, L.ffn_down.cols,
                  L.attn_q_bias.cols, L.attn_k_bias.cols});
  }
  return m;
}

}  // namespace ari::runtime
