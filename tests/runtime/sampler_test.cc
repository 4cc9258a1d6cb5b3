#include "runtime/generate/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/common/counting_allocator.h"

namespace ari::runtime {
namespace {

// ---- Independent re-statement of llama2.c's sampling (run.c), used as the oracle. ----
struct RefRng {
  unsigned long long s;
  unsigned int U32() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return (unsigned int)((s * 0x2545F4914F6CDD1Dull) >> 32);
  }
  float F32() { return (U32() >> 8) / 16777216.0f; }
};

struct RefProbIndex {
  float prob;
  int index;
};

int RefCompare(const void* a, const void* b) {
  const auto* x = static_cast<const RefProbIndex*>(a);
  const auto* y = static_cast<const RefProbIndex*>(b);
  if (x->prob > y->prob) return -1;
  if (x->prob < y->prob) return 1;
  return 0;
}

// temperature > 0 path of llama2.c: logits /= t; softmax; coin; mult or topp.
int RefSample(std::vector<float> x, float temperature, float topp, RefRng& rng) {
  const int n = static_cast<int>(x.size());
  for (float& v : x) v /= temperature;
  float max_val = x[0];
  for (int i = 1; i < n; i++)
    if (x[i] > max_val) max_val = x[i];
  float sum = 0.0f;
  for (int i = 0; i < n; i++) {
    x[i] = expf(x[i] - max_val);
    sum += x[i];
  }
  for (int i = 0; i < n; i++) x[i] /= sum;
  float coin = rng.F32();
  if (topp <= 0 || topp >= 1) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
      cdf += x[i];
      if (coin < cdf) return i;
    }
    return n - 1;
  }
  std::vector<RefProbIndex> pi(x.size());
  int n0 = 0;
  const float cutoff = (1.0f - topp) / (n - 1);
  for (int i = 0; i < n; i++) {
    if (x[i] >= cutoff) pi[n0++] = {x[i], i};
  }
  qsort(pi.data(), n0, sizeof(RefProbIndex), RefCompare);
  float cumulative = 0.0f;
  int last_idx = n0 - 1;
  for (int i = 0; i < n0; i++) {
    cumulative += pi[i].prob;
    if (cumulative > topp) {
      last_idx = i;
      break;
    }
  }
  float r = coin * cumulative;
  float cdf = 0.0f;
  for (int i = 0; i <= last_idx; i++) {
    cdf += pi[i].prob;
    if (r < cdf) return pi[i].index;
  }
  return pi[last_idx].index;
}

std::vector<float> RandomLogits(int n, uint64_t seed, float scale, bool quantize_ties) {
  RefRng r{seed};
  std::vector<float> v(n);
  for (float& x : v) {
    x = (r.F32() * 2.0f - 1.0f) * scale;
    if (quantize_ties) x = std::round(x * 2.0f) / 2.0f;  // many exact ties
  }
  return v;
}

TEST(XorShiftRng, MatchesLlama2cFormula) {
  // Hard-coded values derived from the formula (xorshift64*, seed 133742 and 42).
  XorShiftRng rng(133742);
  EXPECT_EQ(rng.NextU32(), 3033531262u);
  EXPECT_EQ(rng.NextU32(), 2674377904u);
  EXPECT_EQ(rng.NextU32(), 2312864567u);
  EXPECT_EQ(rng.state(), 0x7be83b15d11e7a97ull);
  XorShiftRng f(133742);
  EXPECT_FLOAT_EQ(f.NextF32(), 0.7062990069389343f);
  EXPECT_FLOAT_EQ(f.NextF32(), 0.6226770877838135f);
  XorShiftRng r42(42);
  EXPECT_EQ(r42.NextU32(), 1456360119u);
  EXPECT_EQ(r42.NextU32(), 3359763283u);
  EXPECT_EQ(r42.NextU32(), 3393612768u);
  // Long run against the independent re-statement.
  XorShiftRng a(987654321);
  RefRng b{987654321};
  for (int i = 0; i < 10000; ++i) {
    ASSERT_EQ(a.NextU32(), b.U32()) << i;
    ASSERT_EQ(a.NextF32(), b.F32()) << i;
  }
}

TEST(Sampler, GreedyFirstMaxWins) {
  Sampler s(6, SamplingParams{});
  std::vector<float> l = {0.1f, 3.0f, -2.0f, 3.0f, 1.0f, 2.9f};
  EXPECT_EQ(s.Sample(l, {}), 1);
  std::vector<float> neg = {-5.0f, -4.0f, -4.0f, -9.0f, -4.5f, -7.0f};
  EXPECT_EQ(s.Sample(neg, {}), 1);
  std::vector<float> wrong(5, 0.0f);
  EXPECT_EQ(s.Sample(wrong, {}), -1);
}

