// ari-tune: searches QoS policy parameters with model-mode replays of drive logs
// (sim/tune.h has the objective and the search; docs/tuning.md a walk-through).
//
//   ari-tune --logs a.pb [b.pb ...] --space space.textproto [--budget N] [--seed S]
//            [--policy START.textproto] [--cost COST.json] [--quality TABLE.json]
//            [--threads 2] [-o OUT.textproto]
//            [--nodes N [--ambient-offsets C1,C2,..]]
//
// --nodes: every candidate replays the logs on N simulated nodes (sim/fleet.h), requests
// routed by the client library's rule; "routing.*" parameters of the space tune its
// weights (sim/tune.h), printed with the policy's and written to OUT.routing.
//
// --quality: the model's measured quality table (ari-ppl --table K --json TABLE.json, e.g.
// config/quality/stories260K.json); the quality term is then measured, per token, at the
// precision and drop level it ran at (sim/quality_table.h). Without it: the proxy.
//
// Prints the start and best scores, a Pareto table and the diff of the best policy
// against the start; writes the best policy (valid policy text) to OUT and the diff to
// OUT.diff. Exit codes: 0 ok, 1 error, 2 usage.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "qos/policy.h"
#include "qos/shipped_config.h"
#include "sim/cost_model.h"
#include "sim/drive_log.h"
#include "sim/hardware_profile.h"
#include "sim/quality_table.h"
#include "sim/tune.h"

namespace {

constexpr int kOk = 0, kError = 1, kUsage = 2;

void Usage(FILE* out = stderr) {
  std::fputs(
      "usage: ari-tune --logs A.pb [B.pb ...] [--space SPACE.textproto] [--budget N] [--seed S]\n"
      "                [--policy START.textproto] [--cost COST.json] [--threads 2]\n"
      "                [--quality TABLE.json] [--hardware NAME|FILE [--model 1.5b]]\n"
      "                [-o OUT.textproto] [--nodes N [--ambient-offsets C1,C2,..]]\n"
      "--nodes: replay on N simulated nodes routed by the client's rule; the space may\n"
      "then hold routing.* parameters (sim/tune.h), the best written to OUT.routing\n"
      "--hardware: tune for a head-unit profile (config/hardware/, docs/hardware_profiles.md):\n"
      "its cores, cost model of --model (default: the profile's), RC model and SoC trips\n"
      "defaults: budget 40, seed 1, the shipped tune_space.textproto and\n"
      "policy_default.textproto (found as qos/shipped_config.h says: $ARI_CONFIG_DIR,\n"
      "../share/ari next to the binary, the source tree's config/), the built-in cost\n"
      "model, 2 threads, OUT tuned_policy.textproto\n",
      out);
}

int Fail(const std::string& m) {
  std::fprintf(stderr, "ari-tune: %s\n", m.c_str());
  return kError;
}

std::string Score(const ari::sim::TuneScore& s) {
  char b[200];
  std::snprintf(
      b, sizeof(b),
      "CRITICAL misses %d, NORMAL p95 %.2f s, quality loss %.3f, peak %.2f C, energy %.0f J",
      s.critical_misses, s.normal_p95_s, s.quality_loss, s.peak_c, s.energy_j);
  return b;
}

struct TuneArgs {
  std::vector<std::string> logs;
  // empty space/policy: the shipped defaults
  std::string space_path, policy_path, cost_path, quality_path, out = "tuned_policy.textproto";
  std::string hardware, model;  // empty: the built-in (dev-VM) cost model, default replay
  int budget = 40, threads = 2;
  int nodes = 0;  // 0: one node (no fleet)
  std::string ambient_offsets;
  uint64_t seed = 1;
};

// The exit code when the tool stops here (--help: kOk, bad usage: kUsage); nullopt to go on.
std::optional<int> ParseArgs(int argc, char** argv, TuneArgs& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "-h" || a == "--help") return Usage(stdout), kOk;
    if (a == "--logs") {
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0 &&
             std::string(argv[i + 1]) != "-o") {
        o.logs.emplace_back(argv[++i]);
      }
      continue;
    }
    const char* v = value();
    if (!v) return Usage(), Fail(a + " needs a value"), kUsage;
    if (a == "--space")
      o.space_path = v;
    else if (a == "--budget")
      o.budget = std::atoi(v);
    else if (a == "--seed")
      o.seed = std::strtoull(v, nullptr, 0);
    else if (a == "--policy")
      o.policy_path = v;
    else if (a == "--cost")
      o.cost_path = v;
    else if (a == "--quality")
      o.quality_path = v;
    else if (a == "--hardware")
      o.hardware = v;
    else if (a == "--model")
      o.model = v;
    else if (a == "--nodes")
      o.nodes = std::atoi(v);
    else if (a == "--ambient-offsets")
      o.ambient_offsets = v;
    else if (a == "--threads")
      o.threads = std::atoi(v);
    else if (a == "-o" || a == "--output")
      o.out = v;
    else
      return Usage(), Fail("unknown option " + a), kUsage;
  }
  if (o.logs.empty()) return Usage(), kUsage;
  for (auto [path, name] : {std::pair{&o.space_path, "tune_space.textproto"},
                            std::pair{&o.policy_path, "policy_default.textproto"}}) {
    if (!path->empty()) continue;
    auto shipped = ari::qos::FindShippedConfig(name);
    if (!shipped) return Fail(shipped.error().message), kUsage;
    *path = shipped->string();
  }
  if (o.budget < 1) return Fail("--budget must be >= 1"), kUsage;
  if (o.nodes < 0 || o.nodes > 16) return Fail("--nodes must be 1..16"), kUsage;
  if (o.nodes == 0 && !o.ambient_offsets.empty())
    return Fail("--ambient-offsets needs --nodes"), kUsage;
  if (!o.hardware.empty() && !o.cost_path.empty())
    return Fail("give --hardware or --cost, not both"), kUsage;
  if (o.hardware.empty() && !o.model.empty()) return Fail("--model needs --hardware"), kUsage;
  return std::nullopt;
}

