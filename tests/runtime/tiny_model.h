// Tiny random-weight llama/qwen2 models built with GgufWriter, and an independent naive
// double-precision forward pass (whole sequence, no KV cache) to check the runtime against.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/tensor_types.h"
#include "runtime/gguf/gguf.h"

namespace ari::testing {

struct TinySpec {
  std::string arch = "llama";
  int dim = 32, n_layers = 2, n_heads = 4, n_kv_heads = 2, ffn = 48, vocab = 40, ctx = 64;
  float theta = 10000.0f, eps = 1e-5f;
  bool tied = false;
  bool bias = false;                                            // attn_q/k/v.bias
  runtime::TensorType matrix_type = runtime::TensorType::kF32;  // for 2-D weights
  uint32_t seed = 1;
};

// The model's weights as the runtime will see them (dequantized), by GGUF tensor name.
using TinyWeights = std::map<std::string, std::vector<float>>;

inline std::vector<std::byte> BuildTinyModel(const TinySpec& s, TinyWeights* truth) {
  namespace rt = runtime;
  std::mt19937 rng(s.seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  rt::GgufWriter w;
  const std::string a = s.arch + ".";
  const int hd = s.dim / s.n_heads, kv = hd * s.n_kv_heads;
  w.SetString("general.architecture", s.arch);
  w.SetUint32(a + "context_length", s.ctx);
  w.SetUint32(a + "embedding_length", s.dim);
  w.SetUint32(a + "block_count", s.n_layers);
  w.SetUint32(a + "feed_forward_length", s.ffn);
  w.SetUint32(a + "attention.head_count", s.n_heads);
  w.SetUint32(a + "attention.head_count_kv", s.n_kv_heads);
  w.SetFloat32(a + "rope.freq_base", s.theta);
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", s.eps);
  auto add = [&](const std::string& name, int rows, int cols, float scale, float offset,
                 bool matrix) {
    std::vector<float> v(static_cast<size_t>(rows) * cols);
    for (float& x : v) x = offset + scale * u(rng);
    rt::TensorType type = matrix ? s.matrix_type : rt::TensorType::kF32;
    std::vector<int64_t> ne = {cols};
    if (rows > 1 || matrix) ne.push_back(rows);
    const uint64_t row_bytes = *rt::RowBytes(type, cols);
    std::vector<std::byte> data(row_bytes * rows);
    for (int r = 0; r < rows; ++r) {
      rt::QuantizeRow(type, v.data() + static_cast<size_t>(r) * cols, data.data() + r * row_bytes,
                      cols);
      rt::DequantizeRow(type, data.data() + r * row_bytes, v.data() + static_cast<size_t>(r) * cols,
                        cols);
    }
    if (auto r = w.AddTensor(name, type, ne, data); !r) ADD_FAILURE() << r.error().ToString();
    if (truth) (*truth)[name] = std::move(v);
  };
  const float ws = 1.0f / std::sqrt(static_cast<float>(s.dim));
  add("token_embd.weight", s.vocab, s.dim, 1.0f, 0.0f, true);
  add("output_norm.weight", 1, s.dim, 0.2f, 1.0f, false);
  if (!s.tied) add("output.weight", s.vocab, s.dim, ws, 0.0f, true);
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", 1, s.dim, 0.2f, 1.0f, false);
    add(p + "attn_q.weight", s.dim, s.dim, ws, 0.0f, true);
    add(p + "attn_k.weight", kv, s.dim, ws, 0.0f, true);
    add(p + "attn_v.weight", kv, s.dim, ws, 0.0f, true);
    if (s.bias) {
      add(p + "attn_q.bias", 1, s.dim, 0.5f, 0.0f, false);
      add(p + "attn_k.bias", 1, kv, 0.5f, 0.0f, false);
      add(p + "attn_v.bias", 1, kv, 0.5f, 0.0f, false);
    }
    add(p + "attn_output.weight", s.dim, s.dim, ws, 0.0f, true);
    add(p + "ffn_norm.weight", 1, s.dim, 0.2f, 1.0f, false);
    add(p + "ffn_gate.weight", s.ffn, s.dim, ws, 0.0f, true);
    add(p + "ffn_up.weight", s.ffn, s.dim, ws, 0.0f, true);
    add(p + "ffn_down.weight", s.dim, s.ffn, 1.0f / std::sqrt(static_cast<float>(s.ffn)), 0.0f,
        true);
  }
  return *w.WriteToMemory();
}

// Naive forward over the whole sequence in double precision; returns [T, vocab] logits.
inline std::vector<std::vector<double>> NaiveForward(const TinySpec& s, const TinyWeights& w,
                                                     const std::vector<int>& tokens) {
  using Vec = std::vector<double>;
  const int T = static_cast<int>(tokens.size()), D = s.dim, hd = s.dim / s.n_heads;
  const int kvd = hd * s.n_kv_heads;
  const bool neox = s.arch == "qwen2";
  auto W = [&](const std::string& n) -> const std::vector<float>& { return w.at(n); };
  auto matvec = [](const std::vector<float>& m, const Vec& x, int rows) {
    const size_t cols = x.size();
    Vec y(static_cast<size_t>(rows), 0.0);
    for (int r = 0; r < rows; ++r) {
      for (size_t c = 0; c < cols; ++c) y[r] += static_cast<double>(m[r * cols + c]) * x[c];
    }
    return y;
  };
  auto rmsnorm = [&](const Vec& x, const std::vector<float>& g) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / x.size() + s.eps);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g[i];
    return y;
  };
  auto rope = [&](Vec& v, int heads, int pos) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < hd / 2; ++i) {
        const double ang = pos * std::pow(static_cast<double>(s.theta), -2.0 * i / hd);
        const int a = h * hd + (neox ? i : 2 * i), b = h * hd + (neox ? i + hd / 2 : 2 * i + 1);
        const double x0 = v[a], x1 = v[b];
        v[a] = x0 * std::cos(ang) - x1 * std::sin(ang);
        v[b] = x0 * std::sin(ang) + x1 * std::cos(ang);
      }
    }
  };
  std::vector<Vec> x(T);
  for (int t = 0; t < T; ++t) {
    const auto& e = W("token_embd.weight");
    x[t].assign(e.begin() + static_cast<std::ptrdiff_t>(tokens[t]) * D,
                e.begin() + static_cast<std::ptrdiff_t>(tokens[t] + 1) * D);
  }
  for (int l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    std::vector<Vec> q(T), k(T), v(T);
    for (int t = 0; t < T; ++t) {
      Vec h = rmsnorm(x[t], W(p + "attn_norm.weight"));
      q[t] = matvec(W(p + "attn_q.weight"), h, D);
      k[t] = matvec(W(p + "attn_k.weight"), h, kvd);
      v[t] = matvec(W(p + "attn_v.weight"), h, kvd);
      if (s.bias) {
        for (int i = 0; i < D; ++i) q[t][i] += W(p + "attn_q.bias")[i];
        for (int i = 0; i < kvd; ++i) k[t][i] += W(p + "attn_k.bias")[i];
        for (int i = 0; i < kvd; ++i) v[t][i] += W(p + "attn_v.bias")[i];
      }
      rope(q[t], s.n_heads, t);
      rope(k[t], s.n_kv_heads, t);
    }
    for (int t = 0; t < T; ++t) {
      Vec att(static_cast<size_t>(D), 0.0);
      for (int h = 0; h < s.n_heads; ++h) {
        const int kh = h / (s.n_heads / s.n_kv_heads);
        Vec sc(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int u2 = 0; u2 <= t; ++u2) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[t][h * hd + i] * k[u2][kh * hd + i];
          sc[u2] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[u2]);
        }
        double sum = 0;
        for (double& z : sc) sum += (z = std::exp(z - mx));
        for (int u2 = 0; u2 <= t; ++u2) {
          for (int i = 0; i < hd; ++i) att[h * hd + i] += sc[u2] / sum * v[u2][kh * hd + i];
        }
      }
      Vec o = matvec(W(p + "attn_output.weight"), att, D);
      for (int i = 0; i < D; ++i) x[t][i] += o[i];
      Vec h = rmsnorm(x[t], W(p + "ffn_norm.weight"));
      Vec g = matvec(W(p + "ffn_gate.weight"), h, s.ffn);
      Vec up = matvec(W(p + "ffn_up.weight"), h, s.ffn);
      for (int i = 0; i < s.ffn; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * up[i];
      Vec d = matvec(W(p + "ffn_down.weight"), g, D);
      for (int i = 0; i < D; ++i) x[t][i] += d[i];
    }
  }
  std::vector<Vec> logits(T);
  for (int t = 0; t < T; ++t) {
    Vec h = rmsnorm(x[t], W("output_norm.weight"));
    logits[t] = matvec(W(s.tied ? "token_embd.weight" : "output.weight"), h, s.vocab);
  }
  return logits;
}

}  // namespace ari::testing
