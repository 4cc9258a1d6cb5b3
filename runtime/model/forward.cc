#include "runtime/model/forward.h"

#include <math.h>

#include <algorithm>
#include <cstring>

#include "runtime/model/model.h"
#include "runtime/model/session.h"

namespace ari::runtime {
namespace blocks {

void RmsNorm(float* out, const float* x, const float* weight, int64_t n, int64_t n_rows,
             float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * n;
    float* o = out + r * n;
    float ss = 0.0f;
    for (int64_t j = 0; j < n; ++j) ss += xr[j] * xr[j];
    ss /= static_cast<float>(n);
    ss += eps;
    ss = 1.0f / sqrtf(ss);
    for (int64_t j = 0; j < n; ++j) o[j] = weight[j] * (ss * xr[j]);
  }
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* out, float* row) {
  const int64_t cols = w.cols;
  for (int64_t r = 0; r < w.rows; ++r) {
    const float* wr = w.F32Row(r);
    if (wr == nullptr) {
      w.ReadRow(r, row);
      wr = row;
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * cols;
      float val = 0.0f;
      for (int64_t c = 0; c < cols; ++c) val += wr[c] * xt[c];
      out[t * w.rows + r] = val;
    }
  }
}

void Rope(float* vec, int32_t n_heads, int32_t head_dim, const float* cos, const float* sin,
          bool neox) {
  const int32_t half = head_dim / 2;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = vec + static_cast<int64_t>(h) * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      // normal: pair (2i, 2i+1); neox: pair (i, i + half). Both turn by angle i.
      float* a = neox ? v + i : v + 2 * i;
      float* b = neox ? v + i + half : v + 2 * i + 1;
      const float v0 = *a, v1 = *b;
      *a = v0 * cos[i] - v1 * sin[i];
      *b = v0 * sin[i] + v1 * cos[i];
    }
  }
}

void Softmax(float* x, int64_t n) {
  float max_val = x[0];
  for (int64_t i = 1; i < n; ++i) max_val = std::max(max_val, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = expf(x[i] - max_val);
    sum += x[i];
  }
  for (int64_t i = 0; i < n; ++i) x[i] /= sum;
}

void SwiGlu(float* gate_inout, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float val = gate_inout[i];
    val *= (1.0f / (1.0f + expf(-val)));
    gate_inout[i] = val * up[i];
  }
}

}  // namespace blocks

namespace {

using blocks::MatMul;

// A 1-D weight (norm, bias) as fp32: in place when stored as F32, else dequantized.
const float* Vector(const WeightMatrix& w, float* scratch) {
  if (const float* p = w.F32Row(0)) return p;
  w.ReadRow(0, scratch);
  return scratch;
}

void AddBias(float* x, const WeightMatrix& bias, int64_t n_tokens, float* scratch) {
  const float* b = Vector(bias, scratch);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < bias.cols; ++i) x[t * bias.cols + i] += b[i];
  }
}

void Embed(const ModelWeights& w, std::span<const TokenId> tokens, float* x) {
  const int64_t dim = w.token_embd.cols;
  for (size_t t = 0; t < tokens.size(); ++t) w.token_embd.ReadRow(tokens[t], x + t * dim);
}

// Pre-norm attention block: x += attn_output(Attention(RoPE(q), RoPE(k), v)).
void AttentionBlock(const ModelConfig& c, const LayerWeights& L, int32_t layer, Session& s,
                    int64_t n, int32_t pos0) {
  const Session::Buffers& b = s.buffers();
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hd = c.head_dim;
  const bool neox = c.rope_type == RopeType::kNeox;
  blocks::RmsNorm(b.xb, b.x, Vector(L.attn_norm, b.vec), dim, n, c.rms_eps);
  MatMul(L.attn_q, b.xb, n, b.q, b.row);
  MatMul(L.attn_k, b.xb, n, b.k, b.row);
  MatMul(L.attn_v, b.xb, n, b.v, b.row);
  if (c.qkv_bias) {
    AddBias(b.q, L.attn_q_bias, n, b.vec);
    AddBias(b.k, L.attn_k_bias, n, b.vec);
    AddBias(b.v, L.attn_v_bias, n, b.vec);
  }
  const int64_t half = hd / 2;
  for (int64_t t = 0; t < n; ++t) {
    const int32_t pos = pos0 + static_cast<int32_t>(t);
    const float* cos = b.rope_cos + pos * half;
    const float* sin = b.rope_sin + pos * half;
    blocks::Rope(b.q + t * q_dim, c.n_heads, c.head_dim, cos, sin, neox);
    blocks::Rope(b.k + t * kv_dim, c.n_kv_heads, c.head_dim, cos, sin, neox);
    std::memcpy(s.KeyRow(layer, pos), b.k + t * kv_dim, sizeof(float) * kv_dim);
    std::memcpy(s.ValueRow(layer, pos), b.v + t * kv_dim, sizeof(float) * kv_dim);
  }
  // Causal attention: token t sees positions 0 .. pos0 + t. Query head h reads KV head
  // h / gqa_group (grouped-query attention).
  const float scale = sqrtf(static_cast<float>(hd));
  for (int64_t t = 0; t < n; ++t) {
    const int32_t pos = pos0 + static_cast<int32_t>(t);
    for (int32_t h = 0; h < c.n_heads; ++h) {
      const float* q = b.q + t * q_dim + h * hd;
      const int64_t kv_off = static_cast<int64_t>(h / c.gqa_group()) * hd;
      for (int32_t p = 0; p <= pos; ++p) {
        const float* k = s.KeyRow(layer, p) + kv_off;
        float score = 0.0f;
        for (int64_t i = 0; i < hd; ++i) score += q[i] * k[i];
        b.att[p] = score / scale;
      }
      blocks::Softmax(b.att, pos + 1);
      float* out = b.xb2 + t * q_dim + h * hd;
      std::memset(out, 0, sizeof(float) * hd);
      for (int32_t p = 0; p <= pos; ++p) {
        const float* v = s.ValueRow(layer, p) + kv_off;
        const float a = b.att[p];
        for (int64_t i = 0; i < hd; ++i) out[i] += a * v[i];
      }
    }
  }
  MatMul(L.attn_output, b.xb2, n, b.xb, b.row);
  for (int64_t i = 0; i < n * dim; ++i) b.x[i] += b.xb[i];
}

