// Preemption scenario: how much later a CRITICAL request's first token comes while a long
// NORMAL prefill runs than on an idle scheduler (goal: at most 1.25x). ari-bench
// --scenario preempt prints it; tests run it on a fake engine.
//
// Each repetition runs a fresh qos::Scheduler in real time (SteadyClock) on the engine:
//  1. a CRITICAL request alone: its time to first token is the idle figure;
//  2. busy_slots - 1 NORMAL turns take slots first (busy_slots > 0), so the CRITICAL
//     request must park a turn to get one;
//  3. a long NORMAL prompt; after its second prefill chunk, a CRITICAL request arrives
//     (r + 0.5) / reps of the NORMAL chunk period later (compute + pacing pause, from its
//     first two chunks), so the repetitions sample arrival phases across the whole cycle;
//     its time to first token is the loaded figure.
// Every figure is also given in CPU time per worker (process CPU time of each chunk /
// its threads), which other processes' load on the machine does not inflate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qos/policy.h"
#include "runtime/engine/engine.h"
#include "sim/error.h"

namespace ari::sim {

struct PreemptRunOptions {
  const qos::Policy* policy = nullptr;     // required
  runtime::ChunkRunner* engine = nullptr;  // required
  int32_t vocab_size = 0;                  // prompt token ids are drawn from [1, vocab)
  int32_t context_length = 0;              // the NORMAL prompt is cut to context - 80
  int32_t normal_prompt = 1024;
  int32_t critical_prompt = 16;
  int32_t reps = 5;
  int32_t busy_slots = 0;             // > 0: that many slots busy when CRITICAL arrives
  std::optional<double> celsius;      // a fixed temperature (its band's knobs); nullopt: no
                                      // sensor, the conservative knobs
  int32_t max_prefill_chunk = 128;    // the engine's max_chunk
  int64_t wait_timeout_ms = 600'000;  // a request without its terminal event by then fails
};

// One repetition. Times in ms; ratio = loaded / idle TTFT.
struct PreemptRep {
  double idle_ms = 0.0, loaded_ms = 0.0, ratio = 0.0;
  double arrival_offset_ms = 0.0, period_ms = 0.0;  // CRITICAL's arrival phase
  int32_t parked = 0;                               // turns parked during the repetition
  // The NORMAL request's prefill rate without CRITICAL's steps (pauses included) and its
  // compute per chunk.
  double normal_tok_s = 0.0, normal_chunk_ms = 0.0;
  // The same in CPU time per worker; cpu_normal_tok_s adds the pacing pauses.
  double cpu_idle_ms = 0.0, cpu_loaded_ms = 0.0, cpu_ratio = 0.0;
  double cpu_normal_chunk_ms = 0.0, cpu_normal_tok_s = 0.0;
  // CRITICAL's first token came before the NORMAL request's last prefill chunk started.
  bool critical_first = false;
};

struct PreemptRunResult {
  int32_t normal_prompt = 0;  // after the context cut
  int32_t busy_slots = 0;
  std::string knobs;  // the NORMAL class's knobs, and where they come from
  std::vector<PreemptRep> reps;
};

// Runs the repetitions. Errors: missing policy/engine, vocab_size < 2, reps < 1, a
// NORMAL prompt shorter than 2 chunks, busy_slots above the engine's slots, a request the
// scheduler does not admit, or one without its terminal event within wait_timeout_ms.
Result<PreemptRunResult> RunPreempt(const PreemptRunOptions& options);

// Median of the values (0 for none).
double PreemptMedian(std::vector<double> values);

// The knobs line, one line per repetition and the summary (median ratio against the goal).
std::string PreemptRunTable(const PreemptRunResult& result);
// One JSON object: {"scenario":"preempt", medians, "reps":[{...}, ...]}.
std::string PreemptRunJson(const PreemptRunResult& result);

}  // namespace ari::sim
