// The cost model of model-mode replay: how long one engine chunk takes for given
// knobs, calibrated from benchmark runs (`ari-perf --json` / `ari-bench --json`).
//
// A chunk of n tokens (prefill or decode) takes
//   seconds = overhead + n / tps
// with tps = the entry's prefill_tps or decode_tps and overhead its
// chunk_overhead_ms (prefill) or decode_overhead_ms (decode), then scaled:
//   * threads: the entry with the requested precision whose (isa, layer_drop) match
//     best and whose thread count is closest; a different thread count scales the
//     time by (entry_threads / threads)^thread_scaling;
//   * ISA tier: time x isa_speed[entry isa] / isa_speed[effective tier], where the
//     effective tier is the knob's tier capped by best_isa (the machine's best);
//   * layer drop: time x (layers - drop) / layers when the entry has drop 0;
//   * efficiency cores: time / efficiency_core_speed.
//
// File format (JSON, docs/drive_logs.md "Cost model"):
//   {"format": "ari-sim-cost-1", "source": "...", "layers": 24, "best_isa": "avx2",
//    "thread_scaling": 0.8, "efficiency_core_speed": 0.5,
//    "isa_speed": {"scalar": 0.1, "avx2": 1.0, "avx512vnni": 1.3, ...},
//    "entries": [{"precision": "w8a16", "threads": 2, "isa": "avx2", "layer_drop": 0,
//                 "prefill_tps": 40.0, "chunk_overhead_ms": 12.0,
//                 "decode_tps": 14.0, "decode_overhead_ms": 0.0}, ...]}
// BuildCostModelFromBench() makes one from benchmark JSON objects.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"
#include "sim/error.h"

namespace ari::sim {

struct CostEntry {
  runtime::Precision precision = runtime::Precision::kW8A16;
  int threads = 1;
  std::string isa = "avx2";  // runtime::kernels::IsaTierName
  int layer_drop = 0;
  double prefill_tps = 100.0;
  double chunk_overhead_ms = 0.0;
  double decode_tps = 10.0;
  double decode_overhead_ms = 0.0;
};

struct CostModel {
  std::string source;  // how it was measured
  int layers = 24;
  std::string best_isa = "avx2";
  double thread_scaling = 0.8;
  double efficiency_core_speed = 0.5;
  std::map<std::string, double> isa_speed;  // tier name -> relative speed
  std::vector<CostEntry> entries;

  // Seconds one chunk of `tokens` tokens takes. `efficiency` = efficiency cores.
  double ChunkSeconds(const runtime::ChunkKnobs& knobs, runtime::ChunkPhase phase, int tokens,
                      bool efficiency) const;
  // Checks entries (>= 1, tps > 0, threads >= 1, overhead >= 0) and factors.
  Result<void> Validate() const;
};

// The built-in isa_speed table (relative to avx2 = 1).
std::map<std::string, double> DefaultIsaSpeed();

Result<CostModel> ParseCostModelJson(std::string_view json, std::string_view origin = "<cost>");
Result<CostModel> LoadCostModel(const std::filesystem::path& path);
// The compiled-in copy of sim/cost_default.json.
Result<CostModel> BuiltinCostModel();
std::string CostModelToJson(const CostModel& model);

struct BenchCalibration {
  int layers = 24;
  std::string isa = "avx2";          // tier the benchmark ran with
  double efficiency_core_speed = 0.5;
  double thread_scaling = 0.8;
};

// One entry per benchmark object (runtime::BenchResult::ToJson: precision, threads,
// prompt[{tokens, tps{median}}], decode_tps{median}). The prefill line is fitted
// through the (tokens, tokens / tps) points: slope = 1 / prefill_tps, intercept =
// chunk_overhead_ms (>= 0). Each text may hold several objects, one per line.
Result<CostModel> BuildCostModelFromBench(const std::vector<std::string>& bench_json_texts,
                                          const BenchCalibration& calibration);

}  // namespace ari::sim
