// ari-sim replay: a drive log in model mode (virtual time, cost model), against N
// simulated nodes (--nodes), or live against a running ari-node over DDS (--mode live).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qos/policy.h"
#include "qos/shipped_config.h"
#include "runtime/model/model.h"
#include "runtime/tokenizer/tokenizer.h"
#include "sim/calibrate.h"
#include "sim/cost_model.h"
#include "sim/drive_log.h"
#include "sim/fleet.h"
#include "sim/hardware_profile.h"
#include "sim/live_replay.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/tools/sim_cli.h"
#include "sim/tune.h"

namespace ari::sim_cli {
namespace {

namespace dl = ari::drivelog;

// --mode live: against a running ari-node; --calibration OUT also replays the same log
// in model mode (answers as long as the live ones) and compares.
int LiveReplay(const Args& args, const dl::DriveLog& log, const std::string& log_path,
               const ari::qos::Policy& policy, const ari::sim::ReplayOptions& model_options,
               bool log_clean) {
  ari::sim::LiveReplayOptions lo;
  lo.policy = &policy;
  if (auto v = args.Get("time-scale")) {
    char* end = nullptr;
    lo.time_scale = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(lo.time_scale > 0) || lo.time_scale > 1000) {
      return Fail("replay", "bad --time-scale '" + *v + "' (a number > 0, <= 1000)"), kUsage;
    }
  }
  if (auto v = args.Get("domain")) {
    const int d = std::atoi(v->c_str());
    if (d < 0 || d >= 230 || *v != std::to_string(d))
      return Fail("replay", "bad --domain (0..229)"), kUsage;
    lo.domain.domain_id = static_cast<uint32_t>(d);
  }
  if (auto v = args.Get("cyclone-config")) lo.domain.config = *v;
  if (auto v = args.Get("node-timeout"))
    lo.node_timeout = std::chrono::milliseconds(std::atoll(v->c_str()));
  if (auto v = args.Get("drain"))
    lo.drain_timeout = std::chrono::milliseconds(std::atoll(v->c_str()));
  lo.prompt_tokens = model_options.prompt_tokens;
  lo.progress = [](const std::string& line) {
    std::fprintf(stderr, "ari-sim replay: %s\n", line.c_str());
  };
  auto report = ari::sim::ReplayLive(log, lo);
  if (!report) return Fail("replay", report.error().message);
  report->log_name = std::filesystem::path(log_path).filename().string();
  std::fputs(ari::sim::ReportToText(*report).c_str(), stdout);
  int missing = 0;
  for (const auto& r : report->requests) missing += r.status == "NO_TERMINAL";
  std::printf(
      "live replay: %.0f s of log in %.1f s wall (time scale %g), %zu requests, %d without "
      "terminal\n",
      report->summary.duration_s, report->summary.wall_s, report->time_scale,
      report->requests.size(), missing);
  if (auto j = args.Get("json")) {
    if (auto r = WriteFile(*j, ari::sim::ReportToJson(*report)); !r)
      return Fail("replay", r.error().message);
  }
  if (auto h = args.Get("html")) {
    if (auto r = WriteFile(*h, ari::sim::ReportToHtml(*report)); !r)
      return Fail("replay", r.error().message);
  }
  if (auto cal = args.Get("calibration")) {
    const dl::DriveLog same_work = ari::sim::WithMeasuredTokens(log, *report);
    auto model = ari::sim::ReplayModel(same_work, model_options);
    if (!model) return Fail("replay", "model mode: " + model.error().message);
    model->log_name = report->log_name;
    if (auto mj = args.Get("model-json")) {
      if (auto r = WriteFile(*mj, ari::sim::ReportToJson(*model)); !r)
        return Fail("replay", r.error().message);
    }
    const ari::sim::Calibration c = ari::sim::CompareReports(*report, *model);
    std::fputs(ari::sim::CalibrationToText(c).c_str(), stdout);
    if (auto r = WriteFile(*cal, ari::sim::CalibrationToJson(c)); !r)
      return Fail("replay", r.error().message);
  }
  if (missing > 0) return kProblems;
  return log_clean ? kOk : kProblems;
}

// --nodes N: the log against N simulated nodes, routed by the client's rule (sim/fleet.h).
int FleetReplay(const Args& args, const ari::drivelog::DriveLog& log, const std::string& log_path,
                const ari::sim::ReplayOptions& node, bool clean) {
  ari::sim::FleetOptions f;
  f.node = node;
  f.nodes = std::atoi(args.Get("nodes")->c_str());
  if (auto off = args.Get("ambient-offsets")) {
    auto v = ari::sim::ParseNumberList(*off);
    if (!v) return Fail("replay", "--ambient-offsets: " + v.error().message), kUsage;
    f.ambient_offset_c = std::move(*v);
  }
  if (auto rw = args.Get("routing")) {  // name=value,... (sim/tune.h "routing.*")
    std::string_view rest = *rw;
    while (!rest.empty()) {
      const std::string_view item = rest.substr(0, rest.find(','));
      rest.remove_prefix(std::min(rest.size(), item.size() + 1));
      const size_t eq = item.find('=');
      if (eq == std::string_view::npos) return Fail("replay", "--routing wants name=value"), kUsage;
      auto r = ari::sim::ApplyRoutingParam(f.routing, "routing." + std::string(item.substr(0, eq)),
                                           item.substr(eq + 1));
      if (!r) return Fail("replay", "--routing: " + r.error().message), kUsage;
    }
  }
  auto report = ari::sim::ReplayFleet(log, f);
  if (!report) return Fail("replay", report.error().message);
  report->merged.log_name = std::filesystem::path(log_path).filename().string();
  std::fputs(ari::sim::FleetToText(*report).c_str(), stdout);
  std::printf("replayed %.0f s of log on %d nodes in %.3f s\n", report->merged.summary.duration_s,
              f.nodes, report->merged.summary.wall_s);
  if (auto j = args.Get("json")) {
    if (auto r = WriteFile(*j, ari::sim::ReportToJson(report->merged)); !r)
      return Fail("replay", r.error().message);
  }
  return clean ? kOk : kProblems;
}

// The cost model of a model-mode replay: --hardware (+ --model), --cost or the built-in
// one. Returns kOk or the exit code (after printing).
int ReplayCost(const Args& args, std::optional<ari::sim::HardwareProfile>& hardware,
               std::optional<ari::sim::CostModel>& cost) {
  if (auto h = args.Get("hardware")) {
    if (args.Get("cost")) return Fail("replay", "give --hardware or --cost, not both"), kUsage;
    auto hp = ari::sim::FindHardwareProfile(*h);
    if (!hp) return Fail("replay", "hardware: " + hp.error().message);
    hardware = std::move(*hp);
  } else if (args.Get("model")) {
    return Fail("replay", "--model needs --hardware"), kUsage;
  }
  auto c = hardware ? ari::sim::ProfileCostModel(*hardware, args.Get("model").value_or(""))
           : args.Get("cost") ? ari::sim::LoadCostModel(*args.Get("cost"))
                              : ari::sim::BuiltinCostModel();
  if (!c) return Fail("replay", c.error().message);
  cost = std::move(*c);
  return kOk;
}

// --mode is model or live, and no flag of the other mode is given (else a usage error).
bool ModeFlagsFit(const Args& args, const std::string& mode) {
  if (mode != "model" && mode != "live") {
    Fail("replay", "--mode must be model or live");
    return false;
  }
  const bool model = mode == "model";
  const auto live_only = {"time-scale", "domain",       "cyclone-config", "calibration",
                          "model-json", "node-timeout", "drain"};
  const auto model_only = {"nodes", "ambient-offsets", "routing"};
  for (const char* f : model ? live_only : model_only) {
    if (args.Get(f)) {
      Fail("replay",
           std::string("--") + f + (model ? " needs --mode live" : " needs --mode model"));
      return false;
    }
  }
  return true;
}

}  // namespace