TEST(Sampler, MatchesLlama2cTemperatureAndTopP) {
  const int n = 512;
  struct Case {
    float temp, topp;
    bool ties;
  };
  for (Case c : {Case{1.0f, 0.9f, false}, Case{0.8f, 0.5f, false}, Case{1.0f, 1.0f, false},
                 Case{1.3f, 0.0f, false}, Case{1.0f, 0.9f, true}, Case{0.7f, 0.95f, true},
                 Case{2.0f, 0.3f, true}}) {
    SamplingParams p;
    p.temperature = c.temp;
    p.top_p = c.topp;
    p.seed = 133742;
    Sampler s(n, p);
    RefRng ref{133742};
    for (int step = 0; step < 300; ++step) {
      auto logits = RandomLogits(n, 1000 + step, 6.0f, c.ties);
      int want = RefSample(logits, c.temp, c.topp, ref);
      int got = s.Sample(logits, {});
      ASSERT_EQ(got, want) << "temp " << c.temp << " topp " << c.topp << " ties " << c.ties
                           << " step " << step;
    }
  }
}

std::vector<int> Histogram(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<int> h(logits.size(), 0);
  for (int i = 0; i < draws; ++i) {
    auto l = logits;
    int t = s.Sample(l, {});
    EXPECT_GE(t, 0);
    if (t >= 0) ++h[static_cast<size_t>(t)];
  }
  return h;
}

// Logits with known softmax: probabilities 0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02.
std::vector<float> KnownLogits() {
  std::vector<float> p = {0.02f, 0.4f, 0.1f, 0.25f, 0.03f, 0.15f, 0.05f};
  std::vector<float> l;
  l.reserve(p.size());
  for (float x : p) l.push_back(std::log(x));
  return l;
}

TEST(Sampler, FullDistributionFrequencies) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  Sampler s(7, p);
  const int draws = 40000;
  auto h = Histogram(s, KnownLogits(), draws);
  std::vector<float> want = {0.02f, 0.4f, 0.1f, 0.25f, 0.03f, 0.15f, 0.05f};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(h[i] / double(draws), want[i], 0.012) << i;
  }
}

TEST(Sampler, TopKRestrictsSupport) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  p.seed = 11;
  Sampler s(7, p);
  const int draws = 20000;
  auto h = Histogram(s, KnownLogits(), draws);
  for (int i : {0, 2, 4, 5, 6}) EXPECT_EQ(h[i], 0) << i;
  // Renormalised: 0.4/0.65 and 0.25/0.65.
  EXPECT_NEAR(h[1] / double(draws), 0.4 / 0.65, 0.015);
  EXPECT_NEAR(h[3] / double(draws), 0.25 / 0.65, 0.015);
}

TEST(Sampler, TopKKeepsExactlyKOnTies) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  p.seed = 3;
  Sampler s(5, p);
  std::vector<float> l = {1.0f, 1.0f, 1.0f, 0.0f, 1.0f};  // ties: lowest indices win
  auto h = Histogram(s, l, 4000);
  EXPECT_GT(h[0], 0);
  EXPECT_GT(h[1], 0);
  EXPECT_EQ(h[2] + h[3] + h[4], 0);
}

TEST(Sampler, TopPRestrictsSupport) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;  // 0.4 + 0.25 = 0.65 <= 0.7, + 0.15 = 0.8 > 0.7 -> nucleus {1, 3, 5}
  p.seed = 12;
  Sampler s(7, p);
  const int draws = 30000;
  auto h = Histogram(s, KnownLogits(), draws);
  for (int i : {0, 2, 4, 6}) EXPECT_EQ(h[i], 0) << i;
  EXPECT_NEAR(h[1] / double(draws), 0.4 / 0.8, 0.015);
  EXPECT_NEAR(h[3] / double(draws), 0.25 / 0.8, 0.015);
  EXPECT_NEAR(h[5] / double(draws), 0.15 / 0.8, 0.015);
}

TEST(Sampler, MinPRestrictsSupport) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.3f;  // threshold 0.12: keeps 0.4, 0.25, 0.15
  p.seed = 13;
  Sampler s(7, p);
  const int draws = 30000;
  auto h = Histogram(s, KnownLogits(), draws);
  for (int i : {0, 2, 4, 6}) EXPECT_EQ(h[i], 0) << i;
  EXPECT_NEAR(h[1] / double(draws), 0.4 / 0.8, 0.015);
  EXPECT_NEAR(h[5] / double(draws), 0.15 / 0.8, 0.015);
  // Combined with top-p 0.7 (nucleus {1,3,5}) and min-p 0.5 (threshold 0.2): {1, 3}.
  p.top_p = 0.7f;
  p.min_p = 0.5f;
  s.SetParams(p);
  h = Histogram(s, KnownLogits(), draws);
  EXPECT_EQ(h[0] + h[2] + h[4] + h[5] + h[6], 0);
  EXPECT_NEAR(h[1] / double(draws), 0.4 / 0.65, 0.015);
}

