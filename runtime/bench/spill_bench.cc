// Parked sessions on disk (ChunkRunner::SpillSlot / RestoreSession): the time to write an
// idle session's KV of N positions (plus its history) compressed with zstd to the spill
// folder (temp file, fsync, rename) and to read it back into a slot, per KV type. Reported
// per operation as ms per 1000 positions (`spill_ms_per_1k_pos`, `restore_ms_per_1k_pos`)
// and the file's bytes per position: the simulator's cost model keys
// spill_ms_per_1k_positions and restore_ms_per_1k_positions (sim/cost_model.h). The turn
// is prefilled once per case (not timed); each iteration spills it and restores it. The
// folder is $ARI_BENCH_SPILL_DIR (default: a temp folder): put it on the disk you deploy.
//
//   B=build; V=/work/shared/models/vocab/ggml-vocab-llama-spm.gguf   (docs/benchmarks.md)
//   $B/runtime/ari-synth --preset llama-0.3b --vocab $V --type q8_0 -o l03.gguf
//   $B/runtime/ari-pack l03.gguf l03.pack.gguf
//   ARI_BENCH_MODEL=l03.pack.gguf $B/runtime/spill_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "runtime/model/model.h"

namespace ari::runtime {
namespace {

// One slot holding a finished turn of `positions` positions in `kv` (a session is spilled
// between two turns); null after state.SkipWithError.
std::unique_ptr<Engine> SessionEngine(benchmark::State& state, int32_t positions, KvType kv) {
  const char* path = std::getenv("ARI_BENCH_MODEL");
  if (path == nullptr || *path == '\0') {
    state.SkipWithError("set ARI_BENCH_MODEL to a pack");
    return nullptr;
  }
  EngineOptions o;
  o.model_path = path;
  o.context_length = positions + 16;
  o.max_chunk = 128;
  o.slots = 1;
  o.park_areas = 0;
  o.kv_type = kv;
  const char* dir = std::getenv("ARI_BENCH_SPILL_DIR");
  o.spill.dir = dir != nullptr && *dir != '\0'
                    ? std::filesystem::path(dir)
                    : std::filesystem::temp_directory_path() / "ari_spill_bench";
  auto e = Engine::Create(o);
  if (!e) {
    state.SkipWithError(e.error().ToString().c_str());
    return nullptr;
  }
  Engine& eng = **e;
  if (eng.SlotKvType(0) == KvType::kF32 && kv != KvType::kF32) {
    state.SkipWithError("the reference path keeps fp32 KV: give a pack");
    return nullptr;
  }
  const int32_t vocab = eng.model().config().vocab_size;
  std::vector<TokenId> prompt(static_cast<size_t>(positions + 1));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>(1 + i % (vocab - 1));
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = 1;
  t.keep_context = false;
  if (auto s = eng.StartTurn(0, t); !s) {
    state.SkipWithError(s.error().ToString().c_str());
    return nullptr;
  }
  ChunkKnobs k;
  k.prefill_tokens = 128;
  k.kv_type = kv;
  while (eng.SlotPosition(0) < positions) {  // prefill (not timed) up to `positions`
    auto r = eng.RunChunk(0, k);
    if (!r || r->finished) {
      state.SkipWithError(r ? "turn ended during the prefill" : r.error().ToString().c_str());
      return nullptr;
    }
  }
  for (int c = 0; c < 64; ++c) {  // finish the turn
    auto r = eng.RunChunk(0, k);
    if (!r) {
      state.SkipWithError(r.error().ToString().c_str());
      return nullptr;
    }
    if (r->finished) break;
  }
  return std::move(*e);
}

// Args: positions, kv (0 F16, 1 INT8).
void BM_SpillRestore(benchmark::State& state) {
  const KvType kv = state.range(1) ? KvType::kInt8 : KvType::kF16;
  std::unique_ptr<Engine> e = SessionEngine(state, static_cast<int32_t>(state.range(0)), kv);
  if (!e) return;
  Engine& eng = *e;
  const int32_t pos = eng.SlotPosition(0);
  double spill_s = 0, restore_s = 0;
  uint64_t bytes = 0;
  std::string why;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto n = eng.SpillSlot(0, 1);
    const auto t1 = std::chrono::steady_clock::now();
    if (!n) {
      state.SkipWithError(n.error().ToString().c_str());
      return;
    }
    bytes = *n;
    auto ok = eng.RestoreSession(0, 1, &why);
    if (!ok || !*ok) {
      state.SkipWithError(ok ? ("not restored: " + why).c_str() : ok.error().ToString().c_str());
      return;
    }
    const auto t2 = std::chrono::steady_clock::now();
    spill_s += std::chrono::duration<double>(t1 - t0).count();
    restore_s += std::chrono::duration<double>(t2 - t1).count();
  }
  const double n = static_cast<double>(std::max<int64_t>(1, state.iterations()));
  const double per_1k = 1e3 * 1000.0 / pos;  // ms per 1k positions of one second per op
  state.counters["spill_ms_per_1k_pos"] = spill_s / n * per_1k;
  state.counters["restore_ms_per_1k_pos"] = restore_s / n * per_1k;
  state.counters["file_bytes_per_pos"] = static_cast<double>(bytes) / pos;
  state.counters["positions"] = pos;
  state.SetLabel(kv == KvType::kInt8 ? "int8 kv" : "f16 kv");
}
BENCHMARK(BM_SpillRestore)->ArgsProduct({{256, 1024}, {0, 1}})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace ari::runtime

BENCHMARK_MAIN();
