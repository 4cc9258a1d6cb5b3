// The QoS policy tuner behind ari-tune: searches the policy parameters named in a
// search space (idl/sim_tune.proto) with model-mode replays of drive logs.
//
// Objective, lexicographic (smaller is better), over all logs:
//   0. feasibility: peak die temperature <= the space's peak_celsius_limit (the excess
//      decides between infeasible candidates);
//   1. CRITICAL deadline misses (sum over logs);
//      (with several nodes, FleetOptions: over the whole fleet, the hottest node's peak)
//   2. NORMAL p95 completion latency (max over logs; a NORMAL request that did not
//      finish counts as infinitely late), compared at 0.1 s resolution;
//   3. quality loss (mean over logs, ReplaySummary::quality_loss): with a measured
//      quality table of the model (TuneOptions::quality, ari-tune --quality; sim/
//      quality_table.h) the mean per-token 1 - top-1 agreement with fp32 of the
//      (precision, layer drop) each token ran at; without one the proxy: share of tokens
//      computed at W4A8 plus 0.1 x mean layers dropped per token.
//
// Search (deterministic for a seed): the starting policy first, then batches of
// `threads` candidates derived from the best so far (1-2 parameters changed; one in
// five candidates drawn at random), each batch evaluated in parallel (one replay per
// thread), the best updated in candidate order. Candidates are applied to the starting
// policy, printed with PolicyToText and parsed back through the policy validator: an
// invalid one (e.g. exit_c above enter_c) is counted and skipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "component/client/routing.h"
#include "qos/policy.h"
#include "sim/cost_model.h"
#include "sim/drive_log.h"
#include "sim/error.h"
#include "sim/fleet.h"
#include "sim/quality_table.h"
#include "sim/replay.h"

namespace ari::sim {

struct TuneParam {
  std::string name;
  std::vector<std::string> values;  // the grid, as text
};

struct TuneSpace {
  std::vector<TuneParam> params;
  double peak_celsius_limit = 0;  // 0 = none
};

Result<TuneSpace> ParseTuneSpace(std::string_view text, std::string_view origin = "<space>");
Result<TuneSpace> LoadTuneSpace(const std::filesystem::path& path);

// Sets one parameter (a TuneParam name) on a policy; kInvalidArgument names the problem.
Result<void> ApplyTuneParam(qos::Policy& policy, std::string_view name, std::string_view value);
// The parameter's value in a policy, as text ("*" paths: the first match).
Result<std::string> TuneParamValue(const qos::Policy& policy, std::string_view name);

// Routing weights of a fleet replay (sim/fleet.h): parameters named "routing.<field of
// component::RoutingWeights>" (warm_celsius, hot_celsius, warm_slowdown, hot_slowdown,
// unknown_tokens_per_s, turn_tokens, chunk_tokens, stale_ms). Values must be positive
// and finite; warm_celsius <= hot_celsius is checked on the whole candidate.
bool IsRoutingParam(std::string_view name);
Result<void> ApplyRoutingParam(component::RoutingWeights& w, std::string_view name,
                               std::string_view value);
Result<std::string> RoutingParamValue(const component::RoutingWeights& w, std::string_view name);

struct TuneScore {
  bool valid = false;  // the candidate policy passed the validator and replayed
  bool feasible = false;
  double peak_c = 0;
  int critical_misses = 0;
  double normal_p95_s = 0;
  double quality_loss = 0;
  double energy_j = 0;

  // Lexicographic objective (see the file comment); invalid is worst.
  bool BetterThan(const TuneScore& other, double peak_limit) const;
};

struct TuneCandidate {
  std::vector<int> choice;  // per param: index into values, -1 = starting value
  TuneScore score;
  std::string error;  // why invalid
};

struct TuneOptions {
  std::vector<const dl::DriveLog*> logs;
  const qos::Policy* start = nullptr;
  const CostModel* cost = nullptr;
  TuneSpace space;
  int budget = 20;  // candidates evaluated, the starting policy included
  uint64_t seed = 1;
  int threads = 2;
  const QualityTable* quality = nullptr;  // measured quality term; null: the proxy
  // Replay settings other than policy/cost/quality (CPUs, RC model, SoC protection of a
  // hardware profile: ApplyHardwareProfile); null: the defaults. Not owned.
  const ReplayOptions* replay_base = nullptr;
  // Several nodes (ari-tune --nodes N): every candidate replays the fleet with the
  // candidate's routing weights (its "routing.*" parameters applied to fleet->routing);
  // fleet->node is replaced by the candidate's replay options. Null: one node, and a
  // "routing.*" parameter is an error. Not owned.
  const FleetOptions* fleet = nullptr;
};

struct TuneResult {
  std::vector<TuneCandidate> candidates;  // in evaluation order; [0] = start
  size_t best = 0;
  qos::Policy best_policy;
  component::RoutingWeights best_routing;  // the fleet's, with the best "routing.*" values
  int invalid = 0;
};

Result<TuneResult> Tune(const TuneOptions& options);
// Scores one policy on the logs (the tuner's objective inputs).
Result<TuneScore> ScorePolicy(const qos::Policy& policy,
                              const std::vector<const dl::DriveLog*>& logs, const CostModel& cost,
                              double peak_limit, const QualityTable* quality = nullptr,
                              const ReplayOptions* base = nullptr,
                              const FleetOptions* fleet = nullptr);

// Non-dominated feasible candidates (critical misses, NORMAL p95, quality loss), best
// objective first, plus the start and the best, with the parameters they change.
std::string ParetoTable(const TuneResult& result, const TuneSpace& space);
// Line diff of two texts: hunks "@@ -line +line @@" with 3 lines of context, "- old",
// "+ new" lines.
std::string DiffLines(std::string_view before, std::string_view after);

}  // namespace ari::sim