// Pre-norm feed-forward block: x += ffn_down(silu(ffn_gate(h)) * ffn_up(h)).
void FeedForwardBlock(const ModelConfig& c, const LayerWeights& L, const Session& s, int64_t n) {
  const Session::Buffers& b = s.buffers();
  const int64_t dim = c.dim;
  blocks::RmsNorm(b.xb, b.x, Vector(L.ffn_norm, b.vec), dim, n, c.rms_eps);
  MatMul(L.ffn_gate, b.xb, n, b.hb, b.row);
  MatMul(L.ffn_up, b.xb, n, b.hb2, b.row);
  blocks::SwiGlu(b.hb, b.hb2, n * c.ffn_dim);
  MatMul(L.ffn_down, b.hb, n, b.xb, b.row);
  for (int64_t i = 0; i < n * dim; ++i) b.x[i] += b.xb[i];
}

// Final norm + classifier for the rows [first, first + count) of the chunk.
void Classifier(const ModelConfig& c, const ModelWeights& w, const Session& s, int64_t first,
                int64_t count) {
  const Session::Buffers& b = s.buffers();
  float* x = b.x + first * c.dim;
  blocks::RmsNorm(x, x, Vector(w.output_norm, b.vec), c.dim, count, c.rms_eps);
  MatMul(w.output, x, count, b.logits, b.row);
}

Result<void> ForwardChunk(Session& s, std::span<const TokenId> tokens) {
  const Model& m = s.model();
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int32_t pos0 = s.position();
  Embed(w, tokens, s.buffers().x);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    AttentionBlock(c, L, l, s, n, pos0);
    FeedForwardBlock(c, L, s, n);
  }
  if (s.all_logits()) {
    Classifier(c, w, s, 0, n);
    s.Advance(static_cast<int32_t>(n), static_cast<int32_t>(n));
  } else {
    Classifier(c, w, s, n - 1, 1);
    s.Advance(static_cast<int32_t>(n), 1);
  }
  return {};
}

}  // namespace

Result<std::span<const float>> Forward(Session& session, std::span<const TokenId> tokens) {
  const ModelConfig& c = session.model().config();
  if (tokens.empty()) return MakeError(ErrorCode::kInvalidArgument, "forward: no tokens");
  for (TokenId id : tokens) {
    if (id < 0 || id >= c.vocab_size) {
      return MakeError(ErrorCode::kInvalidArgument, "forward: token id " + std::to_string(id) +
                                                        " is outside [0, " +
                                                        std::to_string(c.vocab_size) + ")");
    }
  }
  const int64_t room = session.context_length() - session.position();
  if (static_cast<int64_t>(tokens.size()) > room) {
    return MakeError(ErrorCode::kOutOfMemory, "forward: context full (" +
                                                  std::to_string(session.position()) + " + " +
                                                  std::to_string(tokens.size()) + " tokens > " +
                                                  std::to_string(session.context_length()) + ")");
  }
  if (session.all_logits() && static_cast<int64_t>(tokens.size()) > session.max_batch()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "forward: all_logits needs chunks of at most max_batch (" +
                         std::to_string(session.max_batch()) + ") tokens");
  }
  const size_t step = static_cast<size_t>(session.max_batch());
  for (size_t i = 0; i < tokens.size(); i += step) {
    auto r = ForwardChunk(session, tokens.subspan(i, std::min(step, tokens.size() - i)));
    if (!r) return std::unexpected(r.error());
  }
  return session.logits();
}

}  // namespace ari::runtime
