#include "runtime/generate/sampler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "runtime/grammar/token_constraint.h"

namespace ari::runtime {

namespace {

// Stable merge sort by descending prob using caller-provided scratch (no allocation).
// std::stable_sort may allocate, so it cannot be used on the hot path.
template <class T>
void StableSortDescending(T* a, T* tmp, size_t n) {
  // Bottom-up: insertion-sort runs of 16, then merge runs of doubling width.
  constexpr size_t kRun = 16;
  for (size_t lo = 0; lo < n; lo += kRun) {
    size_t hi = std::min(n, lo + kRun);
    for (size_t i = lo + 1; i < hi; ++i) {
      T v = a[i];
      size_t j = i;
      while (j > lo && a[j - 1].prob < v.prob) {  // strict: equal keys keep order
        a[j] = a[j - 1];
        --j;
      }
      a[j] = v;
    }
  }
  T* src = a;
  T* dst = tmp;
  for (size_t width = kRun; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = std::min(n, lo + width);
      size_t hi = std::min(n, lo + 2 * width);
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        // take from the right only when strictly greater: stability
        if (src[j].prob > src[i].prob) {
          dst[k++] = src[j++];
        } else {
          dst[k++] = src[i++];
        }
      }
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    std::swap(src, dst);
  }
  if (src != a) std::copy(src, src + n, a);
}

}  // namespace

Sampler::Sampler(int32_t vocab_size, const SamplingParams& p)
    : vocab_size_(std::max<int32_t>(vocab_size, 0)),
      params_(p),
      rng_(p.seed),
      candidates_(static_cast<size_t>(vocab_size_)),
      merge_tmp_(static_cast<size_t>(vocab_size_)),
      scratch_(static_cast<size_t>(vocab_size_)),
      seen_(static_cast<size_t>(vocab_size_), 0) {}

void Sampler::Reset(uint64_t seed) {
  params_.seed = seed;
  rng_.set_state(seed);
}

void Sampler::SetParams(const SamplingParams& p) {
  params_ = p;
  rng_.set_state(p.seed);
  if (params_.constraint != nullptr) params_.constraint->Reset();
}

void Sampler::ApplyRepeatPenalty(std::span<float> logits, std::span<const TokenId> history) {
  const float penalty = params_.repeat_penalty;
  if (penalty == 1.0f || params_.repeat_last_n == 0 || history.empty()) return;
  size_t n = history.size();
  if (params_.repeat_last_n > 0) n = std::min(n, static_cast<size_t>(params_.repeat_last_n));
  std::span<const TokenId> window = history.last(n);
  for (TokenId t : window) {
    if (t < 0 || t >= vocab_size_ || seen_[static_cast<size_t>(t)]) continue;
    seen_[static_cast<size_t>(t)] = 1;
    float& l = logits[static_cast<size_t>(t)];
    if (l <= 0.0f) {
      l *= penalty;
    } else {
      l /= penalty;
    }
  }
  for (TokenId t : window) {
    if (t >= 0 && t < vocab_size_) seen_[static_cast<size_t>(t)] = 0;
  }
}

void Sampler::ApplyTopK(std::span<float> logits) {
  const int32_t k = params_.top_k;
  if (k <= 0 || k >= vocab_size_) return;
  // Exactly k survivors: ordered by logit descending, ties by lower index.
  for (int32_t i = 0; i < vocab_size_; ++i)
    candidates_[static_cast<size_t>(i)] = {logits[static_cast<size_t>(i)], i};
  auto better = [](const Candidate& a, const Candidate& b) {
    return a.prob > b.prob || (a.prob == b.prob && a.index < b.index);
  };
  std::nth_element(candidates_.begin(), candidates_.begin() + (k - 1), candidates_.end(), better);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < k; ++i)
    scratch_[static_cast<size_t>(i)] = candidates_[static_cast<size_t>(i)].prob;
  std::fill(logits.begin(), logits.end(), kNegInf);
  for (int32_t i = 0; i < k; ++i) {
    logits[static_cast<size_t>(candidates_[static_cast<size_t>(i)].index)] =
        scratch_[static_cast<size_t>(i)];
  }
}

// llama2.c sample_mult: cdf walk over all probabilities, fall back to the last index.
TokenId Sampler::SampleMult(std::span<const float> probs, float coin) const {
  float cdf = 0.0f;
  for (size_t i = 0; i < probs.size(); ++i) {
    cdf += probs[i];
    if (coin < cdf) return static_cast<TokenId>(i);
  }
  return static_cast<TokenId>(probs.size()) - 1;
}

