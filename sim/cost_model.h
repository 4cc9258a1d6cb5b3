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
//   * layer drop: time x F(knob drop) / F(entry drop), F the measured time factor per
//     drop level of the phase ("layer_drop_cost", from `ari-dropcost --json`; a table
//     measured on a model of other depth is read at level x its_layers / layers,
//     interpolated; levels past its end extrapolate its last step). A dropped block still
//     projects K and V (runtime/engine/fast_forward.h), so F(k) > (layers - k) / layers.
//     Without a table, F(k) = (layers - k) / layers (a dropped block assumed free);
//   * efficiency cores: time / efficiency_core_speed;
//   * CPU frequency cap (model-mode replay of a log's cpu_frequency_cap events): when
//     the cluster class the chunk runs on is capped below the nominal frequency the
//     figures were measured at, time x 1 + s * (nominal_khz / cap_khz - 1), with s the
//     phase's freq_sensitivity (prefill compute-bound ~1, decode memory-bound ~0.5).
//     No nominal_khz for the class (0, the default) -> caps have no effect; a cap >=
//     nominal (or 0 = uncapped) -> no effect (no boost above nominal is modeled).
//
// File format (JSON, docs/drive_logs.md "Cost model"):
//   {"format": "ari-sim-cost-1", "source": "...", "layers": 24, "best_isa": "avx2",
//    "thread_scaling": 0.8, "efficiency_core_speed": 0.5,
//    "isa_speed": {"scalar": 0.1, "avx2": 1.0, "avx512vnni": 1.3, ...},
//    "nominal_khz": {"performance": 2400000, "efficiency": 1800000},   (optional)
//    "freq_sensitivity": {"prefill": 1.0, "decode": 0.5},              (optional)
//    "park_ms_per_1k_positions": 0.8,                                   (optional)
//    "spill_ms_per_1k_positions": 48.0,                                 (optional)
//    "restore_ms_per_1k_positions": 31.0,                               (optional)
//    "layer_drop_cost": {"layers": 24, "source": "...",                 (optional)
//                        "prefill": [1, 0.97, ...], "decode": [1, 0.96, ...]},
//    "entries": [{"precision": "w8a16", "threads": 2, "isa": "avx2", "layer_drop": 0,
//                 "prefill_tps": 40.0, "chunk_overhead_ms": 12.0,
//                 "decode_tps": 14.0, "decode_overhead_ms": 0.0}, ...]}
// BuildCostModelFromBench() makes one from benchmark JSON objects.
//
// Slot parking (qos/scheduler.h): parking a turn, and resuming it, each take
//   seconds = park_ms_per_1k_positions * positions / 1000 / 1000
// (a copy of the turn's KV rows; `park_bench`, runtime/bench/park_bench.cc, measures it).
// Parked sessions on disk (ChunkRunner::SpillSlot / RestoreSession): spilling an idle
// session, and restoring it, take
//   seconds = spill_ms_per_1k_positions (restore_ms_per_1k_positions) * positions / 1e6
// (zstd + write + fsync, read + decompress; `spill_bench`, runtime/bench/spill_bench.cc,
// measures both as spill_ms_per_1k_pos and restore_ms_per_1k_pos).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine/engine.h"
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
  // Frequency (kHz) the entries' figures correspond to, per cluster class; 0 = unknown
  // (CPU frequency caps then have no effect on that class).
  double nominal_khz_performance = 0;
  double nominal_khz_efficiency = 0;
  // Share of a chunk's time that scales with 1 / frequency, per phase, in [0, 1].
  // Constrained decoding (a request with a response format): the sampler's mask +
  // constraint advance per decoded token on a performance core at nominal clock, us
  // ("mask_us_per_token"; measured with grammar_bench, docs/structured_output.md).
  double mask_us_per_token = 0;
  // Seconds the mask adds to `tokens` decoded tokens (efficiency cores slower, a capped
  // clock slower as for prefill: it is compute on one thread).
  double MaskSeconds(int tokens, bool efficiency, uint32_t cap_khz) const;
  double freq_sensitivity_prefill = kDefaultFreqSensitivityPrefill;
  double freq_sensitivity_decode = kDefaultFreqSensitivityDecode;
  static constexpr double kDefaultFreqSensitivityPrefill = 1.0;  // compute-bound
  static constexpr double kDefaultFreqSensitivityDecode = 0.5;   // memory-bound (assumed)
  // Measured time factor per layer drop level (index = level, [0] = 1) per phase, on a
  // model of drop_cost_layers blocks; empty: whole blocks assumed free (see above).
  std::vector<double> drop_cost_prefill, drop_cost_decode;
  int drop_cost_layers = 0;
  std::string drop_cost_source;
  // Park (or resume) time per 1000 KV positions of the turn, ms (see above). Default:
  // park_bench, llama-0.3b shape, F16 KV, 1024 positions, idle AMD EPYC (docs/memory.md).
  double park_ms_per_1k_positions = kDefaultParkMsPer1kPositions;
  static constexpr double kDefaultParkMsPer1kPositions = 0.8;
  double ParkSeconds(int positions) const { return park_ms_per_1k_positions * positions * 1e-6; }
  // Spill (restore) time per 1000 KV positions of an idle session, ms (see above). The
  // defaults: spill_bench, llama-0.3b shape, F16 KV, 1024 positions, idle AMD EPYC, the
  // spill folder on its virtio disk (docs/memory.md "Parked sessions on disk").
  double spill_ms_per_1k_positions = kDefaultSpillMsPer1kPositions;
  double restore_ms_per_1k_positions = kDefaultRestoreMsPer1kPositions;
  static constexpr double kDefaultSpillMsPer1kPositions = 48.0;
  static constexpr double kDefaultRestoreMsPer1kPositions = 31.0;
  double SpillSeconds(int positions) const { return spill_ms_per_1k_positions * positions * 1e-6; }
  double RestoreSeconds(int positions) const {
    return restore_ms_per_1k_positions * positions * 1e-6;
  }

  // F(level) of the phase (1 at level 0).
  double DropFactor(runtime::ChunkPhase phase, int level) const;

  // Seconds one chunk of `tokens` tokens takes. `efficiency` = efficiency cores;
  // `cap_khz` = the frequency cap in force on that cluster class (0 = none).
  double ChunkSeconds(const runtime::ChunkKnobs& knobs, runtime::ChunkPhase phase, int tokens,
                      bool efficiency, uint32_t cap_khz = 0) const;
  // The time multiplier of a frequency cap (1 when it has no effect; see above).
  double FrequencyFactor(runtime::ChunkPhase phase, bool efficiency, uint32_t cap_khz) const;
  // Checks entries (>= 1, tps > 0, threads >= 1, overhead >= 0) and factors
  // (nominal_khz >= 0, freq_sensitivity in [0, 1]).
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
  std::string isa = "avx2";  // tier the benchmark ran with
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
