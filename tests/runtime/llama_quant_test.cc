// GGUF files made by llama.cpp's llama-quantize (Q4_1, Q5_0, Q5_1, Q4_K_M, Q5_K_M, Q6_K) read
// by ARI: every quantized tensor decodes (DequantizeRow) to within its format's error bound
// of the F32 source, deliberately wrong layouts do not, the files pack (WritePack), the
// engine generates from the packs, and the fp32 reference forward pass on Q4_K_M stays close
// to the one on F32. Skips when llama-quantize is absent (tests/runtime/llama_quant_fixture.h).
//
// Error bound. For each scale unit u of a format (32 elements; 16 for Q6_K), the ideal step
// is computed from the F32 source alone:
//   Q4_1 (max - min) / 15     Q5_1 (max - min) / 31     Q5_0 max|x| / 16
//   Q4_K (max - min(min, 0)) / 15     Q5_K ... / 31     Q6_K max|x| / 32
// Round-to-nearest on that grid errs by at most step / 2, and uniform rounding noise has an
// RMS of step / sqrt(12) = 0.29 step. Every tensor must have RMS <= 0.32 step and a max error
// within MaxStepRatio(type): Q4_1 / Q5_1 0.6 (half a step + fp16 d and m); Q5_0 1.05 (d =
// max / -16: the opposite extreme clamps at q = 31, one step); Q4_K 2.5, Q5_K 3.5, Q6_K 1.6
// (llama.cpp fits K-quant scales and mins by a weighted search that clamps some small
// elements, and stores sub-block scales on a 6-bit (Q6_K: int8) grid of the super-block
// scale; measured maxima 2.15, 3.10, 1.35). The measured maxima are printed. A decoder with a
// wrong layout misses these bounds by 10x or more (WrongLayoutsFailTheBound).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/core/tensor_types.h"
#include "runtime/engine/engine.h"
#include "runtime/gguf/gguf.h"
#include "runtime/kernels/pack.h"
#include "runtime/model/forward.h"
#include "runtime/model/model.h"
#include "runtime/model/pack_file.h"
#include "runtime/model/session.h"
#include "tests/runtime/llama_quant_fixture.h"