// llama2.c sample_topp, extended by min-p applied to the nucleus.
TokenId Sampler::SampleTopP(std::span<const float> probs, float coin) {
  const int32_t n = vocab_size_;
  const float topp = params_.top_p;
  const float cutoff = (1.0f - topp) / static_cast<float>(n - 1);
  size_t n0 = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (probs[static_cast<size_t>(i)] >= cutoff)
      candidates_[n0++] = {probs[static_cast<size_t>(i)], i};
  }
  if (n0 == 0) return SampleMult(probs, coin);  // cannot happen for valid probabilities
  StableSortDescending(candidates_.data(), merge_tmp_.data(), n0);

  float cumulative = 0.0f;
  size_t last = n0 - 1;
  for (size_t i = 0; i < n0; ++i) {
    cumulative += candidates_[i].prob;
    if (cumulative > topp) {
      last = i;
      break;
    }
  }
  if (params_.min_p > 0.0f) {
    // Candidates are sorted: drop the tail below min_p * max prob; recompute the mass.
    const float threshold = params_.min_p * candidates_[0].prob;
    size_t keep = 1;
    while (keep <= last && candidates_[keep].prob >= threshold) ++keep;
    if (keep - 1 < last) {
      last = keep - 1;
      cumulative = 0.0f;
      for (size_t i = 0; i <= last; ++i) cumulative += candidates_[i].prob;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  for (size_t i = 0; i <= last; ++i) {
    cdf += candidates_[i].prob;
    if (r < cdf) return candidates_[i].index;
  }
  return candidates_[last].index;
}

// Restricted support without top-p (min-p and/or top-k): walk the surviving tokens in
// index order with r = coin * their total mass.
TokenId Sampler::SampleMinPOnly(std::span<const float> probs, float coin) {
  float max_p = 0.0f;
  for (float p : probs) max_p = std::max(max_p, p);
  const float threshold = params_.min_p > 0.0f ? params_.min_p * max_p : 0.0f;
  size_t n0 = 0;
  float total = 0.0f;
  for (int32_t i = 0; i < vocab_size_; ++i) {
    float p = probs[static_cast<size_t>(i)];
    if (p > 0.0f && p >= threshold) {
      candidates_[n0++] = {p, i};
      total += p;
    }
  }
  if (n0 == 0) return SampleMult(probs, coin);
  const float r = coin * total;
  float cdf = 0.0f;
  for (size_t i = 0; i < n0; ++i) {
    cdf += candidates_[i].prob;
    if (r < cdf) return candidates_[i].index;
  }
  return candidates_[n0 - 1].index;
}

TokenId Sampler::Sample(std::span<float> logits, std::span<const TokenId> history) {
  if (vocab_size_ <= 0 || logits.size() != static_cast<size_t>(vocab_size_)) return -1;
  TokenConstraint* c = params_.constraint;
  if (c == nullptr) return SampleUnconstrained(logits, history);
  const auto t0 = std::chrono::steady_clock::now();
  const int32_t allowed_n = c->ApplyMask(logits);
  const auto t1 = std::chrono::steady_clock::now();
  constraint_ns_ += std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  if (allowed_n == 0) return -1;
  TokenId id = SampleUnconstrained(logits, history);
  const std::span<const uint8_t> allowed = c->allowed();
  if (id < 0 || static_cast<size_t>(id) >= allowed.size() ||
      allowed[static_cast<size_t>(id)] == 0) {
    // Only the cdf walk's rounding fallback (the last index) can land here: take the last
    // allowed token instead, as deterministic as the fallback it replaces.
    id = static_cast<TokenId>(allowed.size()) - 1;
    while (id > 0 && allowed[static_cast<size_t>(id)] == 0) --id;
  }
  const auto t2 = std::chrono::steady_clock::now();
  const bool accepted = c->Accept(id);
  constraint_ns_ +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t2)
          .count();
  return accepted ? id : -1;
}

TokenId Sampler::SampleUnconstrained(std::span<float> logits, std::span<const TokenId> history) {
  ApplyRepeatPenalty(logits, history);

  if (!(params_.temperature > 0.0f)) {  // greedy: first maximum wins
    size_t best = 0;
    float best_v = logits[0];
    for (size_t i = 1; i < logits.size(); ++i) {
      if (logits[i] > best_v) {
        best_v = logits[i];
        best = i;
      }
    }
    return static_cast<TokenId>(best);
  }

  ApplyTopK(logits);
  // Temperature (division, as llama2.c) and softmax (max-subtracted, float).
  const float temp = params_.temperature;
  for (float& l : logits) l /= temp;
  float max_v = logits[0];
  for (size_t i = 1; i < logits.size(); ++i) max_v = std::max(max_v, logits[i]);
  float sum = 0.0f;
  for (float& l : logits) {
    l = std::exp(l - max_v);
    sum += l;
  }
  for (float& l : logits) l /= sum;

  const float coin = rng_.NextF32();
  const bool top_p_on = params_.top_p > 0.0f && params_.top_p < 1.0f;
  const bool top_k_on = params_.top_k > 0 && params_.top_k < vocab_size_;
  const bool min_p_on = params_.min_p > 0.0f;
  if (top_p_on) return SampleTopP(logits, coin);
  if (top_k_on || min_p_on) return SampleMinPOnly(logits, coin);
  return SampleMult(logits, coin);
}

}  // namespace ari::runtime
