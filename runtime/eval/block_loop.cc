#include "runtime/eval/block_loop.h"

#include <math.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/model/forward.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"

namespace ari::runtime {
namespace {

const float* Vector(const WeightMatrix& w, float* scratch) {
  if (const float* p = w.F32Row(0)) return p;
  w.ReadRow(0, scratch);
  return scratch;
}

void AddBias(float* x, const WeightMatrix& bias, int64_t n, float* scratch) {
  const float* b = Vector(bias, scratch);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < bias.cols; ++i) x[t * bias.cols + i] += b[i];
  }
}

}  // namespace

Result<std::unique_ptr<BlockLoop>> BlockLoop::Create(const Model& model, int32_t max_tokens) {
  const ModelConfig& c = model.config();
  if (max_tokens <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "block loop: max_tokens must be > 0");
  }
  if (IsPack(model.file())) {  // its fp32 linear weights are not kept
    return MakeError(ErrorCode::kFormat,
                     "block loop: the model is a pack; the fp32 reference blocks need the plain "
                     "GGUF");
  }
  std::unique_ptr<BlockLoop> b(new BlockLoop(model));
  b->max_tokens_ = std::min(max_tokens, c.context_length);
  const size_t n = static_cast<size_t>(b->max_tokens_);
  const size_t dim = static_cast<size_t>(c.dim), q_dim = static_cast<size_t>(c.q_dim());
  const size_t kv_dim = static_cast<size_t>(c.kv_dim()), ffn = static_cast<size_t>(c.ffn_dim);
  const size_t half = static_cast<size_t>(c.head_dim / 2);
  b->x_.resize(n * dim);
  b->in_.resize(n * dim);
  b->xb_.resize(n * dim);
  b->xb2_.resize(n * q_dim);
  b->q_.resize(n * q_dim);
  b->k_.resize(n * kv_dim);
  b->v_.resize(n * kv_dim);
  b->hb_.resize(n * ffn);
  b->hb2_.resize(n * ffn);
  b->att_.resize(n);
  b->row_.resize(static_cast<size_t>(model.weights().MaxCols()));
  b->vec_.resize(std::max({dim, q_dim, kv_dim, ffn}));
  b->rope_cos_.resize(n * half);
  b->rope_sin_.resize(n * half);
  // Same table as Session::Create (llama2.c's float arithmetic).
  for (size_t pos = 0; pos < n; ++pos) {
    for (size_t i = 0; i < half; ++i) {
      const float freq =
          1.0f / powf(c.rope_theta, static_cast<float>(2 * i) / static_cast<float>(c.head_dim));
      const float val = static_cast<float>(pos) * freq;
      b->rope_cos_[pos * half + i] = cosf(val);
      b->rope_sin_[pos * half + i] = sinf(val);
    }
  }
  return b;
}

void BlockLoop::Attention(int32_t layer, int64_t n) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(layer)];
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hd = c.head_dim;
  const bool neox = c.rope_type == RopeType::kNeox;
  blocks::RmsNorm(xb_.data(), x_.data(), Vector(L.attn_norm, vec_.data()), dim, n, c.rms_eps);
  blocks::MatMul(L.attn_q, xb_.data(), n, q_.data(), row_.data());
  blocks::MatMul(L.attn_k, xb_.data(), n, k_.data(), row_.data());
  blocks::MatMul(L.attn_v, xb_.data(), n, v_.data(), row_.data());
  if (c.qkv_bias) {
    AddBias(q_.data(), L.attn_q_bias, n, vec_.data());
    AddBias(k_.data(), L.attn_k_bias, n, vec_.data());
    AddBias(v_.data(), L.attn_v_bias, n, vec_.data());
  }
  const int64_t half = hd / 2;
  for (int64_t t = 0; t < n; ++t) {
    const float* cos = rope_cos_.data() + t * half;
    const float* sin = rope_sin_.data() + t * half;
    blocks::Rope(q_.data() + t * q_dim, c.n_heads, c.head_dim, cos, sin, neox);
    blocks::Rope(k_.data() + t * kv_dim, c.n_kv_heads, c.head_dim, cos, sin, neox);
  }
  // The window is one chunk from position 0: this layer's keys/values are k_/v_ rows.
  const float scale = sqrtf(static_cast<float>(hd));
  for (int64_t t = 0; t < n; ++t) {
    for (int32_t h = 0; h < c.n_heads; ++h) {
      const float* q = q_.data() + t * q_dim + h * hd;
      const int64_t kv_off = static_cast<int64_t>(h / c.gqa_group()) * hd;
      for (int64_t p = 0; p <= t; ++p) {
        const float* k = k_.data() + p * kv_dim + kv_off;
        float score = 0.0f;
        for (int64_t i = 0; i < hd; ++i) score += q[i] * k[i];
        att_[static_cast<size_t>(p)] = score / scale;
      }
      blocks::Softmax(att_.data(), t + 1);
      float* out = xb2_.data() + t * q_dim + h * hd;
      std::memset(out, 0, sizeof(float) * static_cast<size_t>(hd));
      for (int64_t p = 0; p <= t; ++p) {
        const float* v = v_.data() + p * kv_dim + kv_off;
        const float a = att_[static_cast<size_t>(p)];
        for (int64_t i = 0; i < hd; ++i) out[i] += a * v[i];
      }
    }
  }
  blocks::MatMul(L.attn_output, xb2_.data(), n, xb_.data(), row_.data());
  for (int64_t i = 0; i < n * dim; ++i) x_[static_cast<size_t>(i)] += xb_[static_cast<size_t>(i)];
}

