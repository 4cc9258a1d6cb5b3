// Closed-loop thermal run: the thermal RC model (thermal/rc_model.h) heated by what the
// engine really ran, read back by the real governor + scheduler, in virtual time.
// ari-bench --scenario thermal prints it; tests run it on a fake engine.
//
// Time. A thermal::ManualClock drives the scheduler. Each chunk advances it by the
// compute time the engine reports (a real engine really computes; a fake one reports
// what it likes), pacing pauses and idle gaps advance it without waiting. So a run of
// D virtual seconds costs about D x (busy share) seconds of wall time.
//
// Heat. While a chunk computes the RC model gets busy fraction 1 with the chunk's worker
// count, precision (W8A16 / W4A8) and the core class of its CPU mask; during pauses and
// idle gaps busy 0 (the measured busy fraction, interval by interval; exact for the
// piecewise-constant power).
// `speedup` divides both heat capacities: time constants get that many times shorter
// (the default parameters' 260 s package constant becomes 6.5 s at 40) while every
// steady-state temperature stays the same, so bands change within tens of seconds.
//
// Ambient: from ambient_c, linearly to ambient_peak_c at the middle of the run, and
// back to ambient_c at the end (equal values: constant ambient).
//
// Load (steady): one NORMAL chat request is always waiting, and a CRITICAL request
// arrives every critical_every_s.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qos/policy.h"
#include "runtime/engine/engine.h"
#include "sim/error.h"
#include "thermal/rc_model.h"
#include "thermal/topology.h"

namespace ari::sim {

struct ThermalRunOptions {
  const qos::Policy* policy = nullptr;           // required
  runtime::ChunkRunner* engine = nullptr;        // required, >= 2 slots
  int32_t vocab_size = 0;                        // prompt token ids are drawn from [1, vocab)
  std::optional<thermal::CpuTopology> topology;  // nullopt: detected
  int32_t max_prefill_chunk = 0;                 // the engine's max_chunk (0 = no clamp)
  thermal::RcParams rc;      // ambient/initial temperatures are taken from below
  double speedup = 40.0;     // heat capacities / speedup (>= 1)
  double duration_s = 60.0;  // virtual seconds
  double ambient_c = 45.0;
  double ambient_peak_c = 65.0;     // reached at duration / 2
  std::optional<double> initial_c;  // nullopt: ambient_c
  int32_t normal_prompt = 64;
  int32_t normal_max_tokens = 32;
  int32_t critical_prompt = 16;
  int32_t critical_max_tokens = 8;
  double critical_every_s = 10.0;  // 0: no CRITICAL requests
};

// One row per decision change (the scheduler's OnDecision).
struct ThermalRunRow {
  double t_s = 0.0;
  double die_c = 0.0;
  double ambient_c = 0.0;
  std::string band;
  qos::Urgency urgency = qos::Urgency::kNormal;
  bool idle = false;
  bool conservative = false;
  bool band_changed = false;  // the thermal band differs from the previous row's
  qos::Knobs knobs;
  std::string reason;
};

struct ThermalRunResult {
  std::vector<ThermalRunRow> rows;
  int band_changes = 0;  // rows whose band differs from the previous row
  double max_die_c = 0.0;
  double final_die_c = 0.0;
  double busy_fraction = 0.0;  // compute time / virtual time
  int64_t chunks = 0;
  int32_t critical_done = 0, normal_done = 0;
  int32_t other_terminals = 0;  // ended other than DONE during the run (e.g. deadline)
  int32_t unfinished = 0;       // still live at the end (ended SHUTDOWN)
  double duration_s = 0.0;
  double speedup = 0.0;
  double slow_tau_s = 0.0, fast_tau_s = 0.0;  // after the speedup
};

// Runs the loop. Errors: missing policy/engine, < 2 slots, bad RC parameters,
// speedup < 1, duration <= 0, vocab_size < 2.
Result<ThermalRunResult> RunThermal(const ThermalRunOptions& options);

// Fixed-width table: time, die temperature, ambient, band, class, precision, cores x
// threads, prefill/decode chunk, pause, layer drop, reason. Then a summary line.
std::string ThermalRunTable(const ThermalRunResult& result);
// One JSON object: {"scenario":"thermal", ..., "rows":[{...}, ...]}.
std::string ThermalRunJson(const ThermalRunResult& result);

}  // namespace ari::sim
