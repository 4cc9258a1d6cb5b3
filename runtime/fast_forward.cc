#include "runtime/fast_forward.h"

#include <math.h>

#include <algorithm>
#include <cstring>

#include "runtime/forward.h"
#include "runtime/kernels/kernels.h"
#include "runtime/model.h"

namespace ari::runtime {
namespace {

using kernels::BlockQ8A;
using kernels::KernelTable;
using kernels::PackedMatrix;
using kernels::PackedPrecision;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Rows [r0, r1) of participant i of n: whole 8-row blocks, balanced.
inline void RowRange(int64_t rows, int i, int n, int64_t* r0, int64_t* r1) {
  const int64_t blocks = kernels::RowBlocks(rows);
  *r0 = std::min(rows, blocks * i / n * kernels::kRowInterleave);
  *r1 = std::min(rows, blocks * (i + 1) / n * kernels::kRowInterleave);
}

struct MatJob {
  const KernelTable* k;
  const PackedMatrix* const* w;
  float* const* y;
  int count;
  int64_t n;
  const uint16_t* a16;
  const BlockQ8A* aq;
};

void RunMatJob(void* ctx, int i, int n_part) {
  const MatJob& j = *static_cast<const MatJob*>(ctx);
  for (int m = 0; m < j.count; ++m) {
    const PackedMatrix& w = *j.w[m];
    int64_t r0, r1;
    RowRange(w.rows, i, n_part, &r0, &r1);
    if (r0 >= r1) continue;
    if (w.precision == PackedPrecision::kW8) {
      if (j.n == 1) {
        j.k->gemv_w8a16(w, j.a16, j.y[m], r0, r1);
      } else {
        j.k->gemm_w8a16(w, j.a16, kernels::PaddedCols(w.cols), j.n, j.y[m], w.rows, r0, r1);
      }
    } else {
      if (j.n == 1) {
        j.k->gemv_w4a8(w, j.aq, j.y[m], r0, r1);
      } else {
        j.k->gemm_w4a8(w, j.aq, kernels::Groups(w.cols), j.n, j.y[m], w.rows, r0, r1);
      }
    }
  }
}

struct AttJob {
  const KernelTable* k;
  const ModelConfig* c;
  const float* q;
  float* out;
  float* att;
  int64_t att_stride;
  const std::byte* kc;  // layer base of K
  const std::byte* vc;
  bool f16;
  int64_t n;
  int32_t pos0;
};

void RunAttJob(void* ctx, int i, int n_part) {
  const AttJob& j = *static_cast<const AttJob*>(ctx);
  const ModelConfig& c = *j.c;
  const int64_t hd = c.head_dim, kvd = c.kv_dim(), qd = c.q_dim();
  const int64_t total = j.n * c.n_heads;
  const int64_t a = total * i / n_part, e = total * (i + 1) / n_part;
  float* att = j.att + j.att_stride * i;
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  const size_t esz = j.f16 ? 2 : 4;
  for (int64_t w = a; w < e; ++w) {
    const int64_t t = w / c.n_heads, h = w % c.n_heads;
    const int64_t nt = j.pos0 + t + 1;
    const int64_t off = (h / c.gqa_group()) * hd;
    const float* q = j.q + t * qd + h * hd;
    float* out = j.out + t * qd + h * hd;
    const std::byte* kb = j.kc + static_cast<size_t>(off) * esz;
    const std::byte* vb = j.vc + static_cast<size_t>(off) * esz;
    if (j.f16) {
      j.k->attn_scores_f16(q, reinterpret_cast<const uint16_t*>(kb), kvd, hd, nt, scale, att);
      j.k->softmax(att, nt);
      j.k->attn_values_f16(att, reinterpret_cast<const uint16_t*>(vb), kvd, hd, nt, out);
    } else {
      j.k->attn_scores_f32(q, reinterpret_cast<const float*>(kb), kvd, hd, nt, scale, att);
      j.k->softmax(att, nt);
      j.k->attn_values_f32(att, reinterpret_cast<const float*>(vb), kvd, hd, nt, out);
    }
  }
}

const float* F32Vector(const WeightMatrix& w) { return w.present() ? w.F32Row(0) : nullptr; }

}  // namespace

uint64_t KvCacheView::Bytes(const ModelConfig& c, KvType type, int32_t ctx) {
  const uint64_t esz = type == KvType::kF32 ? 4 : type == KvType::kF16 ? 2 : 1;
  return 2 * esz * static_cast<uint64_t>(c.n_layers) * static_cast<uint64_t>(ctx) *
         static_cast<uint64_t>(c.kv_dim());
}

uint64_t FastForward::WorkspaceBytes(const ModelConfig& c, int32_t max_tokens, int32_t ctx,
                                     int participants, size_t align) {
  const uint64_t n = static_cast<uint64_t>(std::max(max_tokens, 1));
  const uint64_t max_k = static_cast<uint64_t>(std::max({c.dim, c.q_dim(), c.ffn_dim}));
  const uint64_t f = sizeof(float);
  const uint64_t sizes[] = {
      n * c.dim * f,  n * c.dim * f,  n * c.q_dim() * f, n * c.kv_dim() * f, n * c.kv_dim() * f,
      n * c.q_dim() * f, n * c.ffn_dim * f, n * c.ffn_dim * f,
      n * static_cast<uint64_t>(kernels::PaddedCols(static_cast<int64_t>(max_k))) * 2,
      n * static_cast<uint64_t>(kernels::Groups(static_cast<int64_t>(max_k))) * sizeof(BlockQ8A),
      static_cast<uint64_t>(participants) * AlignUp(static_cast<uint64_t>(ctx) * f, align),
      static_cast<uint64_t>(c.vocab_size) * f,
      static_cast<uint64_t>(ctx) * (c.head_dim / 2) * f,
      static_cast<uint64_t>(ctx) * (c.head_dim / 2) * f};
  uint64_t total = 0;
  for (uint64_t s : sizes) total += AlignUp(s, align);
  return total;
}

Result<void> FastForward::Init(const Model& model, const PackedWeights& packed,
                               std::byte* workspace, uint64_t bytes, int32_t max_tokens,
                               int32_t ctx, int participants, size_t align) {
  const ModelConfig& c = model.config();
  if (bytes < WorkspaceBytes(c, max_tokens, ctx, participants, align)) {
    return MakeError(ErrorCode::kInvalidArgument, "fast forward: workspace too small");
  }
  const ModelWeights& w = model.weights();
  for (const LayerWeights& L : w.layers) {
    if (!F32Vector(L.attn_norm) || !F32Vector(L.ffn_norm) ||
        (c.qkv_bias && (!F32Vector(L.attn_q_bias) || !F32Vector(L.attn_k_bias) ||
                        !F32Vector(L.attn_v_bias)))) {
      return MakeError(ErrorCode::kFormat, "fast forward: norms/biases must be F32 (a pack)");
    }
  }
  if (!F32Vector(w.output_norm)) {
    return MakeError(ErrorCode::kFormat, "fast forward: output_norm must be F32");
  }
  model_ = &model;
  packed_ = &packed;
  max_tokens_ = max_tokens;
  ctx_ = ctx;
  participants_ = participants;
  att_stride_ = static_cast<int64_t>(AlignUp(static_cast<uint64_t>(ctx) * 4, align) / 4);
  max_k_ = std::max({c.dim, c.q_dim(), c.ffn_dim});
  const uint64_t n = static_cast<uint64_t>(std::max(max_tokens, 1));
  std::byte* p = workspace;
  auto take = [&](uint64_t size) {
    std::byte* r = p;
    p += AlignUp(size, align);
    return r;
  };
  const uint64_t f = sizeof(float);
  b_.x = reinterpret_cast<float*>(take(n * c.dim * f));
  b_.y = reinterpret_cast<float*>(take(n * c.dim * f));
  b_.q = reinterpret_cast<float*>(take(n * c.q_dim() * f));
  b_.k = reinterpret_cast<float*>(take(n * c.kv_dim() * f));
  b_.v = reinterpret_cast<float*>(take(n * c.kv_dim() * f));
  b_.att_out = reinterpret_cast<float*>(take(n * c.q_dim() * f));
  b_.hg = reinterpret_cast<float*>(take(n * c.ffn_dim * f));
  b_.hu = reinterpret_cast<float*>(take(n * c.ffn_dim * f));
  b_.a16 = reinterpret_cast<uint16_t*>(take(n * kernels::PaddedCols(max_k_) * 2));
  b_.aq = reinterpret_cast<BlockQ8A*>(take(n * kernels::Groups(max_k_) * sizeof(BlockQ8A)));
  b_.att = reinterpret_cast<float*>(take(static_cast<uint64_t>(participants) * att_stride_ * f));
  b_.logits = reinterpret_cast<float*>(take(static_cast<uint64_t>(c.vocab_size) * f));
  const int64_t half = c.head_dim / 2;
  b_.rope_cos = reinterpret_cast<float*>(take(static_cast<uint64_t>(ctx) * half * f));
  b_.rope_sin = reinterpret_cast<float*>(take(static_cast<uint64_t>(ctx) * half * f));
  // Same table as Session (reference): angle pos * theta^(-2i / head_dim), in float.
  for (int64_t pos = 0; pos < ctx; ++pos) {
    for (int64_t i = 0; i < half; ++i) {
      const float freq = 1.0f / powf(c.rope_theta, static_cast<float>(2 * i) /
                                                       static_cast<float>(c.head_dim));
      const float val = static_cast<float>(pos) * freq;
      b_.rope_cos[pos * half + i] = cosf(val);
      b_.rope_sin[pos * half + i] = sinf(val);
    }
  }
  return {};
}

void FastForward::PrepareAct(const float* x, int64_t n, int64_t cols, const float* norm,
                             PackedPrecision p) const {
  const KernelTable& k = kernels::ActiveKernels();
  const float eps = model_->config().rms_eps;
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * cols;
    if (p == PackedPrecision::kW8) {
      uint16_t* out = b_.a16 + t * kernels::PaddedCols(cols);
      if (norm) kernels::RmsNormToF16(k, xt, norm, cols, eps, out);
      else kernels::ConvertActF16(k, xt, cols, out);
    } else {
      BlockQ8A* out = b_.aq + t * kernels::Groups(cols);
      if (norm) kernels::RmsNormToQ8A(k, xt, norm, cols, eps, out);
      else kernels::QuantizeActQ8A(k, xt, cols, out);
    }
  }
}

