#include "runtime/eval/perplexity.h"

#include <math.h>

#include <algorithm>
#include <memory>
#include <string>

#include "runtime/eval/block_loop.h"
#include "runtime/eval/packed_scorer.h"
#include "runtime/model/forward.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"
#include "runtime/model/session.h"

namespace ari::runtime {
namespace {

// Adds the predictions of one window's logits [n, vocab] (row t predicts tokens[t + 1]).
void Score(std::span<const float> logits, std::span<const TokenId> tokens, int64_t vocab,
           double& nll_sum, PerplexityResult& r) {
  for (size_t t = 0; t + 1 < tokens.size(); ++t) {
    const float* row = logits.data() + t * static_cast<size_t>(vocab);
    int64_t best = 0;
    for (int64_t i = 1; i < vocab; ++i) {
      if (row[i] > row[best]) best = i;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < vocab; ++i) sum += exp(static_cast<double>(row[i]) - row[best]);
    const double log_z = static_cast<double>(row[best]) + log(sum);
    nll_sum += log_z - static_cast<double>(row[tokens[t + 1]]);
    r.top1.push_back(static_cast<TokenId>(best));
    ++r.predictions;
  }
}

}  // namespace

namespace {

// Windows of `window` tokens overlapping by one token; `run` returns a window's logits.
template <class RunWindow>
Result<PerplexityResult> ScoreWindows(std::span<const TokenId> tokens, int32_t window,
                                      int64_t vocab, RunWindow&& run) {
  PerplexityResult r;
  r.top1.reserve(tokens.size());
  double nll_sum = 0.0;
  const size_t step = static_cast<size_t>(window) - 1;  // windows overlap by one token
  for (size_t s = 0; s + 1 < tokens.size(); s += step) {
    const auto chunk = tokens.subspan(s, std::min<size_t>(window, tokens.size() - s));
    Result<std::span<const float>> logits = run(chunk);
    if (!logits) return std::unexpected(logits.error());
    Score(*logits, chunk, vocab, nll_sum, r);
  }
  r.mean_nll = nll_sum / static_cast<double>(r.predictions);
  r.perplexity = exp(r.mean_nll);
  return r;
}

Result<void> CheckText(std::span<const TokenId> tokens, int32_t window) {
  if (tokens.size() < 2) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "perplexity: need at least 2 tokens, got " + std::to_string(tokens.size()));
  }
  if (window < 2) return MakeError(ErrorCode::kInvalidArgument, "perplexity: window < 2");
  return {};
}

}  // namespace

Result<PerplexityResult> ComputePerplexity(const Model& model, std::span<const TokenId> tokens,
                                           const PerplexityOptions& opts) {
  const ModelConfig& c = model.config();
  if (auto ok = CheckText(tokens, opts.window); !ok) return std::unexpected(ok.error());
  if (IsPack(model.file())) {
    return MakeError(ErrorCode::kFormat,
                     "perplexity: the model is a pack (no fp32 weights); the reference path "
                     "needs the plain GGUF, a pack is scored by ComputePackedPerplexity");
  }
  const int32_t window = std::min(opts.window, c.context_length);
  const bool own_loop = opts.use_block_loop || !opts.skip_layers.empty();
  std::unique_ptr<BlockLoop> loop;
  std::unique_ptr<Session> session;
  if (own_loop) {
    auto l = BlockLoop::Create(model, window);
    if (!l) return std::unexpected(l.error());
    loop = std::move(*l);
  } else {
    SessionOptions so;
    so.context_length = window;
    so.max_batch = window;
    so.all_logits = true;
    auto s = Session::Create(model, so);
    if (!s) return std::unexpected(s.error());
    session = std::move(*s);
  }
  return ScoreWindows(tokens, window, c.vocab_size,
                      [&](std::span<const TokenId> chunk) -> Result<std::span<const float>> {
                        if (own_loop) return loop->Run(chunk, opts.skip_layers, true);
                        session->Reset();
                        return Forward(*session, chunk);
                      });
}

Result<PerplexityResult> ComputePackedPerplexity(PackedScorer& scorer,
                                                 std::span<const TokenId> tokens,
                                                 kernels::PackedPrecision precision) {
  const int32_t window = scorer.window();
  if (auto ok = CheckText(tokens, window); !ok) return std::unexpected(ok.error());
  return ScoreWindows(tokens, window, scorer.vocab_size(), [&](std::span<const TokenId> chunk) {
    return scorer.Score(chunk, precision);
  });
}

double Top1Agreement(std::span<const TokenId> a, std::span<const TokenId> b) {
  const size_t n = std::min(a.size(), b.size());
  if (n == 0) return 0.0;
  size_t same = 0;
  for (size_t i = 0; i < n; ++i) same += a[i] == b[i] ? 1 : 0;
  return static_cast<double>(same) / static_cast<double>(n);
}

}  // namespace ari::runtime