namespace ari::runtime {
namespace {

constexpr double kRmsStepRatio = 0.32;

double MaxStepRatio(TensorType t) {
  switch (t) {
    case TensorType::kQ4_1:
    case TensorType::kQ5_1: return 0.6;
    case TensorType::kQ5_0: return 1.05;
    case TensorType::kQ4_K: return 2.5;
    case TensorType::kQ5_K: return 3.5;
    case TensorType::kQ6_K: return 1.6;
    default: return 1.0;
  }
}

bool IsQuant(TensorType t) { return BlockSize(t) > 1; }

int UnitSize(TensorType t) { return t == TensorType::kQ6_K ? 16 : 32; }

double IdealStep(TensorType t, const float* x, int n) {
  float lo = x[0], hi = x[0], amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  switch (t) {
    case TensorType::kQ4_1: return (hi - lo) / 15.0;
    case TensorType::kQ5_1: return (hi - lo) / 31.0;
    case TensorType::kQ5_0: return amax / 16.0;
    case TensorType::kQ4_K: return (hi - std::min(lo, 0.0f)) / 15.0;
    case TensorType::kQ5_K: return (hi - std::min(lo, 0.0f)) / 31.0;
    case TensorType::kQ6_K: return amax / 32.0;
    case TensorType::kQ8_0: return amax / 127.0;
    case TensorType::kQ4_0: return amax / 8.0;
    default: return 0.0;
  }
}

struct ErrStats {
  TensorType type = TensorType::kF32;
  double max_ratio = 0, sum_sq = 0;
  int64_t n = 0;
  double Rms() const { return n ? std::sqrt(sum_sq / static_cast<double>(n)) : 0.0; }
  bool Within() const { return max_ratio <= MaxStepRatio(type) && Rms() <= kRmsStepRatio; }
};

// |decoded - truth| / ideal step over every element of rows [0, rows) of tensor t; `mutate`
// may alter a copy of each raw row first, `index` maps a decoded element to the truth
// element it is compared with.
ErrStats RowErrors(const TensorInfo& t, const std::vector<float>& truth,
                   const std::function<void(std::vector<std::byte>&)>& mutate = {},
                   const std::function<int64_t(int64_t)>& index = {}) {
  const int64_t cols = t.ne[0], rows = t.NumRows();
  const uint64_t rb = *RowBytes(t.type, cols);
  const int unit = UnitSize(t.type);
  std::vector<std::byte> raw(rb);
  std::vector<float> got(static_cast<size_t>(cols));
  ErrStats s;
  s.type = t.type;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(raw.data(), t.data + r * rb, rb);
    if (mutate) mutate(raw);
    DequantizeRow(t.type, raw.data(), got.data(), cols);
    const float* want = truth.data() + r * cols;
    for (int64_t u = 0; u < cols; u += unit) {
      const double step = IdealStep(t.type, want + u, unit);
      for (int64_t i = u; i < u + unit; ++i) {
        const int64_t j = index ? index(i) : i;
        const double ratio = std::fabs(got[i] - want[j]) / std::max(step, 1e-12);
        s.max_ratio = std::max(s.max_ratio, ratio);
        s.sum_sq += ratio * ratio;
        ++s.n;
      }
    }
  }
  return s;
}

// Layout mistakes a decoder could make, applied to the raw bytes of a row.
std::vector<std::pair<std::string, std::function<void(std::vector<std::byte>&)>>> Mutants(
    TensorType t) {
  const int64_t bb = BlockBytes(t);
  auto each_block = [bb](std::function<void(std::byte*)> f) {
    return [bb, f](std::vector<std::byte>& row) {
      for (size_t b = 0; b + static_cast<size_t>(bb) <= row.size(); b += static_cast<size_t>(bb)) {
        f(row.data() + b);
      }
    };
  };
  auto swap_ranges = [](size_t a, size_t b, size_t n) {
    return [=](std::byte* p) { std::swap_ranges(p + a, p + a + n, p + b); };
  };
  auto rotate_qh = [](size_t at) {  // high bit of element j applied to element j + 16
    return [at](std::byte* p) { std::rotate(p + at, p + at + 2, p + at + 4); };
  };
  switch (t) {
    case TensorType::kQ4_1: return {{"d and m swapped", each_block(swap_ranges(0, 2, 2))}};
    case TensorType::kQ5_0: return {{"qh halves swapped", each_block(rotate_qh(2))}};
    case TensorType::kQ5_1:
      return {{"d and m swapped", each_block(swap_ranges(0, 2, 2))},
              {"qh halves swapped", each_block(rotate_qh(4))}};
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
      // Bytes 4-7 (mins 0-3) read as scales: sc[j] = s[j] & 63 for all 8 would be the
      // same kind of mistake.
      return {{"scales 0-3 and mins 0-3 swapped", each_block(swap_ranges(4, 8, 4))},
              {"scale bytes 0-3 and 8-11 swapped", each_block(swap_ranges(4, 12, 4))}};
    case TensorType::kQ6_K:
      return {{"sub-block scales reversed",
               each_block([](std::byte* p) { std::reverse(p + 192, p + 208); })}};
    default: return {};
  }
}

TEST(LlamaQuant, DequantizeMatchesF32Source) {
  ARI_REQUIRE_LLAMA_QUANT(q);
  for (const auto& v : testing::QuantVariants()) {
    auto f = GgufFile::Open(q.by_ftype.at(v.ftype));
    ASSERT_TRUE(f.has_value()) << f.error().ToString();
    std::map<TensorType, int> counts;
    std::map<TensorType, ErrStats> worst;
    for (const TensorInfo& t : f->tensors()) {
      ++counts[t.type];
      ASSERT_TRUE(q.truth.contains(t.name)) << t.name;
      if (!IsQuant(t.type)) continue;
      const ErrStats s = RowErrors(t, q.truth.at(t.name));
      EXPECT_LE(s.max_ratio, MaxStepRatio(t.type)) << v.ftype << " " << t.name;
      EXPECT_LE(s.Rms(), kRmsStepRatio) << v.ftype << " " << t.name;
      ErrStats& w = worst[t.type];
      w.max_ratio = std::max(w.max_ratio, s.max_ratio);
      w.sum_sq += s.sum_sq;
      w.n += s.n;
    }
    std::string types;
    for (const auto& [type, n] : counts) {
      types.append(" ").append(TensorTypeName(type)).append(" x").append(std::to_string(n));
    }
    std::printf("[measured] llama-quantize %s%s: tensor types%s\n", v.ftype,
                v.pure ? " --pure" : "", types.c_str());
    for (const auto& [type, s] : worst) {
      std::printf("[measured]   %s: max |err| %.3f step, rms %.3f step over %lld values\n",
                  TensorTypeName(type).data(), s.max_ratio, s.Rms(), static_cast<long long>(s.n));
    }
    for (TensorType want : v.expect) {
      EXPECT_GT(counts[want], 0) << v.ftype << " has no " << TensorTypeName(want) << " tensor";
    }
  }
}

// The bound has power: each layout mistake (and reading elements in a wrong order) breaks
// it on the first tensor of each type.
TEST(LlamaQuant, WrongLayoutsFailTheBound) {
  ARI_REQUIRE_LLAMA_QUANT(q);
  std::map<TensorType, bool> done;
  for (const auto& v : testing::QuantVariants()) {
    auto f = GgufFile::Open(q.by_ftype.at(v.ftype));
    ASSERT_TRUE(f.has_value());
    for (const TensorInfo& t : f->tensors()) {
      if (!IsQuant(t.type) || done[t.type]) continue;
      done[t.type] = true;
      const auto& truth = q.truth.at(t.name);
      ASSERT_TRUE(RowErrors(t, truth).Within());
      for (const auto& [what, mutate] : Mutants(t.type)) {
        const ErrStats s = RowErrors(t, truth, mutate);
        std::printf("[measured] %s %s: %s -> max |err| %.2f step, rms %.2f step\n",
                    TensorTypeName(t.type).data(), t.name.c_str(), what.c_str(), s.max_ratio,
                    s.Rms());
        EXPECT_FALSE(s.Within()) << TensorTypeName(t.type) << " " << what;
      }
      // Low and high nibbles exchanged: element i compared with i ^ 16 (32-blocks: the
      // two halves of qs) or i ^ 32 (K-quants: the two sub-blocks sharing qs bytes).
      const int64_t flip = BlockSize(t.type) == 32 ? 16 : 32;
      const ErrStats s = RowErrors(t, truth, {}, [flip](int64_t i) { return i ^ flip; });
      std::printf(
          "[measured] %s %s: element i read as i ^ %lld -> max |err| %.2f step, rms %.2f "
          "step\n",
          TensorTypeName(t.type).data(), t.name.c_str(), static_cast<long long>(flip), s.max_ratio,
          s.Rms());
      EXPECT_FALSE(s.Within()) << TensorTypeName(t.type) << " nibble order";
    }
  }
  EXPECT_EQ(done.size(), 6u);  // Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K
}

std::vector<TokenId> Generate(const std::filesystem::path& pack, Precision p, int n) {
  EngineOptions o;
  o.model_path = pack;
  o.context_length = 64;
  o.max_output = 64;
  o.slots = 1;
  o.threads = 1;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().ToString());
  if (!e) return {};
  const std::vector<TokenId> prompt = {1, 17, 300, 42, 9};
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = n;
  t.sampling.temperature = 0.0f;
  EXPECT_TRUE((*e)->StartTurn(0, t).has_value());
  ChunkKnobs k;
  k.precision = p;
  std::vector<TokenId> out;
  for (int guard = 0; guard < 2 * n + 4; ++guard) {
    auto r = (*e)->RunChunk(0, k);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
    if (!r) break;
    EXPECT_EQ(r->precision, p);  // the packed path ran, not the reference fallback
    out.insert(out.end(), r->tokens.begin(), r->tokens.end());
    if (r->finished) break;
  }
  return out;
}

