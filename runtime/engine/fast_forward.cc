#include "runtime/engine/fast_forward.h"

#include <math.h>

#include <algorithm>
#include <cstring>

#include "runtime/core/tensor_types.h"
#include "runtime/engine/paging.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/kv_int8.h"
#include "runtime/model/forward.h"
#include "runtime/model/model.h"

namespace ari::runtime {
namespace {

using kernels::BlockQ16A;
using kernels::BlockQ8A;
using kernels::KernelTable;
using kernels::PackedMatrix;
using kernels::PackedPrecision;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

constexpr int64_t kPiecesPerThread = 4;  // matmul row pieces per pool participant

// Rows [r0, r1) of participant i of n: whole 8-row blocks, balanced.
inline void RowRange(int64_t rows, int i, int n, int64_t* r0, int64_t* r1) {
  const int64_t blocks = kernels::RowBlocks(rows);
  *r0 = std::min(rows, blocks * i / n * kernels::kRowInterleave);
  *r1 = std::min(rows, blocks * (i + 1) / n * kernels::kRowInterleave);
}

struct MatJob {
  const KernelTable* k = nullptr;
  const PackedMatrix* const* w = nullptr;
  float* const* y = nullptr;
  int count = 0;
  int64_t n = 0;
  const BlockQ16A* a16 = nullptr;
  const BlockQ8A* aq = nullptr;
  bool swiglu = false;  // count == 2 (gate, up): y[0] = silu(y[0]) * y[1] on the unit's rows
  int64_t pieces = 1;   // row pieces per matrix (units = matrices x pieces)
  FastForward::RanNotes* ran = nullptr;  // [participant]: the kernels its units called
};

// Calls the table's kernel for rows [r0, r1) of matrix m and notes its tier in `ran`.
void MatRows(const MatJob& j, int m, int64_t r0, int64_t r1, FastForward::MatmulsRan& ran) {
  const PackedMatrix& w = *j.w[m];
  const kernels::KernelTable& k = *j.k;
  const bool w8 = w.precision == PackedPrecision::kW8;
  if (j.n == 1) {
    if (w8) {
      k.gemv_w8a16(w, j.a16, j.y[m], r0, r1);
    } else {
      k.gemv_w4a8(w, j.aq, j.y[m], r0, r1);
    }
    ran.gemv_tiers |= 1u << static_cast<int>(w8 ? k.gemv_w8a16_tier : k.gemv_w4a8_tier);
    return;
  }
  if (w8) {
    k.gemm_w8a16(w, j.a16, kernels::ActQ16ABlocks(w.cols), j.n, j.y[m], w.rows, r0, r1);
  } else {
    k.gemm_w4a8(w, j.aq, kernels::Groups(w.cols), j.n, j.y[m], w.rows, r0, r1);
  }
  ran.gemm_tiers |= 1u << static_cast<int>(w8 ? k.gemm_w8a16_tier : k.gemm_w4a8_tier);
}

// Unit u: piece u % pieces of matrix u / pieces (with swiglu: of gate and up together,
// then SwiGLU on those rows in place; out[i] depends on gate[i], up[i] only). Each unit
// writes only its own rows, so the result does not depend on which thread ran it.
void RunMatUnit(void* ctx, int64_t u, int who) {
  const MatJob& j = *static_cast<const MatJob*>(ctx);
  const int m = static_cast<int>(u / j.pieces);
  const int piece = static_cast<int>(u % j.pieces);
  const int64_t rows = j.w[m]->rows;
  int64_t r0 = 0, r1 = 0;
  RowRange(rows, piece, static_cast<int>(j.pieces), &r0, &r1);
  if (r0 >= r1) return;
  FastForward::MatmulsRan& ran = j.ran[who].ran;
  const uint64_t tiles0 = kernels::TileGemmsOnThisThread();
  MatRows(j, m, r0, r1, ran);
  if (j.swiglu) MatRows(j, 1, r0, r1, ran);
  ran.tile_gemms += kernels::TileGemmsOnThisThread() - tiles0;
  if (!j.swiglu) return;
  for (int64_t t = 0; t < j.n; ++t) {
    float* g = j.y[0] + t * rows + r0;
    j.k->swiglu(g, j.y[1] + t * rows + r0, r1 - r0, g);
  }
}

struct AttUnits {
  const struct AttJob* job;
  int64_t units;
};

struct AttJob {
  const KernelTable* k;
  const ModelConfig* c;
  const float* q;
  float* out;
  float* att;
  int64_t att_stride;
  const kernels::KvInt8Kernels* k8;
  const std::byte* kc;  // layer base of K
  const std::byte* vc;
  KvType type;
  int64_t ld;     // row stride, bytes
  int64_t group;  // INT8 scale group
  int64_t n;
  int32_t pos0;
};

// Unit u of `units` (a contiguous range of the n x n_heads (token, head) pairs); `who`
// picks the participant's scratch row of att.
void RunAttUnit(const AttJob& j, int64_t u, int64_t units, int who) {
  const ModelConfig& c = *j.c;
  const int64_t hd = c.head_dim, kvd = c.kv_dim(), qd = c.q_dim();
  const int64_t total = j.n * c.n_heads;
  const int64_t a = total * u / units, e = total * (u + 1) / units;
  float* att = j.att + j.att_stride * who;
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  const size_t esz = j.type == KvType::kF16 ? 2 : 4;
  for (int64_t w = a; w < e; ++w) {
    const int64_t t = w / c.n_heads, h = w % c.n_heads;
    const int64_t nt = j.pos0 + t + 1;
    const int64_t off = (h / c.gqa_group()) * hd;
    const float* q = j.q + t * qd + h * hd;
    float* out = j.out + t * qd + h * hd;
    if (j.type == KvType::kInt8) {
      // Scales follow the kv_dim int8 values of each row; this head's start at off / group.
      const auto* kq = reinterpret_cast<const int8_t*>(j.kc) + off;
      const auto* vq = reinterpret_cast<const int8_t*>(j.vc) + off;
      const auto* ks = reinterpret_cast<const float*>(j.kc + kvd) + off / j.group;
      const auto* vs = reinterpret_cast<const float*>(j.vc + kvd) + off / j.group;
      j.k8->scores(q, kq, ks, j.ld, hd, j.group, nt, scale, att);
      j.k->softmax(att, nt);
      j.k8->values(att, vq, vs, j.ld, hd, j.group, nt, out);
      continue;
    }
    const std::byte* kb = j.kc + static_cast<size_t>(off) * esz;
    const std::byte* vb = j.vc + static_cast<size_t>(off) * esz;
    if (j.type == KvType::kF16) {
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

int32_t KvCacheView::Int8Group(const ModelConfig& c) { return kernels::KvInt8Group(c.head_dim); }

uint64_t KvCacheView::RowBytes(const ModelConfig& c, KvType type) {
  const uint64_t kvd = static_cast<uint64_t>(c.kv_dim());
  if (type == KvType::kInt8) {
    const int32_t g = Int8Group(c);
    return g > 0 ? static_cast<uint64_t>(kernels::KvInt8RowBytes(c.kv_dim(), g)) : 2 * kvd;
  }
  return (type == KvType::kF32 ? 4 : 2) * kvd;
}

uint64_t KvCacheView::Bytes(const ModelConfig& c, KvType type, int32_t ctx) {
  return 2 * RowBytes(c, type) * static_cast<uint64_t>(c.n_layers) * static_cast<uint64_t>(ctx);
}

uint64_t FastForward::WorkspaceBytes(const ModelConfig& c, int32_t max_tokens, int32_t ctx,
                                     int participants, size_t align) {
  const uint64_t n = static_cast<uint64_t>(std::max(max_tokens, 1));
  const uint64_t max_k = static_cast<uint64_t>(std::max({c.dim, c.q_dim(), c.ffn_dim}));
  const uint64_t f = sizeof(float);
  const uint64_t sizes[] = {
      n * c.dim * f,
      n * c.dim * f,
      n * c.q_dim() * f,
      n * c.kv_dim() * f,
      n * c.kv_dim() * f,
      n * c.q_dim() * f,
      n * c.ffn_dim * f,
      n * c.ffn_dim * f,
      n * static_cast<uint64_t>(kernels::ActQ16ABlocks(static_cast<int64_t>(max_k))) *
          sizeof(BlockQ16A),
      n * static_cast<uint64_t>(kernels::Groups(static_cast<int64_t>(max_k))) * sizeof(BlockQ8A),
      static_cast<uint64_t>(participants) * AlignUp(static_cast<uint64_t>(ctx) * f, align),
      static_cast<uint64_t>(c.vocab_size) * f,
      static_cast<uint64_t>(ctx) * (c.head_dim / 2) * f,
      static_cast<uint64_t>(ctx) * (c.head_dim / 2) * f};
  uint64_t total = 0;
  for (uint64_t s : sizes) total += AlignUp(s, align);
  return total;
}

FastForward::MatmulsRan FastForward::TakeMatmulsRan() {
  MatmulsRan sum;
  for (RanNotes& c : ran_) {
    sum.gemv_tiers |= c.ran.gemv_tiers;
    sum.gemm_tiers |= c.ran.gemm_tiers;
    sum.tile_gemms += c.ran.tile_gemms;
    c.ran = MatmulsRan{};
  }
  return sum;
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
        (c.qkv_bias &&
         (!F32Vector(L.attn_q_bias) || !F32Vector(L.attn_k_bias) || !F32Vector(L.attn_v_bias)))) {
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
  ran_.assign(static_cast<size_t>(std::max(participants, 1)), RanNotes{});
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
  b_.a16 =
      reinterpret_cast<BlockQ16A*>(take(n * kernels::ActQ16ABlocks(max_k_) * sizeof(BlockQ16A)));
  b_.aq = reinterpret_cast<BlockQ8A*>(take(n * kernels::Groups(max_k_) * sizeof(BlockQ8A)));
  b_.att = reinterpret_cast<float*>(take(static_cast<uint64_t>(participants) * att_stride_ * f));
  b_.logits = reinterpret_cast<float*>(take(static_cast<uint64_t>(c.vocab_size) * f));
  const int64_t half = c.head_dim / 2;
  b_.rope_cos = reinterpret_cast<float*>(take(static_cast<uint64_t>(ctx) * half * f));
  b_.rope_sin = reinterpret_cast<float*>(take(static_cast<uint64_t>(ctx) * half * f));
  // Same table as Session (reference): angle pos * theta^(-2i / head_dim), in float.
  for (int64_t pos = 0; pos < ctx; ++pos) {
    for (int64_t i = 0; i < half; ++i) {
      const float freq =
          1.0f / powf(c.rope_theta, static_cast<float>(2 * i) / static_cast<float>(c.head_dim));
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
      BlockQ16A* out = b_.a16 + t * kernels::ActQ16ABlocks(cols);
      if (norm)
        kernels::RmsNormToQ16A(k, xt, norm, cols, eps, out);
      else
        kernels::QuantizeActQ16A(k, xt, cols, out);
    } else {
      BlockQ8A* out = b_.aq + t * kernels::Groups(cols);
      if (norm)
        kernels::RmsNormToQ8A(k, xt, norm, cols, eps, out);
      else
        kernels::QuantizeActQ8A(k, xt, cols, out);
    }
  }
}

void FastForward::MatMuls(const PackedMatrix* const* w, float* const* y, int count, int64_t n,
                          ThreadPool& pool, int threads, bool swiglu) const {
  // Several pieces per participant: a slow or preempted thread does fewer of them (the
  // pool hands out units dynamically); pieces stay whole 8-row blocks.
  int64_t min_blocks = kernels::RowBlocks(w[0]->rows);
  for (int m = 1; m < count; ++m) min_blocks = std::min(min_blocks, kernels::RowBlocks(w[m]->rows));
  const int64_t pieces = std::clamp<int64_t>(threads * kPiecesPerThread, 1, min_blocks);
  MatJob job{&kernels::ActiveKernels(), w, y, count, n, b_.a16, b_.aq, swiglu, pieces, ran_.data()};
  const int64_t mats = swiglu ? 1 : count;
  pool.RunUnits(&RunMatUnit, &job, mats * pieces, threads);
}

void FastForward::StoreKv(int32_t layer, int64_t n, int32_t pos0, const KvCacheView& kv) const {
  const ModelConfig& c = model_->config();
  const int64_t kvd = c.kv_dim();
  const KernelTable& k = kernels::ActiveKernels();
  if (kv.type == KvType::kInt8) {
    const int64_t g = KvCacheView::Int8Group(c);
    const size_t rb = KvCacheView::RowBytes(c, KvType::kInt8);
    for (int64_t t = 0; t < n; ++t) {
      const size_t off = (static_cast<size_t>(layer) * kv.ctx + static_cast<size_t>(pos0 + t)) * rb;
      auto* kr = static_cast<std::byte*>(kv.k) + off;
      auto* vr = static_cast<std::byte*>(kv.v) + off;
      kernels::QuantizeKvInt8(b_.k + t * kvd, kvd, g, reinterpret_cast<int8_t*>(kr),
                              reinterpret_cast<float*>(kr + kvd));
      kernels::QuantizeKvInt8(b_.v + t * kvd, kvd, g, reinterpret_cast<int8_t*>(vr),
                              reinterpret_cast<float*>(vr + kvd));
    }
    return;
  }
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
  const int64_t ld = static_cast<int64_t>(KvCacheView::RowBytes(c, kv.type));
  const size_t base = static_cast<size_t>(layer) * kv.ctx * static_cast<size_t>(ld);
  AttJob job{&kernels::ActiveKernels(),
             &c,
             b_.q,
             b_.att_out,
             b_.att,
             att_stride_,
             &kernels::ActiveKvInt8Kernels(),
             static_cast<const std::byte*>(kv.k) + base,
             static_cast<const std::byte*>(kv.v) + base,
             kv.type,
             ld,
             KvCacheView::Int8Group(c),
             n,
             pos0};
  // Units handed out dynamically (ThreadPool::RunUnits), several per participant.
  const int n_part = std::min(threads, participants_);
  AttUnits units{&job, std::clamp<int64_t>(n * c.n_heads, 1, int64_t{4} * n_part)};
  pool.RunUnits(
      [](void* ctx, int64_t u, int who) {
        const AttUnits& a = *static_cast<const AttUnits*>(ctx);
        RunAttUnit(*a.job, u, a.units, who);
      },
      &units, units.units, n_part);
}

Result<void> FastForward::CheckChunk(std::span<const TokenId> tokens, int32_t pos0,
                                     const KvCacheView& kv) const {
  const ModelConfig& c = model_->config();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0 || n > max_tokens_) {
    return MakeError(ErrorCode::kInvalidArgument, "fast forward: bad chunk size");
  }
  if (pos0 < 0 || pos0 + n > kv.ctx || kv.ctx > ctx_) {
    return MakeError(ErrorCode::kInvalidArgument, "fast forward: context/KV mismatch");
  }
  if (kv.type == KvType::kInt8 && KvCacheView::Int8Group(c) == 0) {
    return MakeError(ErrorCode::kUnsupported, "fast forward: INT8 KV needs head_dim % 4 == 0");
  }
  for (TokenId id : tokens) {
    if (id < 0 || id >= c.vocab_size) {
      return MakeError(ErrorCode::kInvalidArgument, "fast forward: token id out of range");
    }
  }
  return {};
}

void FastForward::ProjectQkv(const LayerWeights& L, const PackedLayer& P, int64_t n, int32_t pos0,
                             PackedPrecision p, bool dropped, ThreadPool& pool, int threads) const {
  const ModelConfig& c = model_->config();
  const int64_t dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim(), half = c.head_dim / 2;
  const bool neox = c.rope_type == RopeType::kNeox;
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
}

void FastForward::AttendAndAdd(int32_t layer, const PackedLayer& P, int64_t n, int32_t pos0,
                               const KvCacheView& kv, PackedPrecision p, ThreadPool& pool,
                               int threads) const {
  const ModelConfig& c = model_->config();
  const int64_t dim = c.dim, qd = c.q_dim();
  Attention(layer, n, pos0, kv, pool, threads);
  PrepareAct(b_.att_out, n, qd, nullptr, p);
  {
    const PackedMatrix* ws[1] = {&P.o};
    float* ys[1] = {b_.y};
    MatMuls(ws, ys, 1, n, pool, threads);
  }
  for (int64_t i = 0; i < n * dim; ++i) b_.x[i] += b_.y[i];
}

void FastForward::FeedForwardAndAdd(const LayerWeights& L, const PackedLayer& P, int64_t n,
                                    PackedPrecision p, ThreadPool& pool, int threads) const {
  const ModelConfig& c = model_->config();
  const int64_t dim = c.dim;
  PrepareAct(b_.x, n, dim, L.ffn_norm.F32Row(0), p);
  {
    // SwiGLU runs inside the dispatch on each participant's rows (hg = silu(hg) * hu);
    // only the activation format conversion stays serial.
    const PackedMatrix* ws[2] = {&P.gate, &P.up};
    float* ys[2] = {b_.hg, b_.hu};
    MatMuls(ws, ys, 2, n, pool, threads, /*swiglu=*/true);
  }
  PrepareAct(b_.hg, n, c.ffn_dim, nullptr, p);
  {
    const PackedMatrix* ws[1] = {&P.down};
    float* ys[1] = {b_.y};
    MatMuls(ws, ys, 1, n, pool, threads);
  }
  for (int64_t i = 0; i < n * dim; ++i) b_.x[i] += b_.y[i];
}

Result<void> FastForward::RunBlocks(std::span<const TokenId> tokens, int32_t pos0,
                                    const KvCacheView& kv, PackedPrecision p,
                                    const uint8_t* drop_mask, ThreadPool& pool, int threads) {
  if (auto ok = CheckChunk(tokens, pos0, kv); !ok) return std::unexpected(ok.error());
  const ModelConfig& c = model_->config();
  const ModelWeights& w = model_->weights();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int pi = PrecisionIndex(p);
  const int64_t dim = c.dim;
  for (int64_t t = 0; t < n; ++t) w.token_embd.ReadRow(tokens[t], b_.x + t * dim);
  const PagingAdvisor* prefetch = prefetch_[pi];
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const PackedLayer& P = packed_->layers[pi][static_cast<size_t>(l)];
    // One madvise per layer; a refusal only costs speed: counted (Engine::Counters).
    if (prefetch != nullptr && l + 1 < prefetch->num_layers()) {
      ++prefetch_calls_;
      if (!prefetch->PrefetchLayer(l + 1)) ++prefetch_failures_;
    }
    // A dropped block still projects K and V of its input (the KV cache stays complete,
    // so lowering the drop level later needs no recomputation; docs/memory.md).
    const bool dropped = drop_mask != nullptr && drop_mask[l] != 0;
    ProjectQkv(L, P, n, pos0, p, dropped, pool, threads);
    StoreKv(l, n, pos0, kv);
    if (dropped) continue;
    AttendAndAdd(l, P, n, pos0, kv, p, pool, threads);
    FeedForwardAndAdd(L, P, n, p, pool, threads);
  }
  return {};
}

Result<float*> FastForward::Run(std::span<const TokenId> tokens, int32_t pos0,
                                const KvCacheView& kv, PackedPrecision p, const uint8_t* drop_mask,
                                ThreadPool& pool, int threads) {
  threads = std::clamp(threads, 1, participants_);
  if (auto ok = RunBlocks(tokens, pos0, kv, p, drop_mask, pool, threads); !ok) {
    return std::unexpected(ok.error());
  }
  const ModelWeights& w = model_->weights();
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t dim = model_->config().dim;
  PrepareAct(b_.x + (n - 1) * dim, 1, dim, w.output_norm.F32Row(0), p);
  const PackedMatrix* ws[1] = {&packed_->classifier[PrecisionIndex(p)]};
  float* ys[1] = {b_.logits};
  MatMuls(ws, ys, 1, 1, pool, threads);
  return b_.logits;
}

Result<void> FastForward::RunAllLogits(std::span<const TokenId> tokens, int32_t pos0,
                                       const KvCacheView& kv, PackedPrecision p,
                                       const uint8_t* drop_mask, ThreadPool& pool, int threads,
                                       std::span<float> logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t vocab = model_->config().vocab_size;
  if (static_cast<int64_t>(logits.size()) < n * vocab) {
    return MakeError(ErrorCode::kInvalidArgument, "fast forward: logits buffer too small");
  }
  threads = std::clamp(threads, 1, participants_);
  if (auto ok = RunBlocks(tokens, pos0, kv, p, drop_mask, pool, threads); !ok) return ok;
  const int64_t dim = model_->config().dim;
  PrepareAct(b_.x, n, dim, model_->weights().output_norm.F32Row(0), p);
  const PackedMatrix* ws[1] = {&packed_->classifier[PrecisionIndex(p)]};
  float* ys[1] = {logits.data()};
  MatMuls(ws, ys, 1, n, pool, threads);
  return {};
}

}  // namespace ari::runtime
