// Memory-discipline benchmarks:
//  - INT8 vs F16 KV attention for one head (scores + softmax + values over nt positions),
//    scalar INT8 reference, AVX2 INT8 and the F16 kernels of the best tier;
//  - with ARI_BENCH_MODEL=<pack.gguf>: the engine's decode time per token with the
//    next-layer prefetch (MADV_WILLNEED) on and off, warm page cache, and F16 vs INT8 KV.
//
//   ARI_BENCH_MODEL=/tmp/model.pack.gguf memory_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "runtime/core/tensor_types.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/paging.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/kv_int8.h"
#include "runtime/model/model.h"

namespace ari::runtime {
namespace {

constexpr int64_t kHeadDim = 64, kKvDim = 256;  // one head out of 4 KV heads

// Args: nt (positions), kind (0 = INT8 scalar, 1 = INT8 best tier, 2 = F16 best tier).
void BM_KvAttention(benchmark::State& state) {
  const int64_t nt = state.range(0);
  const int kind = static_cast<int>(state.range(1));
  const int32_t g = kernels::KvInt8Group(kHeadDim);
  const int64_t ld8 = kernels::KvInt8RowBytes(kKvDim, g);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> q(kHeadDim), row(kKvDim), att(static_cast<size_t>(nt)), out(kHeadDim);
  for (float& x : q) x = nd(rng);
  std::vector<std::byte> k8(static_cast<size_t>(nt * ld8)), v8(k8.size());
  std::vector<uint16_t> k16(static_cast<size_t>(nt * kKvDim)), v16(k16.size());
  for (int64_t t = 0; t < nt; ++t) {
    for (auto* mem : {&k8, &v8}) {
      for (float& x : row) x = nd(rng);
      std::byte* r = mem->data() + t * ld8;
      kernels::QuantizeKvInt8(row.data(), kKvDim, g, reinterpret_cast<int8_t*>(r),
                              reinterpret_cast<float*>(r + kKvDim));
    }
    for (int64_t i = 0; i < kKvDim; ++i) {
      k16[static_cast<size_t>(t * kKvDim + i)] = Fp32ToFp16(nd(rng));
      v16[static_cast<size_t>(t * kKvDim + i)] = Fp32ToFp16(nd(rng));
    }
  }
  const kernels::IsaTier best = kernels::BestIsaTier();
  const auto& k8s = kernels::KvInt8KernelsFor(kind == 0 ? kernels::IsaTier::kScalar : best);
  const auto& kt = kernels::KernelsFor(best);
  const auto* kq = reinterpret_cast<const int8_t*>(k8.data());
  const auto* vq = reinterpret_cast<const int8_t*>(v8.data());
  const auto* ks = reinterpret_cast<const float*>(k8.data() + kKvDim);
  const auto* vs = reinterpret_cast<const float*>(v8.data() + kKvDim);
  for (auto _ : state) {
    if (kind < 2) {
      k8s.scores(q.data(), kq, ks, ld8, kHeadDim, g, nt, 0.125f, att.data());
      kt.softmax(att.data(), nt);
      k8s.values(att.data(), vq, vs, ld8, kHeadDim, g, nt, out.data());
    } else {
      kt.attn_scores_f16(q.data(), k16.data(), kKvDim, kHeadDim, nt, 0.125f, att.data());
      kt.softmax(att.data(), nt);
      kt.attn_values_f16(att.data(), v16.data(), kKvDim, kHeadDim, nt, out.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * nt);
  state.SetLabel(kind == 0 ? "int8 scalar" : kind == 1 ? "int8 best tier" : "f16 best tier");
}
BENCHMARK(BM_KvAttention)->ArgsProduct({{512, 2048}, {0, 1, 2}});

// Args: prefetch (0 off, 1 on), kv (0 F16, 1 INT8). Decode of 64 tokens after an 8-token
// prompt, warm cache (the model is read once before timing).
void BM_EngineDecode(benchmark::State& state) {
  const char* path = std::getenv("ARI_BENCH_MODEL");
  if (path == nullptr || *path == '\0') {
    state.SkipWithError("set ARI_BENCH_MODEL to a pack");
    return;
  }
  EngineOptions o;
  o.model_path = path;
  o.context_length = 256;
  o.slots = 1;
  o.threads = 1;
  o.layer_prefetch = state.range(0) ? LayerPrefetch::kOn : LayerPrefetch::kOff;
  auto e = Engine::Create(o);
  if (!e) {
    state.SkipWithError(e.error().ToString().c_str());
    return;
  }
  const std::vector<TokenId> prompt = {1, 450, 4996, 17354, 1701, 432, 383, 286};
  ChunkKnobs k;
  k.kv_type = state.range(1) ? KvType::kInt8 : KvType::kF16;
  k.greedy_only = true;
  k.decode_tokens = 64;
  int64_t tokens = 0;
  {  // warm-up (pages the weights in), not timed
    TurnSpec t;
    t.prompt = prompt;
    t.max_tokens = 65;
    t.keep_context = false;
    if (auto st = (*e)->StartTurn(0, t); !st) {
      state.SkipWithError(st.error().ToString().c_str());
      return;
    }
    for (auto r = (*e)->RunChunk(0, k); r && !r->finished;) r = (*e)->RunChunk(0, k);
  }
  for (auto _ : state) {
    state.PauseTiming();
    TurnSpec t;
    t.prompt = prompt;
    t.max_tokens = 65;
    t.keep_context = false;
    if (auto st = (*e)->StartTurn(0, t); !st) {
      state.ResumeTiming();
      state.SkipWithError(st.error().ToString().c_str());
      break;
    }
    auto r = (*e)->RunChunk(0, k);
    state.ResumeTiming();
    while (r && !r->finished) {
      r = (*e)->RunChunk(0, k);
      if (r) tokens += static_cast<int64_t>(r->tokens.size());
    }
  }
  state.SetItemsProcessed(tokens);
  state.SetLabel(std::string(state.range(0) ? "prefetch on" : "prefetch off") +
                 (state.range(1) ? ", int8 kv" : ", f16 kv"));
}
BENCHMARK(BM_EngineDecode)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMillisecond);

// Cost of one MADV_WILLNEED over a layer's tensors (both precisions of a pack: an upper
// bound of the engine's per-layer call, which covers the active precision only), warm cache.
void BM_PrefetchLayerWarm(benchmark::State& state) {
  const char* path = std::getenv("ARI_BENCH_MODEL");
  if (path == nullptr || *path == '\0') {
    state.SkipWithError("set ARI_BENCH_MODEL to a pack");
    return;
  }
  ModelLoadOptions lo;
  lo.require_tokenizer = false;
  auto m = Model::Load(path, lo);
  if (!m) {
    state.SkipWithError(m.error().ToString().c_str());
    return;
  }
  PagingAdvisor adv((*m)->file());
  const int32_t n = adv.num_layers();
  for (int32_t l = 0; l < n; ++l) {  // warm
    if (auto pf = adv.PrefetchLayer(l); !pf) {
      state.SkipWithError(pf.error().ToString().c_str());
      return;
    }
  }
  int32_t l = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(adv.PrefetchLayer(l));
    l = (l + 1) % n;
  }
  state.SetLabel(std::to_string(PagingAdvisor::TotalBytes(adv.regions().layers[0])) +
                 " bytes per layer");
}
BENCHMARK(BM_PrefetchLayerWarm);

}  // namespace
}  // namespace ari::runtime

BENCHMARK_MAIN();