int CmdReplay(std::span<char* const> argv) {
  static constexpr std::string_view kKnown[] = {
      "log",         "mode",       "policy",       "cost",   "json",
      "html",        "slots",      "time-scale",   "domain", "cyclone-config",
      "calibration", "model-json", "node-timeout", "drain",  "tokenizer",
      "hardware",    "model",      "park-areas",   "nodes",  "ambient-offsets",
      "routing"};
  auto args = ParseArgs(argv, kKnown);
  if (!args) return Fail("replay", args.error().message), kUsage;
  const auto log_path = args->Get("log");
  if (!log_path || !args->positional.empty()) {
    return Fail("replay",
                "usage: ari-sim replay --log LOG [--mode model|live] [--policy P] [--cost C] "
                "[--json OUT] [--html OUT] (see ari-sim help)"),
           kUsage;
  }
  const std::string mode = args->Get("mode").value_or("model");
  if (!ModeFlagsFit(*args, mode)) return kUsage;
  std::vector<ari::sim::CorruptRecord> corrupt;
  auto log = ari::sim::LoadDriveLog(*log_path, &corrupt);
  if (!log) return Fail("replay", log.error().message);
  for (const auto& c : corrupt) {
    std::fprintf(stderr, "ari-sim replay: %s: corrupt record at %s\n", log_path->c_str(),
                 c.ToString().c_str());
  }
  std::string policy_path;
  if (auto given = args->Get("policy")) {
    policy_path = *given;
  } else {
    auto shipped = ari::qos::FindShippedConfig("policy_default.textproto");
    if (!shipped) return Fail("replay", shipped.error().message);
    policy_path = shipped->string();
  }
  auto policy = ari::qos::LoadPolicyFile(policy_path);
  if (!policy) return Fail("replay", "policy: " + policy.error().ToString());
  std::optional<ari::sim::HardwareProfile> hardware;
  std::optional<ari::sim::CostModel> cost;
  if (const int rc = ReplayCost(*args, hardware, cost); rc != kOk) return rc;
  ari::sim::ReplayOptions o;
  if (hardware) ari::sim::ApplyHardwareProfile(*hardware, o);
  o.policy = &*policy;
  o.cost = &*cost;
  if (auto sl = args->Get("slots")) o.slots = std::atoi(sl->c_str());
  if (auto pa = args->Get("park-areas")) o.park_areas = std::max(0, std::atoi(pa->c_str()));
  std::unique_ptr<ari::runtime::Model> tokenizer_model;
  if (auto t = args->Get("tokenizer")) {  // prompt tokens as the node counts them
    auto m = ari::runtime::Model::Load(*t);
    if (!m) return Fail("replay", "--tokenizer: " + m.error().ToString());
    tokenizer_model = std::move(*m);
    const ari::runtime::Tokenizer* tok = tokenizer_model->tokenizer();
    o.prompt_tokens = [tok](const std::string& p) {
      auto ids = tok->Encode(p, ari::runtime::EncodeOptions{});
      return ids ? static_cast<int>(ids->size()) : static_cast<int>((p.size() + 3) / 4) + 8;
    };
  }
  if (mode == "live") return LiveReplay(*args, *log, *log_path, *policy, o, corrupt.empty());
  if (args->Get("nodes")) return FleetReplay(*args, *log, *log_path, o, corrupt.empty());
  auto report = ari::sim::ReplayModel(*log, o);
  if (!report) return Fail("replay", report.error().message);
  report->log_name = std::filesystem::path(*log_path).filename().string();
  std::fputs(ari::sim::ReportToText(*report).c_str(), stdout);
  std::printf("replayed %.0f s of log in %.3f s\n", report->summary.duration_s,
              report->summary.wall_s);
  if (auto j = args->Get("json")) {
    if (auto r = WriteFile(*j, ari::sim::ReportToJson(*report)); !r)
      return Fail("replay", r.error().message);
  }
  if (auto h = args->Get("html")) {
    if (auto r = WriteFile(*h, ari::sim::ReportToHtml(*report)); !r)
      return Fail("replay", r.error().message);
  }
  return corrupt.empty() ? kOk : kProblems;
}

}  // namespace ari::sim_cli