void FastForward::MatMuls(const PackedMatrix* const* w, float* const* y, int count, int64_t n,
                          ThreadPool& pool, int threads) const {
  MatJob job{&kernels::ActiveKernels(), w, y, count, n, b_.a16, b_.aq};
  pool.Run(&RunMatJob, &job, threads);
}

void FastForward::StoreKv(int32_t layer, int64_t n, int32_t pos0, const KvCacheView& kv) const {
  const ModelConfig& c = model_->config();
  const int64_t kvd = c.kv_dim();
  const KernelTable& k = kernels::ActiveKernels();
  for (int64_t t = 0; t < n; ++t) {
    const size_t row = (static_cast<size_t>(layer) * kv.ctx + static_cast<size_t>(pos0 + t)) * kvd;
    if (kv.type == KvType::kF16) {
      k.convert_f16(b_.k + t * kvd, kvd, static_cast<uint16_t*>(kv.k) + row);
      k.convert_f16(b_.v + t * kvd, kvd, static_cast<uint16_t*>(kv.v) + row);
    } else {
      std::memcpy(static_cast<float*>(kv.k) + row, b_.k + t * kvd, kvd * sizeof(float));
      std::memcpy(static_cast<float*>(kv.v) + row, b_.v + t * kvd, kvd * sizeof(float));
    }
  }
}

