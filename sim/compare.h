// ari-sim compare: the same drive logs replayed in model mode with several policies on
// one hardware profile, side by side (docs/tuning.md "Governor vs baselines").
//
// JSON ("ari-sim-compare-1"): {"format", "hardware", "model", "cost_model", "logs": [...],
//   "policies": [...], "runs": [{"policy", "log", "limit_c", "peak_die_c", "peak_t_s",
//   "hw_throttle_s", "hw_critical_s", "hw_throttle_events", "energy_j", "quality_loss",
//   "quality_measured", "busy_s", "duration_s", "band_time_s": {...},
//   "classes": [{"class", "requests", "done", "deadline_misses", "ttft_p95_s",
//   "completion_p95_s"}], "temps": [[t_s, die_c], ...] (every sample_step-th sample),
//   "decisions": [[t_s, band, "knobs", "class", idle], ...] (knob changes only)}]}
// limit_c = the enter_c of the policy's hottest thermal band ("the policy's limit").
// HTML: one self-contained page (inline script, canvas), title "ok" once drawn:
// the table per policy and class, the temperature traces of every policy overlaid
// per log (trip points dashed), and a decision strip per policy.
#pragma once

#include <string>
#include <vector>

#include "qos/policy.h"
#include "sim/drive_log.h"
#include "sim/error.h"
#include "sim/replay.h"

namespace ari::sim {

struct CompareRun {
  std::string policy, log;
  double limit_c = 0;
  ReplayReport report;
};

struct CompareReport {
  std::string hardware, model, cost_source;
  bool quality_measured = false;
  std::vector<double> trips_c;  // the profile's passive/critical trip points (if any)
  std::vector<std::string> logs, policies;
  std::vector<CompareRun> runs;  // log-major: runs[l * policies + p]

  const CompareRun& Run(size_t log, size_t policy) const {
    return runs[log * policies.size() + policy];
  }
};

struct CompareInput {
  std::vector<const dl::DriveLog*> logs;
  std::vector<std::string> log_names;
  std::vector<const qos::Policy*> policies;
  ReplayOptions base;  // cost, CPUs, RC, protection, quality; policy is set per run
  std::string hardware, model;
};

// Replays every (log, policy) pair; policies run in parallel per log (threads >= 1).
Result<CompareReport> RunCompare(const CompareInput& input, int threads = 2);

std::string CompareToJson(const CompareReport& report);
std::string CompareToText(const CompareReport& report);
std::string CompareToHtml(const CompareReport& report);

}  // namespace ari::sim
