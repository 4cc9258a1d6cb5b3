#include "runtime/eval/layer_calibration.h"

#include <math.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "runtime/eval/block_loop.h"
#include "runtime/model/model.h"

namespace ari::runtime {

Result<std::vector<float>> CalibrateLayerImportance(const Model& model,
                                                    std::span<const TokenId> text_tokens,
                                                    const CalibrationOptions& opts) {
  const ModelConfig& c = model.config();
  if (text_tokens.size() < 2) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "calibration: need at least 2 tokens of text, got " + std::to_string(text_tokens.size()));
  }
  if (opts.window < 2) {
    return MakeError(ErrorCode::kInvalidArgument, "calibration: window must be >= 2");
  }
  auto loop = BlockLoop::Create(model, opts.window);
  if (!loop) return std::unexpected(loop.error());
  const size_t window = static_cast<size_t>((*loop)->max_tokens());
  const int64_t dim = c.dim;
  std::vector<double> cos_sum(static_cast<size_t>(c.n_layers), 0.0);
  int64_t rows = 0;
  auto observe = [&](int32_t layer, const float* in, const float* out, int64_t n) {
    double total = 0.0;
    for (int64_t t = 0; t < n; ++t) {
      const float* a = in + t * dim;
      const float* b = out + t * dim;
      double dot = 0.0, na = 0.0, nb = 0.0;
      for (int64_t i = 0; i < dim; ++i) {
        dot += static_cast<double>(a[i]) * b[i];
        na += static_cast<double>(a[i]) * a[i];
        nb += static_cast<double>(b[i]) * b[i];
      }
      // A zero vector has no direction: count it as unchanged only if both are zero.
      const double denom = sqrt(na) * sqrt(nb);
      total += denom > 0.0 ? std::clamp(dot / denom, -1.0, 1.0) : (na == nb ? 1.0 : 0.0);
    }
    cos_sum[static_cast<size_t>(layer)] += total;
  };
  for (size_t s = 0; s + 1 < text_tokens.size(); s += window) {
    const auto chunk = text_tokens.subspan(s, std::min(window, text_tokens.size() - s));
    if (chunk.size() < 2) break;
    auto r = (*loop)->Run(chunk, {}, /*want_logits=*/false, observe);
    if (!r) return std::unexpected(r.error());
    rows += static_cast<int64_t>(chunk.size());
  }
  std::vector<float> importance(static_cast<size_t>(c.n_layers));
  for (size_t l = 0; l < importance.size(); ++l) {
    const double mean_cos = cos_sum[l] / static_cast<double>(rows);
    importance[l] = static_cast<float>(std::clamp(1.0 - mean_cos, 0.0, 2.0));
  }
  return importance;
}

std::vector<int32_t> DropOrder(std::span<const float> importance, int32_t level) {
  const int32_t n = static_cast<int32_t>(importance.size());
  if (level <= 0 || n <= 2) return {};
  std::vector<int32_t> inner(static_cast<size_t>(n - 2));
  std::iota(inner.begin(), inner.end(), 1);
  std::stable_sort(inner.begin(), inner.end(), [&](int32_t a, int32_t b) {
    const float ia = importance[static_cast<size_t>(a)], ib = importance[static_cast<size_t>(b)];
    // NaN (unknown) sorts last: never dropped before a measured block.
    if (isnan(ia) || isnan(ib)) return !isnan(ia) && isnan(ib);
    return ia < ib;
  });
  inner.resize(static_cast<size_t>(std::min(level, n - 2)));
  std::sort(inner.begin(), inner.end());
  return inner;
}

}  // namespace ari::runtime