void FastForward::Attention(int32_t layer, int64_t n, int32_t pos0, const KvCacheView& kv,
                            ThreadPool& pool, int threads) const {
  const ModelConfig& c = model_->config();
  const bool f16 = kv.type == KvType::kF16;
  const size_t esz = f16 ? 2 : 4;
  const size_t base = static_cast<size_t>(layer) * kv.ctx * c.kv_dim() * esz;
  AttJob job{&kernels::ActiveKernels(), &c, b_.q, b_.att_out, b_.att, att_stride_,
             static_cast<const std::byte*>(kv.k) + base, static_cast<const std::byte*>(kv.v) + base,
             f16, n, pos0};
  pool.Run(&RunAttJob, &job, std::min(threads, participants_));
}

Result<const float*> FastForward::Run(std::span<const TokenId> tokens, int32_t pos0,
                                      const KvCacheView& kv, PackedPrecision p,
                                      const uint8_t* drop_mask, ThreadPool& pool, int threads) {
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0 || n > max_tokens_) {
    return MakeError(ErrorCode::kInvalidArgument, "fast forward: bad chunk size");
  }
  if (pos0 < 0 || pos0 + n > kv.ctx || kv.ctx > ctx_ || kv.type == KvType::kInt8) {
    return MakeError(ErrorCode::kInvalidArgument, "fast forward: context/KV mismatch");
  }
  for (TokenId id : tokens) {
    if (id < 0 || id >= c.vocab_size) {
      return MakeError(ErrorCode::kInvalidArgument, "fast forward: token id out of range");
    }
  }
  threads = std::clamp(threads, 1, participants_);
  const int pi = PrecisionIndex(p);
  const int64_t dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), half = c.head_dim / 2;
  const bool neox = c.rope_type == RopeType::kNeox;
  for (int64_t t = 0; t < n; ++t) w.token_embd.ReadRow(tokens[t], b_.x + t * dim);
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const PackedLayer& P = packed_->layers[pi][static_cast<size_t>(l)];
    const bool dropped = drop_mask != nullptr && drop_mask[l] != 0;
    PrepareAct(b_.x, n, dim, L.attn_norm.F32Row(0), p);
    if (dropped) {
      const PackedMatrix* ws[2] = {&P.k, &P.v};
      float* ys[2] = {b_.k, b_.v};
      MatMuls(ws, ys, 2, n, pool, threads);
    } else {
      const PackedMatrix* ws[3] = {&P.q, &P.k, &P.v};
      float* ys[3] = {b_.q, b_.k, b_.v};
      MatMuls(ws, ys, 3, n, pool, threads);
    }
    if (c.qkv_bias) {
      const float* bq = L.attn_q_bias.F32Row(0);
      const float* bk = L.attn_k_bias.F32Row(0);
      const float* bv = L.attn_v_bias.F32Row(0);
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t i = 0; i < qd; ++i) b_.q[t * qd + i] += bq[i];
        for (int64_t i = 0; i < kvd; ++i) {
          b_.k[t * kvd + i] += bk[i];
          b_.v[t * kvd + i] += bv[i];
        }
      }
    }
    for (int64_t t = 0; t < n; ++t) {
      const float* cs = b_.rope_cos + (pos0 + t) * half;
      const float* sn = b_.rope_sin + (pos0 + t) * half;
      if (!dropped) blocks::Rope(b_.q + t * qd, c.n_heads, c.head_dim, cs, sn, neox);
      blocks::Rope(b_.k + t * kvd, c.n_kv_heads, c.head_dim, cs, sn, neox);
    }
    StoreKv(l, n, pos0, kv);
    if (dropped) continue;
    Attention(l, n, pos0, kv, pool, threads);
    PrepareAct(b_.att_out, n, qd, nullptr, p);
    {
      const PackedMatrix* ws[1] = {&P.o};
      float* ys[1] = {b_.y};
      MatMuls(ws, ys, 1, n, pool, threads);
    }
    for (int64_t i = 0; i < n * dim; ++i) b_.x[i] += b_.y[i];
    PrepareAct(b_.x, n, dim, L.ffn_norm.F32Row(0), p);
    {
      const PackedMatrix* ws[2] = {&P.gate, &P.up};
      float* ys[2] = {b_.hg, b_.hu};
      MatMuls(ws, ys, 2, n, pool, threads);
    }
    const KernelTable& k = kernels::ActiveKernels();
    const int64_t ffn = c.ffn_dim;
    for (int64_t t = 0; t < n; ++t) {
      if (p == PackedPrecision::kW8) {
        kernels::SwiGluToF16(k, b_.hg + t * ffn, b_.hu + t * ffn, ffn,
                             b_.a16 + t * kernels::PaddedCols(ffn));
      } else {
        kernels::SwiGluToQ8A(k, b_.hg + t * ffn, b_.hu + t * ffn, ffn,
                             b_.aq + t * kernels::Groups(ffn));
      }
    }
    {
      const PackedMatrix* ws[1] = {&P.down};
      float* ys[1] = {b_.y};
      MatMuls(ws, ys, 1, n, pool, threads);
    }
    for (int64_t i = 0; i < n * dim; ++i) b_.x[i] += b_.y[i];
  }
  PrepareAct(b_.x + (n - 1) * dim, 1, dim, w.output_norm.F32Row(0), p);
  const PackedMatrix* ws[1] = {&packed_->classifier[pi]};
  float* ys[1] = {b_.logits};
  MatMuls(ws, ys, 1, 1, pool, threads);
  return b_.logits;
}

}  // namespace ari::runtime
