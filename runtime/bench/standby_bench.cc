// Memory yield on command (ChunkRunner::ReleaseMemory / Rewarm, docs/memory.md "Memory
// yield"): what STANDBY hands back and what the first request after RESUME costs, on a real
// pack. Each iteration: a warm turn (the weights and every slot's KV resident), the process
// RSS and the model mapping's Rss (/proc/self/smaps) read; ReleaseMemory; the same read
// ("in standby"); Rewarm (timed); the read again; then one turn's time to first token
// (prompt of `prompt` tokens + the first token, timed) against the same TTFT before the
// yield. Arg 1: the page cache is dropped too (RESUME then reads the file from disk).
// Counters (medians over the repetitions):
//   rss_before_mib / rss_standby_mib / rss_after_mib   VmRSS of this process
//   model_released_frac   1 - (mapping Rss in standby / mapping Rss before)
//   rewarm_ms             Rewarm(): MADV_WILLNEED + MADV_POPULATE_READ of the weights
//   ttft_warm_ms / ttft_after_resume_ms   TTFT before the yield / right after Rewarm
//
//   B=build-release; V=../shared/models/vocab/ggml-vocab-llama-spm.gguf   (docs/memory.md)
//   $B/runtime/ari-synth --preset tinyllama-1.1b --vocab $V --type q8_0 -o tl.gguf
//   $B/runtime/ari-pack tl.gguf tl.pack.gguf
//   ARI_BENCH_MODEL=tl.pack.gguf $B/runtime/standby_bench --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/eval/proc_memory.h"
#include "runtime/model/model.h"

namespace ari::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

uint64_t StatusBytes(std::string_view key) { return eval::ProcStatusBytes(key); }
uint64_t MappingRss(const std::filesystem::path& p) { return eval::MappingRssBytes(p); }

// One turn in slot 0: the time from StartTurn to the first generated token.
double TtftMs(Engine& e, const std::vector<TokenId>& prompt) {
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = 1;
  ChunkKnobs k;
  k.prefill_tokens = 128;
  k.decode_tokens = 1;
  const auto t0 = Clock::now();
  if (!e.StartTurn(0, t)) return -1;
  for (int c = 0; c < 4096; ++c) {
    auto r = e.RunChunk(0, k);
    if (!r) return -1;
    if (!r->tokens.empty() || r->finished) return Ms(Clock::now() - t0);
  }
  return -1;
}

// Args: prompt tokens, drop the page cache (0/1).
void BM_StandbyResume(benchmark::State& state) {
  const char* path = std::getenv("ARI_BENCH_MODEL");
  if (path == nullptr || *path == '\0') {
    state.SkipWithError("set ARI_BENCH_MODEL to a pack");
    return;
  }
  EngineOptions o;
  o.model_path = path;
  o.context_length = 1024;
  o.slots = 2;
  o.park_areas = 1;
  auto made = Engine::Create(o);
  if (!made) {
    state.SkipWithError(made.error().ToString().c_str());
    return;
  }
  Engine& e = **made;
  const int32_t vocab = e.model().config().vocab_size;
  std::vector<TokenId> prompt(static_cast<size_t>(state.range(0)));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>(1 + i % (vocab - 1));
  const bool drop = state.range(1) != 0;
  double rss[3] = {}, released = 0, rewarm = 0, warm = 0, after = 0;
  for (auto _ : state) {
    if (TtftMs(e, prompt) < 0) {  // warm-up: weights and slot 0's KV resident
      state.SkipWithError("turn failed");
      return;
    }
    warm += TtftMs(e, prompt);
    const double mapped = static_cast<double>(MappingRss(e.loaded_path()));
    rss[0] += static_cast<double>(StatusBytes("VmRSS:"));
    auto y = e.ReleaseMemory(drop);
    if (!y) {
      state.SkipWithError(y.error().ToString().c_str());
      return;
    }
    rss[1] += static_cast<double>(StatusBytes("VmRSS:"));
    released += mapped > 0 ? 1.0 - MappingRss(e.loaded_path()) / mapped : 0.0;
    const auto t0 = Clock::now();
    auto w = e.Rewarm();
    rewarm += Ms(Clock::now() - t0);
    if (!w) {
      state.SkipWithError(w.error().ToString().c_str());
      return;
    }
    rss[2] += static_cast<double>(StatusBytes("VmRSS:"));
    after += TtftMs(e, prompt);
  }
  const double n = static_cast<double>(std::max<int64_t>(1, state.iterations()));
  constexpr double kMiB = 1048576.0;
  state.counters["rss_before_mib"] = rss[0] / n / kMiB;
  state.counters["rss_standby_mib"] = rss[1] / n / kMiB;
  state.counters["rss_after_mib"] = rss[2] / n / kMiB;
  state.counters["model_released_frac"] = released / n;
  state.counters["rewarm_ms"] = rewarm / n;
  state.counters["ttft_warm_ms"] = warm / n;
  state.counters["ttft_after_resume_ms"] = after / n;
  state.SetLabel(drop ? "page cache dropped" : "page cache kept");
}
BENCHMARK(BM_StandbyResume)
    ->ArgsProduct({{128}, {0, 1}})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ari::runtime

BENCHMARK_MAIN();