void BlockLoop::FeedForward(int32_t layer, int64_t n) {
  const ModelConfig& c = model_->config();
  const LayerWeights& L = model_->weights().layers[static_cast<size_t>(layer)];
  const int64_t dim = c.dim;
  blocks::RmsNorm(xb_.data(), x_.data(), Vector(L.ffn_norm, vec_.data()), dim, n, c.rms_eps);
  blocks::MatMul(L.ffn_gate, xb_.data(), n, hb_.data(), row_.data());
  blocks::MatMul(L.ffn_up, xb_.data(), n, hb2_.data(), row_.data());
  blocks::SwiGlu(hb_.data(), hb2_.data(), n * c.ffn_dim);
  blocks::MatMul(L.ffn_down, hb_.data(), n, xb_.data(), row_.data());
  for (int64_t i = 0; i < n * dim; ++i) x_[static_cast<size_t>(i)] += xb_[static_cast<size_t>(i)];
}

Result<std::span<const float>> BlockLoop::Run(std::span<const TokenId> tokens,
                                              std::span<const int32_t> skip, bool want_logits,
                                              const Observer& observer) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0 || n > max_tokens_) {
    return MakeError(ErrorCode::kInvalidArgument, "block loop: window of " + std::to_string(n) +
                                                      " tokens, expected 1.." +
                                                      std::to_string(max_tokens_));
  }
  for (TokenId id : tokens) {
    if (id < 0 || id >= c.vocab_size) {
      return MakeError(ErrorCode::kInvalidArgument, "block loop: token id " + std::to_string(id) +
                                                        " is outside [0, " +
                                                        std::to_string(c.vocab_size) + ")");
    }
  }
  for (int32_t s : skip) {
    if (s < 0 || s >= c.n_layers) {
      return MakeError(ErrorCode::kInvalidArgument, "block loop: skipped block " +
                                                        std::to_string(s) + " is outside [0, " +
                                                        std::to_string(c.n_layers) + ")");
    }
  }
  const int64_t dim = c.dim;
  for (int64_t t = 0; t < n; ++t)
    w.token_embd.ReadRow(tokens[static_cast<size_t>(t)], x_.data() + t * dim);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    if (std::find(skip.begin(), skip.end(), l) != skip.end()) continue;
    if (observer) std::copy_n(x_.begin(), n * dim, in_.begin());
    Attention(l, n);
    FeedForward(l, n);
    if (observer) observer(l, in_.data(), x_.data(), n);
  }
  if (!want_logits) return std::span<const float>();
  const size_t need = static_cast<size_t>(n) * static_cast<size_t>(c.vocab_size);
  if (logits_.size() < need) logits_.resize(need);
  blocks::RmsNorm(x_.data(), x_.data(), Vector(w.output_norm, vec_.data()), dim, n, c.rms_eps);
  blocks::MatMul(w.output, x_.data(), n, logits_.data(), row_.data());
  return std::span<const float>(logits_.data(), need);
}

}  // namespace ari::runtime
