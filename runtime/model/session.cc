#include "runtime/model/session.h"

#include <math.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "runtime/model/model.h"

namespace ari::runtime {
namespace {

size_t AlignUp(size_t n) {
  return (n + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

// RoPE table [ctx][head_dim / 2]: pair i of a head turns by pos * theta^(-2i / head_dim) (as
// llama2.c computes it, in float: 1 / powf(theta, 2i / head_dim)).
void FillRopeTable(const ModelConfig& c, size_t ctx, float* cos_out, float* sin_out) {
  const size_t half = static_cast<size_t>(c.head_dim / 2);
  for (size_t pos = 0; pos < ctx; ++pos) {
    for (size_t i = 0; i < half; ++i) {
      const float freq =
          1.0f / powf(c.rope_theta, static_cast<float>(2 * i) / static_cast<float>(c.head_dim));
      const float val = static_cast<float>(pos) * freq;
      cos_out[pos * half + i] = cosf(val);
      sin_out[pos * half + i] = sinf(val);
    }
  }
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Create(const Model& model, const SessionOptions& opts) {
  const ModelConfig& c = model.config();
  if (opts.context_length < 0 || opts.max_batch <= 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "session: context_length must be >= 0 and max_batch > 0");
  }
  std::unique_ptr<Session> s(new Session(model));
  s->ctx_ =
      opts.context_length == 0 ? c.context_length : std::min(opts.context_length, c.context_length);
  s->max_batch_ = std::min(opts.max_batch, s->ctx_);
  s->kv_dim_ = c.kv_dim();
  s->vocab_ = c.vocab_size;
  s->all_logits_ = opts.all_logits;

  const size_t n = static_cast<size_t>(s->max_batch_);
  const size_t ctx = static_cast<size_t>(s->ctx_);
  const size_t dim = static_cast<size_t>(c.dim), q_dim = static_cast<size_t>(c.q_dim());
  const size_t kv_dim = static_cast<size_t>(c.kv_dim()), ffn = static_cast<size_t>(c.ffn_dim);
  const size_t half = static_cast<size_t>(c.head_dim / 2);
  const size_t max_cols = static_cast<size_t>(model.weights().MaxCols());
  const size_t vec = std::max({dim, q_dim, ffn, kv_dim});
  const size_t kv_floats = static_cast<size_t>(c.n_layers) * ctx * kv_dim;

  // Element counts of every buffer, in carving order.
  const size_t counts[] = {kv_floats,  kv_floats,
                           n * dim,    n * dim,
                           n * q_dim,  n * q_dim,
                           n * kv_dim, n * kv_dim,
                           n * ffn,    n * ffn,
                           ctx,        max_cols,
                           vec,        (opts.all_logits ? n : 1) * s->vocab_,
                           ctx * half, ctx * half};
  size_t total = 0;
  for (size_t cnt : counts) {
    if (cnt > (std::numeric_limits<size_t>::max() / 8) / sizeof(float)) {
      return MakeError(ErrorCode::kOutOfMemory, "session: buffer size overflows");
    }
    total += AlignUp(cnt * sizeof(float));
  }
  s->arena_ = static_cast<std::byte*>(
      ::operator new(total, std::align_val_t(kBufferAlignment), std::nothrow));
  if (s->arena_ == nullptr) {
    return MakeError(ErrorCode::kOutOfMemory,
                     "session: cannot allocate " + std::to_string(total) + " bytes");
  }
  s->arena_bytes_ = total;
  std::memset(s->arena_, 0, total);
  float* ptrs[std::size(counts)];
  size_t off = 0;
  for (size_t i = 0; i < std::size(counts); ++i) {
    ptrs[i] = reinterpret_cast<float*>(s->arena_ + off);
    off += AlignUp(counts[i] * sizeof(float));
  }
  s->key_cache_ = ptrs[0];
  s->value_cache_ = ptrs[1];
  s->buf_ = Buffers{.x = ptrs[2],
                    .xb = ptrs[3],
                    .xb2 = ptrs[4],
                    .q = ptrs[5],
                    .k = ptrs[6],
                    .v = ptrs[7],
                    .hb = ptrs[8],
                    .hb2 = ptrs[9],
                    .att = ptrs[10],
                    .row = ptrs[11],
                    .vec = ptrs[12],
                    .logits = ptrs[13],
                    .rope_cos = ptrs[14],
                    .rope_sin = ptrs[15]};

  FillRopeTable(c, ctx, s->buf_.rope_cos, s->buf_.rope_sin);
  return s;
}

Session::~Session() {
  if (arena_ != nullptr) ::operator delete(arena_, std::align_val_t(kBufferAlignment));
}

Result<void> Session::Truncate(int32_t n) {
  if (n < 0 || n > position_) {
    return MakeError(ErrorCode::kInvalidArgument, "session: cannot truncate to " +
                                                      std::to_string(n) + " (position " +
                                                      std::to_string(position_) + ")");
  }
  position_ = n;
  n_logits_ = 0;
  return {};
}

std::span<const float> Session::logits() const {
  return {buf_.logits, static_cast<size_t>(n_logits_) * static_cast<size_t>(vocab_)};
}

std::span<float> Session::mutable_last_logits() {
  if (n_logits_ == 0) return {};
  return {buf_.logits + static_cast<size_t>(n_logits_ - 1) * static_cast<size_t>(vocab_),
          static_cast<size_t>(vocab_)};
}

}  // namespace ari::runtime