TEST(Sampler, RepetitionPenaltyLlamaCppSemantics) {
  SamplingParams p;  // greedy, to observe logits
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 3;
  Sampler s(6, p);
  std::vector<float> l = {4.0f, 3.0f, -1.0f, 2.0f, 0.5f, 3.5f};
  std::vector<TokenId> hist = {5, 0, 2, 0, 0};  // window = last 3 = {2, 0, 0}
  EXPECT_EQ(s.Sample(l, hist), 5);              // 0 penalised once: 4 -> 2; 5 untouched
  EXPECT_FLOAT_EQ(l[0], 2.0f);                  // once per distinct token, not per occurrence
  EXPECT_FLOAT_EQ(l[2], -2.0f);                 // negative multiplied
  EXPECT_FLOAT_EQ(l[5], 3.5f);                  // outside the window
  EXPECT_FLOAT_EQ(l[1], 3.0f);
  // Out-of-range history ids are ignored; -1 means the whole history.
  p.repeat_last_n = -1;
  s.SetParams(p);
  std::vector<float> l2 = {4.0f, 3.0f, -1.0f, 2.0f, 0.5f, 3.5f};
  std::vector<TokenId> hist2 = {5, 99, -3, 0};
  EXPECT_EQ(s.Sample(l2, hist2), 1);
  EXPECT_FLOAT_EQ(l2[5], 1.75f);
  EXPECT_FLOAT_EQ(l2[0], 2.0f);
  // Penalty 1 leaves logits alone.
  p.repeat_penalty = 1.0f;
  s.SetParams(p);
  std::vector<float> l3 = {4.0f, 3.0f};
  Sampler s2(2, p);
  EXPECT_EQ(s2.Sample(l3, std::vector<TokenId>{0, 0}), 0);
  EXPECT_FLOAT_EQ(l3[0], 4.0f);
}

TEST(Sampler, DeterministicPerSeed) {
  const int n = 300;
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 0.02f;
  p.repeat_penalty = 1.1f;
  p.seed = 5;
  auto run = [&](uint64_t seed) {
    SamplingParams q = p;
    q.seed = seed;
    Sampler s(n, q);
    std::vector<TokenId> hist;
    for (int i = 0; i < 200; ++i) {
      auto l = RandomLogits(n, 50 + i, 3.0f, false);
      hist.push_back(s.Sample(l, hist));
    }
    return hist;
  };
  auto a = run(5), b = run(5), c = run(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Reset() restarts the same sequence.
  Sampler s(n, p);
  std::vector<TokenId> first, second;
  for (int pass = 0; pass < 2; ++pass) {
    s.Reset(5);
    auto& out = pass == 0 ? first : second;
    for (int i = 0; i < 50; ++i) {
      auto l = RandomLogits(n, 50 + i, 3.0f, false);
      out.push_back(s.Sample(l, {}));
    }
  }
  EXPECT_EQ(first, second);
}

TEST(Sampler, SampleDoesNotAllocate) {
  const int n = 32000;
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 50;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.repeat_penalty = 1.2f;
  p.seed = 1;
  Sampler s(n, p);
  std::vector<float> base = RandomLogits(n, 77, 8.0f, true);
  std::vector<float> l(base.size());
  std::vector<TokenId> hist = {1, 2, 3, 31999, 5, 5, 5};
  const SamplingParams variants[] = {
      p,
      SamplingParams{.temperature = 1.0f, .top_p = 0.9f, .seed = 2},
      SamplingParams{.temperature = 1.0f, .seed = 3},
      SamplingParams{.temperature = 1.0f, .min_p = 0.1f, .seed = 4},
      SamplingParams{.repeat_penalty = 1.3f},
  };
  {  // the counter works
    testing::CountAllocations allocations;
    auto* probe = new std::vector<int>(16);
    EXPECT_GT(allocations.count(), 0);
    delete probe;
  }
  for (const auto& v : variants) {
    s.SetParams(v);
    testing::CountAllocations allocations;
    for (int i = 0; i < 5; ++i) {
      std::copy(base.begin(), base.end(), l.begin());
      TokenId t = s.Sample(l, hist);
      ASSERT_GE(t, 0);
      ASSERT_LT(t, n);
    }
    EXPECT_EQ(allocations.count(), 0) << "temperature " << v.temperature;
  }
}

}  // namespace
}  // namespace ari::runtime
