// Slot parking cost (ChunkRunner::ParkSlot / ResumeParked): the time to move a turn's KV
// of N positions (plus its history and sampler, by pointer) out of its slot into a park
// area and back, per KV type. Reported per operation as ms per 1000 positions
// (`ms_per_1k_pos`): the figure of the simulator's cost model key park_ms_per_1k_positions.
// The turn is prefilled once per case (not timed); each iteration parks it and resumes it.
//
//   B=build; V=/work/shared/models/vocab/ggml-vocab-llama-spm.gguf   (docs/benchmarks.md)
//   $B/runtime/ari-synth --preset llama-0.3b --vocab $V --type q8_0 -o l03.gguf
//   $B/runtime/ari-pack l03.gguf l03.pack.gguf
//   ARI_BENCH_MODEL=l03.pack.gguf $B/runtime/park_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/model/model.h"

namespace ari::runtime {
namespace {

// Args: positions, kv (0 F16, 1 INT8).
void BM_ParkResume(benchmark::State& state) {
  const char* path = std::getenv("ARI_BENCH_MODEL");
  if (path == nullptr || *path == '\0') {
    state.SkipWithError("set ARI_BENCH_MODEL to a pack");
    return;
  }
  const auto positions = static_cast<int32_t>(state.range(0));
  const KvType kv = state.range(1) ? KvType::kInt8 : KvType::kF16;
  EngineOptions o;
  o.model_path = path;
  o.context_length = positions + 16;
  o.max_chunk = 128;
  o.slots = 1;
  o.park_areas = 1;
  o.kv_type = kv;
  auto e = Engine::Create(o);
  if (!e) {
    state.SkipWithError(e.error().ToString().c_str());
    return;
  }
  Engine& eng = **e;
  if (eng.SlotKvType(0) == KvType::kF32 && kv != KvType::kF32) {
    state.SkipWithError("the reference path keeps fp32 KV: give a pack");
    return;
  }
  const int32_t vocab = eng.model().config().vocab_size;
  std::vector<TokenId> prompt(static_cast<size_t>(positions + 1));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>(1 + i % (vocab - 1));
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = 4;
  t.keep_context = false;
  if (auto s = eng.StartTurn(0, t); !s) {
    state.SkipWithError(s.error().ToString().c_str());
    return;
  }
  ChunkKnobs k;
  k.prefill_tokens = 128;
  k.kv_type = kv;
  while (eng.SlotPosition(0) < positions) {  // prefill (not timed) up to `positions`
    auto r = eng.RunChunk(0, k);
    if (!r || r->finished) {
      state.SkipWithError(r ? "turn ended during the prefill" : r.error().ToString().c_str());
      return;
    }
  }
  const int32_t pos = eng.SlotPosition(0);
  double park_s = 0, resume_s = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto id = eng.ParkSlot(0);
    const auto t1 = std::chrono::steady_clock::now();
    if (!id) {
      state.SkipWithError(id.error().ToString().c_str());
      return;
    }
    if (auto r = eng.ResumeParked(*id, 0); !r) {
      state.SkipWithError(r.error().ToString().c_str());
      return;
    }
    const auto t2 = std::chrono::steady_clock::now();
    park_s += std::chrono::duration<double>(t1 - t0).count();
    resume_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double n = static_cast<double>(std::max<int64_t>(1, state.iterations()));
  const double per_1k = 1e3 * 1000.0 / pos;  // ms per 1k positions of one second per op
  state.counters["park_ms_per_1k_pos"] = park_s / n * per_1k;
  state.counters["resume_ms_per_1k_pos"] = resume_s / n * per_1k;
  state.counters["ms_per_1k_pos"] = (park_s + resume_s) / (2 * n) * per_1k;
  state.counters["positions"] = pos;
  state.SetLabel(kv == KvType::kInt8 ? "int8 kv" : "f16 kv");
}
BENCHMARK(BM_ParkResume)->ArgsProduct({{256, 1024}, {0, 1}})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ari::runtime

BENCHMARK_MAIN();