// The scores, the Pareto table and the parameters the best policy changed.
void PrintResult(const TuneArgs& o, double secs, const ari::sim::TuneResult& res,
                 const ari::sim::TuneSpace& space, const ari::qos::Policy& start,
                 const ari::component::RoutingWeights& routing_start) {
  std::printf("ari-tune: %zu candidates (%d invalid) on %zu log(s), seed %llu, %.1f s\n",
              res.candidates.size(), res.invalid, o.logs.size(),
              static_cast<unsigned long long>(o.seed), secs);
  if (space.peak_celsius_limit > 0)
    std::printf("peak temperature limit: %.1f C\n", space.peak_celsius_limit);
  std::printf("start: %s\n", Score(res.candidates[0].score).c_str());
  std::printf("best:  %s (candidate %zu)\n\n", Score(res.candidates[res.best].score).c_str(),
              res.best);
  std::printf("Pareto table (feasible, non-dominated; * = best by the objective):\n%s\n",
              ari::sim::ParetoTable(res, space).c_str());

  std::printf("changed parameters:\n");
  bool any = false;
  for (const auto& p : space.params) {
    if (ari::sim::IsRoutingParam(p.name)) {
      auto a = ari::sim::RoutingParamValue(routing_start, p.name),
           b = ari::sim::RoutingParamValue(res.best_routing, p.name);
      if (a && b && *a != *b) {
        std::printf("  %-44s %s -> %s\n", p.name.c_str(), a->c_str(), b->c_str());
        any = true;
      }
      continue;
    }
    auto a = ari::sim::TuneParamValue(start, p.name),
         b = ari::sim::TuneParamValue(res.best_policy, p.name);
    if (a && b && *a != *b) {
      std::printf("  %-44s %s -> %s\n", p.name.c_str(), a->c_str(), b->c_str());
      any = true;
    }
  }
  if (!any) std::printf("  (none)\n");
  std::printf("\n");
}

