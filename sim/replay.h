// Model-mode replay of a drive log: a discrete-event simulation in virtual time that
// runs the real qos::Scheduler and governor (ManualClock) over a SimEngine (cost model)
// and the RC thermal model of thermal/rc_model.h.
//
// Loop: events of the log are applied at their time (requests are submitted, the
// ambient goes to the RC model, memory samples feed the memory ladder); the scheduler
// steps; a chunk advances the clock by its modeled duration while the RC model is
// loaded with the chunk's cores/precision (busy 1.0 during the chunk, idle otherwise,
// so the integration is exact for that piecewise-constant load); between chunks the
// clock jumps to the next thing due (next step, next log event, next sample). Every
// sample_period (1 s) the scheduler is stepped even when idle (the governor keeps
// tracking the temperature) and a timeline sample is taken.
//
// The governor reads the RC model's die temperature, not the log's soc_temperature
// samples (those are the world as recorded); the first soc_temperature sample (else the
// header's ambient) sets the RC model's initial temperature. Prompt length in tokens:
// ceil(bytes / 4) + 8 (template). Answers run to max_tokens (no EOS in model mode).
// CPU frequency caps (cpu_frequency_cap events) apply from their time on: each event
// replaces all caps (unlisted clusters uncapped); a cluster maps to a class by name
// ("big"/"prime"/"performance" -> performance, "little"/"efficiency" -> efficiency), else
// by index (0 -> efficiency, >= 1 -> performance; the generated logs name cluster 0
// "little" and 1 "big"); several clusters of one class: the lowest non-zero cap. A chunk
// takes the cap of its class in force at its start (CostModel::FrequencyFactor; no
// effect unless the cost model has that class's nominal_khz). The RC model's power is
// not reduced under a cap (conservative). Vehicle state is not modeled. Fully
// deterministic; a log without caps gives the same results as before caps were modeled.
// (ReplayOptions::prompt_tokens replaces the token estimate, e.g. with a real tokenizer.)
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qos/policy.h"
#include "sim/cost_model.h"
#include "sim/drive_log.h"
#include "sim/error.h"
#include "thermal/rc_model.h"