// NMSE of a packed matrix (unpacked row by row) against the F32 source.
double PackNmse(const GgufFile& pack, const std::string& name, kernels::PackedPrecision p,
                const std::vector<float>& truth, int64_t rows, int64_t cols) {
  auto cfg = ModelConfig::FromGguf(pack);
  auto pw = BindPack(pack, *cfg);
  EXPECT_TRUE(pw.has_value()) << (pw ? "" : pw.error().ToString());
  if (!pw) return 1.0;
  const kernels::PackedMatrix& m = pw->layers[PrecisionIndex(p)][0].up;
  EXPECT_EQ(name, "blk.0.ffn_up.weight");
  std::vector<float> row(static_cast<size_t>(cols));
  double num = 0, den = 0;
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(kernels::UnpackRow(m, r, row).has_value());
    for (int64_t c = 0; c < cols; ++c) {
      const double d = row[c] - truth[r * cols + c];
      num += d * d;
      den += static_cast<double>(truth[r * cols + c]) * truth[r * cols + c];
    }
  }
  return num / den;
}

double SourceNmse(const TensorInfo& t, const std::vector<float>& truth) {
  const int64_t cols = t.ne[0];
  const uint64_t rb = *RowBytes(t.type, cols);
  std::vector<float> row(static_cast<size_t>(cols));
  double num = 0, den = 0;
  for (int64_t r = 0; r < t.NumRows(); ++r) {
    DequantizeRow(t.type, t.data + r * rb, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) {
      const double x = truth[r * cols + c];
      num += (row[c] - x) * (row[c] - x);
      den += x * x;
    }
  }
  return num / den;
}