// Writes the best policy (validated) to OUT and its diff against the start to OUT.diff.
int WriteBest(const TuneArgs& o, const ari::sim::TuneResult& res, const ari::qos::Policy& start) {
  const std::string before = ari::qos::PolicyToText(start);
  ari::qos::Policy best = res.best_policy;
  if (res.best != 0) best.name += "-tuned";
  std::string after = ari::qos::PolicyToText(best);
  const std::string diff = ari::sim::DiffLines(before, after);
  std::string header = "# Tuned by ari-tune (seed " + std::to_string(o.seed) + ", budget " +
                       std::to_string(o.budget) + ") from " + o.policy_path +
                       "\n# best: " + Score(res.candidates[res.best].score) + "\n";
  if (auto check = ari::qos::ParsePolicyText(header + after, o.out); !check) {
    return Fail("internal: the best policy does not validate: " + check.error().ToString());
  }
  std::ofstream(o.out) << header << after;
  std::ofstream(o.out + ".diff") << diff;
  if (o.nodes > 0) {  // the routing weights of the best candidate, one per line
    std::ofstream rout(o.out + ".routing");
    rout << "# routing weights of the best candidate (ari-sim replay --routing NAME=V,...)\n";
    for (const char* n : {"warm_celsius", "hot_celsius", "warm_slowdown", "hot_slowdown",
                          "unknown_tokens_per_s", "turn_tokens", "chunk_tokens", "stale_ms"}) {
      auto v = ari::sim::RoutingParamValue(res.best_routing, std::string("routing.") + n);
      if (v) rout << n << "=" << *v << "\n";
    }
    std::printf("wrote %s.routing\n", o.out.c_str());
  }
  std::printf("diff against %s:\n%s\nwrote %s and %s.diff\n", o.policy_path.c_str(),
              diff.empty() ? "(no change: the start is the best found)\n" : diff.c_str(),
              o.out.c_str(), o.out.c_str());
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  TuneArgs args;
  if (const std::optional<int> rc = ParseArgs(argc, argv, args)) return *rc;
  auto start = ari::qos::LoadPolicyFile(args.policy_path);
  if (!start) return Fail("policy: " + start.error().ToString());
  std::optional<ari::sim::HardwareProfile> hardware;
  ari::sim::ReplayOptions replay_base;
  if (!args.hardware.empty()) {
    auto hp = ari::sim::FindHardwareProfile(args.hardware);
    if (!hp) return Fail("hardware: " + hp.error().message);
    hardware = std::move(*hp);
    ari::sim::ApplyHardwareProfile(*hardware, replay_base);
    std::printf("hardware: %s, model %s\n", hardware->name().c_str(),
                (args.model.empty() ? hardware->proto.default_model() : args.model).c_str());
  }
  auto cost = hardware                 ? ari::sim::ProfileCostModel(*hardware, args.model)
              : args.cost_path.empty() ? ari::sim::BuiltinCostModel()
                                       : ari::sim::LoadCostModel(args.cost_path);
  if (!cost) return Fail(cost.error().message);
  std::optional<ari::sim::QualityTable> quality;
  if (!args.quality_path.empty()) {
    auto q = ari::sim::LoadQualityTable(args.quality_path);
    if (!q) return Fail("quality: " + q.error().message);
    quality = std::move(*q);
    std::printf("quality term: measured table %s (model %s, agreement with %s)\n",
                args.quality_path.c_str(), quality->model.c_str(), quality->agreement_with.c_str());
  } else {
    std::printf(
        "quality term: proxy (W4A8 share + 0.1 x layers dropped; --quality TABLE.json "
        "measures it)\n");
  }
  auto space = ari::sim::LoadTuneSpace(args.space_path);
  if (!space) return Fail(space.error().message);
  std::vector<ari::drivelog::DriveLog> loaded;
  for (const auto& l : args.logs) {
    auto log = ari::sim::LoadDriveLog(l);
    if (!log) return Fail(log.error().message);
    loaded.push_back(std::move(*log));
  }
  ari::sim::TuneOptions o;
  for (const auto& l : loaded) o.logs.push_back(&l);
  o.start = &*start;
  o.cost = &*cost;
  o.space = *space;
  o.budget = args.budget;
  o.seed = args.seed;
  o.threads = args.threads;
  o.quality = quality ? &*quality : nullptr;
  o.replay_base = hardware ? &replay_base : nullptr;
  ari::sim::FleetOptions fleet;
  if (args.nodes > 0) {
    fleet.nodes = args.nodes;
    if (!args.ambient_offsets.empty()) {
      auto v = ari::sim::ParseNumberList(args.ambient_offsets);
      if (!v) return Fail("--ambient-offsets: " + v.error().message);
      fleet.ambient_offset_c = std::move(*v);
    }
    o.fleet = &fleet;
    std::printf("fleet: %d simulated nodes, requests routed by the client's rule\n", args.nodes);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto res = ari::sim::Tune(o);
  if (!res) return Fail(res.error().message);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  PrintResult(args, secs, *res, *space, *start, fleet.routing);
  return WriteBest(args, *res, *start);
}
