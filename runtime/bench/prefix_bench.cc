// Prompt-prefix cache (Engine::AddPrefix, docs/memory.md "Prompt-prefix cache"): time to
// first token of a turn whose prompt is a 512-token system prompt + a 16-token question,
// uncached (the whole prompt prefilled) and cached (the prefix's KV copied from its mmap'd
// file, the question prefilled), per KV type. Counter `ttft_ms`: StartTurn to the first
// generated token. The issue 17 target: cached <= 0.1x uncached on the llama-0.3b shape.
// The prefix file is built once per case in a temp folder (not timed).
//
//   B=build; V=/work/shared/models/vocab/ggml-vocab-llama-spm.gguf   (docs/benchmarks.md)
//   $B/runtime/ari-synth --preset llama-0.3b --vocab $V --type q8_0 -o l03.gguf
//   $B/runtime/ari-pack l03.gguf l03.pack.gguf
//   ARI_BENCH_MODEL=l03.pack.gguf $B/runtime/prefix_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/model/model.h"

namespace ari::runtime {
namespace {

constexpr int32_t kPrefix = 512, kQuestion = 16;

// Args: cached (0/1), kv (0 F16, 1 INT8).
void BM_PrefixTtft(benchmark::State& state) {
  const char* path = std::getenv("ARI_BENCH_MODEL");
  if (path == nullptr || *path == '\0') {
    state.SkipWithError("set ARI_BENCH_MODEL to a pack");
    return;
  }
  const bool cached = state.range(0) != 0;
  const KvType kv = state.range(1) ? KvType::kInt8 : KvType::kF16;
  const auto dir =
      std::filesystem::temp_directory_path() / ("ari_prefix_bench_" + std::to_string(::getpid()));
  EngineOptions o;
  o.model_path = path;
  o.context_length = kPrefix + kQuestion + 16;
  o.max_chunk = 128;
  o.slots = 1;
  o.kv_type = kv;
  if (cached) o.prefix_cache.dir = dir;
  auto e = Engine::Create(o);
  if (!e) {
    state.SkipWithError(e.error().ToString().c_str());
    return;
  }
  Engine& eng = **e;
  const int32_t vocab = eng.model().config().vocab_size;
  std::vector<TokenId> prompt(static_cast<size_t>(kPrefix + kQuestion));
  for (size_t i = 0; i < prompt.size(); ++i) {
    prompt[i] = static_cast<TokenId>(1 + (i * 7919) % static_cast<size_t>(vocab - 1));
  }
  if (cached) {
    auto info = eng.AddPrefix(std::span<const TokenId>(prompt.data(), kPrefix));
    if (!info) {
      state.SkipWithError(info.error().ToString().c_str());
      return;
    }
  }
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = 1;
  t.keep_context = false;
  ChunkKnobs k;
  k.prefill_tokens = 128;
  k.kv_type = kv;
  double total_s = 0;
  int32_t reused = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (auto s = eng.StartTurn(0, t); !s) {
      state.SkipWithError(s.error().ToString().c_str());
      break;
    }
    for (;;) {
      auto r = eng.RunChunk(0, k);
      if (!r) {
        state.SkipWithError(r.error().ToString().c_str());
        break;
      }
      reused += r->prefix_tokens;
      if (!r->tokens.empty() || r->finished) break;
    }
    total_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    eng.ResetSlot(0);
  }
  const double n = static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["ttft_ms"] = total_s / n * 1e3;
  state.counters["prefix_tokens"] = reused / n;
  state.SetLabel(std::string(cached ? "cached" : "uncached") +
                 (kv == KvType::kInt8 ? ", int8 kv" : ", f16 kv"));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
BENCHMARK(BM_PrefixTtft)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ari::runtime

BENCHMARK_MAIN();