namespace ari::sim {

struct QualityTable;

// Model mode: one simulated chunk (ReplayOptions::on_chunk).
struct ChunkTrace {
  double t_s = 0;  // start, virtual seconds
  runtime::ChunkKnobs knobs;
  runtime::ChunkPhase phase = runtime::ChunkPhase::kPrefill;
  int tokens = 0;
  double seconds = 0;       // modeled duration (cap factor included)
  bool efficiency = false;  // ran on the efficiency class
  uint32_t cap_khz = 0;     // cap of that class at the start (0 none)
};

// The SoC's own thermal protection (hardware DVFS, whatever the policy decides): at
// die >= passive_c every cluster is capped at passive_fraction of its nominal clock, at
// >= critical_c at critical_fraction; a level is left below its celsius - hysteresis.
// The cap joins the log's cpu_frequency_cap (the lower wins; CostModel::FrequencyFactor,
// so it needs the cost model's nominal_khz) and scales the RC model's dynamic power by
// fraction^power_exponent. Checked at every scheduler step and sample (1 s).
struct SocProtection {
  bool enabled = false;
  double passive_c = 0, passive_hysteresis_c = 0, passive_fraction = 1;
  double critical_c = 0, critical_hysteresis_c = 0, critical_fraction = 1;
  double power_exponent = 2;
};

struct ReplayOptions {
  const qos::Policy* policy = nullptr;  // required
  const CostModel* cost = nullptr;      // required
  thermal::RcParams rc;                 // ambient/initial taken from the log
  double base_power_w = -1;             // < 0: the generator's for the log's scenario
                                        //   (ScenarioBasePowerW), else rc.idle_power_w
  int32_t slots = 2;
  int32_t park_areas = 1;  // slot parking (qos/scheduler.h); 0 = none (a request waits)
  // With a hardware profile: base power = rc.idle_power_w (the profile's SoC idle) plus
  // the scenario's extra (ScenarioBasePowerW - the RcParams default idle, >= 0).
  bool scenario_power_on_top = false;
  SocProtection protection;   // disabled: no hardware throttling
  std::string hardware_name;  // reported (empty: none given)
  int performance_cpus = 2;   // simulated SoC: CPUs 0.. are performance,
  int efficiency_cpus = 2;    //   the next ones efficiency
  int64_t sample_period_ms = 1000;
  int32_t max_prefill_chunk = 128;
  bool record_decisions = true;  // the decision timeline (off in the tuner)
  bool record_samples = true;    // the temperature timeline (off in the tuner)
  // Called for every chunk as it starts (tests, tracing); may be null.
  std::function<void(const ChunkTrace&)> on_chunk;
  // Prompt length in tokens; null: ceil(bytes / 4) + 8 (ari-sim --tokenizer MODEL.gguf
  // counts with the model's own tokenizer, as ari-node does).
  std::function<int(const std::string& prompt)> prompt_tokens;
  // The model's measured quality (ari-ppl --json; sim/quality_table.h): quality_loss is
  // then the mean per-token loss of the (precision, drop) each token ran at. Null: the
  // proxy (share of W4A8 tokens + 0.1 x mean layers dropped). Not owned.
  const QualityTable* quality = nullptr;
};

struct DecisionRecord {  // one entry in a request's history or the global timeline
  double t_s = 0;
  std::string urgency;
  bool idle = false;
  int band = 0;
  int memory_band = -1;
  bool conservative = false;
  std::string knobs;  // qos::KnobsToString
  std::string reason;
};

// Live mode only: one TokenChunk as the simulator received it (times are real seconds
// since the request was published; the node's own figures from the chunk's Timing).
struct ChunkRecord {
  double t_s = 0;  // reception, seconds after publication
  uint32_t seq = 0;
  int tokens = 0;  // token ids in this chunk
  bool terminal = false;
  std::string status;    // wire status (OK for non-terminal chunks)
  std::string decision;  // governor decision in force (TokenChunk.decision)
  int band = -1;         // thermal band the node reported at reception (-1 unknown)
  double node_queue_wait_s = 0, node_ttft_s = 0, node_tokens_per_s = 0;
  int node_tokens_generated = 0;
  // What ran, next to what was decided (TokenChunk trace; docs/interface.md "What ran").
  // Names as component/client/chunk_trace_text.h prints them ("W8A16", "W4A8",
  // "fp32-reference"; "avx2"...; "f16"...); CPUs bit i = CPU i.
  bool has_trace = false;  // false on terminal chunks
  std::string ran_precision, decided_precision, ran_isa, decided_isa, ran_kv, decided_kv;
  int ran_threads = 0, decided_threads = 0, ran_threads_observed = 0;
  int ran_tile_gemms = 0;  // GEMM calls on AMX tiles (TokenChunk::ran_tile_gemms)
  uint32_t ran_gemv_isas = 0, ran_gemm_isas = 0;  // kernels' tiers (TokenChunk::ran_gemv_isas)
  uint64_t ran_cpus = 0, decided_cpus = 0;
  int ran_layers_dropped = 0, decided_layers_dropped = 0;
  int pin_failures = 0;
  bool isa_refused = false, on_fallback = false;
};

struct RequestReport {
  uint64_t id = 0;
  std::string urgency, client, category;
  std::string node;  // the simulated node that served it (fleet replay; "" = one node)
  double arrival_s = 0;
  int prompt_tokens = 0, max_tokens = 0, tokens = 0, chunks = 0;
  double deadline_s = 0;        // relative to arrival (class default applied); 0 = none
  std::string response_format;  // drive log's response format name (empty: free text)
  double mask_s = 0;            // compute time spent on the response format's mask
  std::string status;           // qos::TerminalStatusName, or "BUSY"/"INVALID" at submit
  std::string message;
  double queue_wait_s = -1;               // arrival -> first chunk (-1 never ran)
  double ttft_s = -1;                     // arrival -> first token (-1 none)
  double completion_s = -1;               // arrival -> terminal
  bool deadline_missed = false;           // not DONE in time (rejected / stopped / late)
  std::vector<DecisionRecord> decisions;  // knob changes while its chunks ran
  std::vector<ChunkRecord> chunk_log;     // live mode: every chunk received
};

struct Percentiles {
  int n = 0;
  double p50 = 0, p95 = 0, p99 = 0, max = 0;
};

struct ClassReport {
  std::string urgency;
  int requests = 0, done = 0, deadline_misses = 0, rejected = 0;
  Percentiles ttft_s, completion_s, queue_wait_s;
};

struct Sample {
  double t_s = 0, die_c = 0, ambient_c = 0, power_w = 0, busy = 0;
  int band = 0;
};

struct ReplaySummary {
  double duration_s = 0;
  double busy_s = 0;
  double peak_die_c = 0, peak_t_s = 0;
  double energy_j = 0;                        // integral of the RC model's power
  std::vector<double> band_time_s;            // per thermal band (virtual time)
  std::array<double, 2> precision_busy_s{};   // W8A16, W4A8 compute time
  std::array<int64_t, 2> precision_tokens{};  // tokens (prefill + decode) per precision
  // Live mode: tokens the node computed on the fp32 reference path (a plain GGUF: neither
  // W8A16 nor W4A8 ran), from the chunks' what-ran trace.
  int64_t reference_tokens = 0;
  std::vector<double> drop_busy_s;  // index = layers dropped
  std::vector<int64_t> drop_tokens;
  double memory_band_time_s = 0;  // time with any memory band active
  // CPU frequency caps, [0] performance class, [1] efficiency: virtual time a non-zero
  // cap was in force, and compute time of chunks the cap slowed (factor > 1).
  std::array<double, 2> cap_time_s{};
  std::array<double, 2> capped_busy_s{};
  // [W8A16, W4A8][layers dropped]: tokens computed at that precision and drop level.
  std::array<std::vector<int64_t>, 2> precision_drop_tokens;
  // Per token: ReplayOptions::quality's loss, else share at W4A8 + 0.1 x mean layers dropped.
  double quality_loss = 0;
  // Hardware protection (ReplayOptions::protection): virtual time at a passive / critical
  // trip level, and the number of times a trip level was entered.
  double hw_throttle_s = 0, hw_critical_s = 0;
  int hw_throttle_events = 0;
  int64_t chunks = 0;
  // Slot parking: turns parked, resumed, and the virtual time both took.
  int64_t parks = 0, resumes = 0;
  double park_s = 0;
  double mask_s = 0;          // compute time on constrained decoding's mask (all requests)
  int64_t masked_tokens = 0;  // tokens decoded under a response format
  double wall_s = 0;  // real time the replay took (not deterministic; not in JSON by default)
};

struct ReplayReport {
  std::string mode = "model";  // "model" or "live"
  double time_scale = 1;       // live: log time ran this many times faster
  std::string log_name, scenario, policy_name, cost_source, hardware;
  std::vector<std::string> band_names;
  std::vector<double> band_enter_c;     // -inf for the base band
  std::vector<RequestReport> requests;  // in log order
  std::vector<ClassReport> classes;     // CRITICAL..BACKGROUND
  std::vector<Sample> samples;
  std::vector<DecisionRecord> decisions;  // global timeline (OnDecision)
  ReplaySummary summary;

  const ClassReport& Class(qos::Urgency u) const { return classes[qos::Rank(u)]; }
};

Result<ReplayReport> ReplayModel(const dl::DriveLog& log, const ReplayOptions& options);

// Nearest-rank percentile of unsorted values (0 for none).
Percentiles ComputePercentiles(std::vector<double> values);

// Per class (CRITICAL..BACKGROUND) figures of a list of requests (both modes).
std::vector<ClassReport> SummarizeClasses(const std::vector<RequestReport>& requests);

}  // namespace ari::sim
