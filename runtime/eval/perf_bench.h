// Model benchmark over the Engine: prompt t/s, decode t/s, TTFT, time to ready, peak RSS,
// resident embedding bytes (mincore), streaming read bandwidth and roofline fraction.
// Driven by ari-perf (runtime/tools/perf.cc) and sim/tools/bench_main.cc (ari-bench).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/engine/engine.h"

namespace ari::runtime {

struct BenchOptions {
  std::filesystem::path model;
  Precision precision = Precision::kW8A16;
  // Ceiling of the kernels' ISA tier (ChunkKnobs::max_isa; default: the best of this build's
  // family), e.g. kAvx2 to run an AVX2-only host's kernels, kAvx512Vnni for AVX-512
  // without the AMX tiles.
  kernels::IsaTier max_isa = ChunkKnobs{}.max_isa;
  int threads = 2;
  std::vector<int> prompt_sizes = {64, 128};
  int n_gen = 64;
  int reps = 5;
  bool measure_bandwidth = true;
  uint64_t bandwidth_bytes = 512ull << 20;  // buffer streamed by the bandwidth probe
  // With the probe on: extra decode runs (after the figures above, peak RSS included),
  // each bracketed by a probe right before and after it, so that decode speed and
  // bandwidth are measured under the same machine conditions (paired_* below). 0 = none.
  int paired_reps = 3;
};

struct Stat {
  std::vector<double> values;
  double median = 0, min = 0, max = 0;
};

struct BenchResult {
  std::string model, precision;
  std::string isa;  // the tier the kernels dispatched to (ChunkResult::isa of the chunks)
  // The tiers of the matmul kernels the measured chunks called (ChunkResult::gemv_tiers /
  // gemm_tiers as kernels::IsaTiersText: "avx512vnni", "none").
  std::string gemv_isas, gemm_isas;
  int threads = 0;
  double time_to_ready_ms = 0;
  std::string arena_prefault;  // the engine plan's note on the arena's prefault (if any)
  std::vector<int> prompt_sizes;
  std::vector<Stat> prompt_tps;  // per prompt size
  std::vector<Stat> ttft_ms;     // per prompt size
  Stat decode_tps;
  uint64_t peak_rss_bytes = 0;                             // VmHWM
  uint64_t embd_resident_bytes = 0, embd_table_bytes = 0;  // mincore after the runs
  uint64_t embd_resident_before_bytes = 0;                 // mincore right after the eviction
  bool embd_evicted = false;  // the table's pages were dropped from the page cache first
  double dispatches_per_decode_token = 0;  // thread-pool dispatches (barriers)
  double dispatches_per_prefill_token = 0;
  uint64_t weight_bytes_per_token = 0;
  // The probe (runtime/eval/bandwidth_probe.h): widest loads, 1-8 streams per thread,
  // threads pinned, best kept; `probe` says how it read.
  double bandwidth_gbs = 0;
  std::string probe;
  double roofline_tps = 0, roofline_fraction = 0;
  // What decode itself streamed: weight bytes per token x median decode t/s, 1e9 B/s.
  double decode_read_gbs = 0;
  // Decode read faster than the probe (fraction > 1): the probe is not the fastest read of
  // this machine and every fraction here flatters. Printed as a warning, never hidden.
  bool probe_too_slow = false;
  // Process CPU time / (wall time x threads) of each decode run: near 1 when the run had its
  // CPUs (workers spin between dispatches); well below 1 when other processes took them, and
  // then the wall-clock figures measure the machine's load more than the code.
  Stat decode_cpu_share;
  // Paired runs (BenchOptions::paired_reps): per run, decode t/s / (bandwidth / weight bytes
  // per token), bandwidth = mean of the probes right before and after that decode run.
  Stat paired_bandwidth_gbs, paired_fraction;
  std::string ToTable() const;
  std::string ToJson() const;
};

Result<BenchResult> RunModelBench(const BenchOptions& o);
// Streaming read bandwidth of `bytes` with `threads` threads, GB/s (the probe's best).
double MeasureReadBandwidth(uint64_t bytes, int threads);

}  // namespace ari::runtime
