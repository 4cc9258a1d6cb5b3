#include "runtime/eval/packed_scorer.h"

#include <algorithm>
#include <new>

#include "runtime/core/thread_pool.h"
#include "runtime/engine/fast_forward.h"
#include "runtime/eval/layer_calibration.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"

namespace ari::runtime {

namespace {
constexpr size_t kAlign = 128;

struct AlignedDelete {
  void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t(kAlign)); }
};
using AlignedBytes = std::unique_ptr<std::byte, AlignedDelete>;

AlignedBytes AllocAligned(uint64_t n) {
  return AlignedBytes(static_cast<std::byte*>(::operator new(n, std::align_val_t(kAlign))));
}
}  // namespace

struct PackedScorer::State {
  const Model* model = nullptr;
  PackedWeights packed;
  std::unique_ptr<ThreadPool> pool;
  AlignedBytes workspace, kv_bytes;
  FastForward ff;
  KvCacheView kv;
  std::vector<float> logits;       // [window, vocab]
  std::vector<uint8_t> drop_mask;  // [n_layers]
  std::vector<int32_t> dropped;    // blocks skipped, ascending (capacity n_layers)
  int threads = 1;
};

PackedScorer::~PackedScorer() = default;

Result<std::unique_ptr<PackedScorer>> PackedScorer::Create(const Model& model,
                                                           const ScorerOptions& opts) {
  if (!IsPack(model.file())) {
    return MakeError(ErrorCode::kFormat,
                     "packed scorer: the model is a plain GGUF, not a pack (make one with "
                     "ari-pack, or score the plain file on the fp32 reference path)");
  }
  const ModelConfig& c = model.config();
  if (opts.window < 1 || opts.threads < 1) {
    return MakeError(ErrorCode::kInvalidArgument, "packed scorer: window and threads >= 1");
  }
  if (opts.kv_type == KvType::kInt8 && KvCacheView::Int8Group(c) == 0) {
    return MakeError(ErrorCode::kUnsupported, "packed scorer: INT8 KV needs head_dim % 4 == 0");
  }
  auto packed = BindPack(model.file(), c);
  if (!packed) return std::unexpected(packed.error());
  std::unique_ptr<PackedScorer> sc(new PackedScorer());
  sc->s_ = std::make_unique<State>();
  State& s = *sc->s_;
  s.model = &model;
  s.packed = std::move(*packed);
  s.threads = opts.threads;
  const int32_t window =
      c.context_length > 0 ? std::min(opts.window, c.context_length) : opts.window;
  sc->window_ = window;
  auto pool = ThreadPool::Create(opts.threads);
  if (!pool) return std::unexpected(pool.error());
  s.pool = std::move(*pool);
  const uint64_t ws = FastForward::WorkspaceBytes(c, window, window, opts.threads, kAlign);
  const uint64_t kvb = KvCacheView::Bytes(c, opts.kv_type, window);
  s.workspace = AllocAligned(ws);
  s.kv_bytes = AllocAligned(kvb);
  if (auto r =
          s.ff.Init(model, s.packed, s.workspace.get(), ws, window, window, opts.threads, kAlign);
      !r) {
    return std::unexpected(r.error());
  }
  s.kv = KvCacheView{opts.kv_type, s.kv_bytes.get(), s.kv_bytes.get() + kvb / 2, window};
  s.logits.resize(static_cast<size_t>(window) * static_cast<size_t>(c.vocab_size));
  s.drop_mask.assign(static_cast<size_t>(c.n_layers), 0);
  s.dropped.reserve(static_cast<size_t>(c.n_layers));
  return sc;
}

int32_t PackedScorer::max_drop_level() const {
  const int32_t n = s_->model->config().n_layers;
  return s_->packed.layer_importance.empty() ? 0 : std::max(0, n - 2);
}

int64_t PackedScorer::vocab_size() const { return s_->model->config().vocab_size; }

Result<std::span<const int32_t>> PackedScorer::SetDropLevel(int32_t level) {
  State& s = *s_;
  std::fill(s.drop_mask.begin(), s.drop_mask.end(), uint8_t{0});
  s.dropped.clear();
  if (level <= 0) return std::span<const int32_t>(s.dropped);
  if (s.packed.layer_importance.empty()) {
    return MakeError(ErrorCode::kUnsupported,
                     "packed scorer: layer drop needs a pack with layer importance (ari-pack "
                     "--calibrate TEXT)");
  }
  s.dropped = DropOrder(s.packed.layer_importance, level);
  for (int32_t l : s.dropped) s.drop_mask[static_cast<size_t>(l)] = 1;
  return std::span<const int32_t>(s.dropped);
}

Result<std::span<const float>> PackedScorer::Score(std::span<const TokenId> tokens,
                                                   kernels::PackedPrecision precision) {
  State& s = *s_;
  const size_t n = tokens.size();
  if (auto r = s.ff.RunAllLogits(tokens, 0, s.kv, precision, s.drop_mask.data(), *s.pool, s.threads,
                                 s.logits);
      !r) {
    return std::unexpected(r.error());
  }
  const size_t vocab = static_cast<size_t>(s.model->config().vocab_size);
  return std::span<const float>(s.logits.data(), n * vocab);
}

}  // namespace ari::runtime