TEST(LlamaQuant, PacksAndEngineGenerates) {
  ARI_REQUIRE_LLAMA_QUANT(q);
  const testing::QuantModelSpec spec;
  std::map<std::string, std::filesystem::path> packs = {{"F32", q.dir / "model-F32.pack.gguf"}};
  ASSERT_TRUE(WritePack(q.f32, packs["F32"]).has_value());
  for (const auto& v : testing::QuantVariants()) {
    packs[v.ftype] = q.dir / (std::string("model-") + v.ftype + ".pack.gguf");
    auto s = WritePack(q.by_ftype.at(v.ftype), packs[v.ftype]);
    ASSERT_TRUE(s.has_value()) << v.ftype << ": " << s.error().ToString();
    EXPECT_EQ(s->matrices, 1 + 7 * spec.n_layers);
  }
  const auto ref8 = Generate(packs["F32"], Precision::kW8A16, 12);
  ASSERT_EQ(ref8.size(), 12u);
  const std::string up = "blk.0.ffn_up.weight";
  for (const auto& [name, path] : packs) {
    for (Precision p : {Precision::kW8A16, Precision::kW4A8}) {
      const auto got = Generate(path, p, 12);
      ASSERT_EQ(got.size(), 12u) << name;
      for (TokenId id : got) EXPECT_LT(id, spec.vocab);
      size_t same = 0;
      while (same < got.size() && got[same] == ref8[same]) ++same;
      std::printf("[measured] %s pack, %s: %zu/12 greedy tokens equal to the F32 pack's W8A16\n",
                  name.c_str(), PrecisionName(p).data(), same);
    }
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.has_value());
    double src = 0;  // the GGUF's own ffn_up against the F32 source
    if (name != "F32") {
      auto g = GgufFile::Open(q.by_ftype.at(name));
      ASSERT_TRUE(g.has_value());
      src = SourceNmse(**g->GetTensor(up), q.truth.at(up));
    }
    const double w8 =
        PackNmse(*f, up, kernels::PackedPrecision::kW8, q.truth.at(up), spec.ffn, spec.dim);
    const double w4 =
        PackNmse(*f, up, kernels::PackedPrecision::kW4, q.truth.at(up), spec.ffn, spec.dim);
    std::printf("[measured] %s %s vs F32 source: gguf nmse %.2e, W8 pack %.2e, W4 pack %.2e\n",
                name.c_str(), up.c_str(), src, w8, w4);
    EXPECT_LT(w8, 0.02) << name;
    EXPECT_LT(w4, 0.05) << name;
  }
}

// The fp32 reference forward pass (the specification) over each quantized file stays close to
// the same pass over the F32 source: logits NMSE (sum (a - b)^2 / sum a^2, worst of 8 decode
// steps, both on the F32 run's greedy sequence) within a tolerance per weight width, about
// twice the measured value; this random network amplifies weight NMSE (ffn_up: Q4_K_M 2.9e-3,
// Q6_K 2.1e-4, see PacksAndEngineGenerates) about 10x into its logits. The first 4 greedy
// tokens must agree (measured: 8/8 for every file).
double LogitTolerance(const std::string& ftype) {
  if (ftype.starts_with("Q4")) return 0.08;  // measured 0.045 (Q4_K_M), 0.051 (Q4_1)
  if (ftype.starts_with("Q5")) return 0.03;  // measured 0.014 (Q5_K_M), 0.0095 (Q5_1)
  return 0.006;                              // Q6_K, measured 0.0021
}

TEST(LlamaQuant, ReferenceForwardCloseToF32) {
  ARI_REQUIRE_LLAMA_QUANT(q);
  ModelLoadOptions lo;
  lo.require_tokenizer = false;
  auto a = Model::Load(q.f32, lo);
  ASSERT_TRUE(a.has_value()) << a.error().ToString();
  for (const auto& v : testing::QuantVariants()) {
    auto b = Model::Load(q.by_ftype.at(v.ftype), lo);
    ASSERT_TRUE(b.has_value()) << b.error().ToString();
    auto sa = Session::Create(**a);
    auto sb = Session::Create(**b);
    ASSERT_TRUE(sa.has_value() && sb.has_value());
    std::vector<TokenId> seq = {1, 17, 300, 42, 9};
    std::span<const TokenId> in = seq;
    int same = 0;
    double worst = 0;
    for (int step = 0; step < 8; ++step) {
      auto la = Forward(**sa, in);
      auto lb = Forward(**sb, in);
      ASSERT_TRUE(la.has_value() && lb.has_value());
      double num = 0, den = 0;
      for (size_t i = 0; i < la->size(); ++i) {
        num += ((*la)[i] - (*lb)[i]) * ((*la)[i] - (*lb)[i]);
        den += (*la)[i] * (*la)[i];
      }
      worst = std::max(worst, num / den);
      const auto ia = std::max_element(la->begin(), la->end()) - la->begin();
      const auto ib = std::max_element(lb->begin(), lb->end()) - lb->begin();
      if (same == step && ia == ib) ++same;
      seq.push_back(static_cast<TokenId>(ia));
      in = std::span<const TokenId>(seq).last(1);
    }
    std::printf(
        "[measured] reference forward %s vs F32: %d/8 greedy tokens equal, worst logit "
        "nmse %.2e (tolerance %.0e)\n",
        v.ftype, same, worst, LogitTolerance(v.ftype));
    EXPECT_LT(worst, LogitTolerance(v.ftype)) << v.ftype;
    EXPECT_GE(same, 4) << v.ftype;
  }
}

}  // namespace
}  // namespace ari::runtime
