// ari-sim: drive-log tool. Subcommands are rows of kCommands (name, usage,
// handler); add one by writing a handler and a row.
//
// Exit codes: 0 ok, 1 error (message on stderr), 2 usage error,
// 3 done but the log had problems (corrupt records skipped, invalid events).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qos/policy.h"
#include "qos/shipped_config.h"
#include "runtime/model/model.h"
#include "runtime/tokenizer/tokenizer.h"
#include "sim/calibrate.h"
#include "sim/compare_cli.h"
#include "sim/cost_model.h"
#include "sim/drive_log.h"
#include "sim/drive_log_stats.h"
#include "sim/fleet.h"
#include "sim/hardware_profile.h"
#include "sim/live_replay.h"
#include "sim/prompts.h"
#include "sim/quality_table.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/scenarios.h"
#include "sim/tune.h"

namespace {

namespace dl = ari::drivelog;
using ari::sim::Result;

constexpr int kOk = 0, kError = 1, kUsage = 2, kProblems = 3;

// Parsed command line of one subcommand: --flag value pairs and positionals.
struct Args {
  std::vector<std::pair<std::string, std::string>> flags;
  std::vector<std::string> positional;

  std::optional<std::string> Get(std::string_view name) const {
    for (const auto& [k, v] : flags) {
      if (k == name) return v;
    }
    return std::nullopt;
  }
};

// Every flag takes a value ("--seed 7" or "--seed=7"); "-o" is "--output".
Result<Args> ParseArgs(std::span<char* const> argv, std::span<const std::string_view> known) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (a == "-o") a = "--output";
    if (!a.starts_with("--") || a == "--") {
      args.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (i + 1 < argv.size()) {
      value = argv[++i];
    } else {
      return ari::sim::MakeError(ari::sim::ErrorCode::kInvalidArgument,
                                 "--" + name + " needs a value");
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return ari::sim::MakeError(ari::sim::ErrorCode::kInvalidArgument, "unknown option --" + name);
    }
    args.flags.emplace_back(name, value);
  }
  return args;
}

int Fail(std::string_view cmd, const std::string& message) {
  std::fprintf(stderr, "ari-sim %.*s: %s\n", static_cast<int>(cmd.size()), cmd.data(),
               message.c_str());
  return kError;
}

// Streams a log (binary or text) into callbacks; corrupt records go to stderr.
// Returns false (after printing) on a fatal error; *problems counts what was skipped.
struct Visitor {
  std::function<void(const dl::Header&)> header;
  std::function<void(const dl::Event&)> event;
  std::function<void(const ari::sim::CorruptRecord&)> corrupt;
};

bool VisitLog(std::string_view cmd, const std::string& path, const Visitor& v, int* problems) {
  char magic[sizeof(ari::sim::kDriveLogMagic)] = {};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      Fail(cmd, "cannot open " + path + ": " + std::strerror(errno));
      return false;
    }
    in.read(magic, sizeof(magic));
  }
  uint64_t previous = 0, index = 0;
  auto check = [&](const dl::Event& e) {
    if (auto p = ari::sim::CheckEvent(e, previous)) {
      std::fprintf(stderr, "ari-sim %.*s: %s: event %llu (t_ms %llu): %s\n",
                   static_cast<int>(cmd.size()), cmd.data(), path.c_str(),
                   static_cast<unsigned long long>(index),
                   static_cast<unsigned long long>(e.t_ms()), p->c_str());
      ++*problems;
    }
    previous = std::max(previous, e.t_ms());
    ++index;
  };
  if (std::memcmp(magic, ari::sim::kDriveLogMagic, sizeof(magic)) != 0) {
    auto log = ari::sim::ReadDriveLogText(path, /*validate=*/false);
    if (!log) {
      Fail(cmd, log.error().message);
      return false;
    }
    v.header(log->header());
    for (const auto& e : log->event()) {
      check(e);
      v.event(e);
    }
    return true;
  }
  ari::sim::ReaderOptions options;
  options.check_order = false;  // reported by check() instead, without stopping
  options.on_corrupt = [&](const ari::sim::CorruptRecord& c) {
    std::fprintf(stderr, "ari-sim %.*s: %s: corrupt record at %s\n", static_cast<int>(cmd.size()),
                 cmd.data(), path.c_str(), c.ToString().c_str());
    ++*problems;
    if (v.corrupt) v.corrupt(c);
  };
  auto reader = ari::sim::DriveLogReader::Open(path, options);
  if (!reader) {
    Fail(cmd, reader.error().message);
    return false;
  }
  v.header(reader->header());
  dl::Event e;
  while (true) {
    auto more = reader->Next(&e);
    if (!more) {
      Fail(cmd, more.error().message);
      return false;
    }
    if (!*more) break;
    check(e);
    v.event(e);
  }
  return true;
}

// --- Subcommands ------------------------------------------------------------------

int CmdGen(std::span<char* const> argv) {
  static constexpr std::string_view kKnown[] = {"scenario", "duration", "seed",
                                                "output",   "text",     "prompts"};
  auto args = ParseArgs(argv, kKnown);
  if (!args) return Fail("gen", args.error().message), kUsage;
  if (!args->positional.empty())
    return Fail("gen", "unexpected argument " + args->positional[0]), kUsage;
  ari::sim::ScenarioOptions opt;
  const auto scenario = args->Get("scenario");
  if (!scenario) return Fail("gen", "--scenario NAME is required (see: ari-sim scenarios)"), kUsage;
  opt.scenario = *scenario;
  if (auto d = args->Get("duration")) {
    auto ms = ari::sim::ParseDuration(*d);
    if (!ms) return Fail("gen", ms.error().message), kUsage;
    opt.duration_ms = *ms;
  }
  if (auto s = args->Get("seed")) {
    char* end = nullptr;
    errno = 0;
    opt.seed = std::strtoull(s->c_str(), &end, 0);
    if (s->empty() || *end != '\0' || errno != 0 || s->front() == '-') {
      return Fail("gen", "bad --seed '" + *s + "' (an unsigned 64-bit integer)"), kUsage;
    }
  }
  const auto out = args->Get("output");
  const auto text = args->Get("text");
  if (!out && !text) return Fail("gen", "give -o OUT.pb and/or --text OUT.textproto"), kUsage;
  dl::PromptSet prompts;
  if (auto p = args->Get("prompts")) {
    auto loaded = ari::sim::LoadPromptSet(*p);
    if (!loaded) return Fail("gen", loaded.error().message);
    prompts = std::move(*loaded);
    opt.prompts = &prompts;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto log = ari::sim::GenerateScenario(opt);
  if (!log) return Fail("gen", log.error().message);
  if (out) {
    if (auto r = ari::sim::WriteDriveLog(*out, *log); !r) return Fail("gen", r.error().message);
  }
  if (text) {
    if (auto r = ari::sim::WriteDriveLogText(*text, *log); !r)
      return Fail("gen", r.error().message);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t requests = 0;
  for (const auto& e : log->event()) requests += e.has_request() ? 1 : 0;
  std::fprintf(stderr, "ari-sim gen: %s seed %llu: %d events (%llu requests) in %.2f s -> %s%s%s\n",
               opt.scenario.c_str(), static_cast<unsigned long long>(opt.seed), log->event_size(),
               static_cast<unsigned long long>(requests), secs, out ? out->c_str() : "",
               out && text ? ", " : "", text ? text->c_str() : "");
  return kOk;
}

int CmdCat(std::span<char* const> argv) {
  auto args = ParseArgs(argv, {});
  if (!args) return Fail("cat", args.error().message), kUsage;
  if (args->positional.size() != 1) return Fail("cat", "usage: ari-sim cat LOG"), kUsage;
  int problems = 0;
  Visitor v;
  v.header = [](const dl::Header& h) { std::fputs(ari::sim::FormatHeaderText(h).c_str(), stdout); };
  v.event = [](const dl::Event& e) { std::fputs(ari::sim::FormatEventText(e).c_str(), stdout); };
  v.corrupt = [](const ari::sim::CorruptRecord& c) {
    std::printf("# corrupt record skipped: %s\n", c.ToString().c_str());
  };
  if (!VisitLog("cat", args->positional[0], v, &problems)) return kError;
  if (std::fflush(stdout) != 0) return Fail("cat", "writing to stdout failed");
  return problems ? kProblems : kOk;
}

int CmdStats(std::span<char* const> argv) {
  auto args = ParseArgs(argv, {});
  if (!args) return Fail("stats", args.error().message), kUsage;
  if (args->positional.size() != 1) return Fail("stats", "usage: ari-sim stats LOG"), kUsage;
  int problems = 0;
  ari::sim::DriveLogStats stats;
  Visitor v;
  v.header = [&](const dl::Header& h) { stats.SetHeader(h); };
  v.event = [&](const dl::Event& e) { stats.Add(e); };
  v.corrupt = [&](const ari::sim::CorruptRecord& c) { stats.AddCorrupt(c.skipped_bytes); };
  if (!VisitLog("stats", args->positional[0], v, &problems)) return kError;
  std::fputs(stats.ToText().c_str(), stdout);
  return problems ? kProblems : kOk;
}

int CmdScenarios(std::span<char* const> argv) {
  if (!argv.empty()) return Fail("scenarios", "takes no arguments"), kUsage;
  for (const auto& s : ari::sim::Scenarios()) {
    std::printf("%-24.*s %.*s\n", static_cast<int>(s.name.size()), s.name.data(),
                static_cast<int>(s.description.size()), s.description.data());
  }
  return kOk;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ari::sim::MakeError(ari::sim::ErrorCode::kIo,
                               "cannot open " + path + ": " + std::strerror(errno));
  }
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s;
}

Result<void> WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return ari::sim::MakeError(ari::sim::ErrorCode::kIo, "cannot write " + path);
  return {};
}

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

int CmdCompare(std::span<char* const> argv) {
  static constexpr std::string_view kKnown[] = {"log",     "policy",    "hardware", "model",
                                                "quality", "json",      "html",     "threads",
                                                "slots",   "park-areas"};
  auto args = ParseArgs(argv, kKnown);
  if (!args) return Fail("compare", args.error().message), kUsage;
  ari::sim::CompareCliArgs c;
  for (const auto& [k, v] : args->flags) {
    if (k == "log") c.logs.push_back(v);
    if (k == "policy") c.policies.push_back(v);
  }
  if (c.logs.empty() || !args->positional.empty()) {
    return Fail("compare",
                "usage: ari-sim compare --log LOG... [--policy P...] [--hardware H] "
                "[--model M] [--quality Q.json] [--json OUT] [--html OUT]"),
           kUsage;
  }
  c.hardware = args->Get("hardware").value_or("dev-vm");
  c.model = args->Get("model").value_or("");
  c.quality = args->Get("quality").value_or("");
  c.json = args->Get("json").value_or("");
  c.html = args->Get("html").value_or("");
  c.threads = std::max(1, std::atoi(args->Get("threads").value_or("2").c_str()));
  c.slots = std::max(0, std::atoi(args->Get("slots").value_or("0").c_str()));
  c.park_areas = std::atoi(args->Get("park-areas").value_or("-1").c_str());
  auto text = ari::sim::RunCompareCli(c);
  if (!text) return Fail("compare", text.error().message);
  std::fputs(text->c_str(), stdout);
  return kOk;
}

int CmdCost(std::span<char* const> argv) {
  static constexpr std::string_view kKnown[] = {"bench", "output",           "layers",
                                                "isa",   "efficiency-speed", "thread-scaling"};
  auto args = ParseArgs(argv, kKnown);
  if (!args) return Fail("cost", args.error().message), kUsage;
  std::vector<std::string> inputs = args->positional;
  for (const auto& [k, v] : args->flags) {
    if (k == "bench") inputs.push_back(v);
  }
  const auto out = args->Get("output");
  if (inputs.empty() || !out) {
    return Fail("cost",
                "usage: ari-sim cost BENCH.json... -o COST.json [--layers N] [--isa avx2] "
                "[--efficiency-speed 0.5] [--thread-scaling 0.8]"),
           kUsage;
  }
  std::vector<std::string> texts;
  for (const auto& p : inputs) {
    auto t = ReadFile(p);
    if (!t) return Fail("cost", t.error().message);
    texts.push_back(std::move(*t));
  }
  ari::sim::BenchCalibration cal;
  if (auto v = args->Get("layers")) cal.layers = std::atoi(v->c_str());
  if (auto v = args->Get("isa")) cal.isa = *v;
  if (auto v = args->Get("efficiency-speed")) cal.efficiency_core_speed = std::atof(v->c_str());
  if (auto v = args->Get("thread-scaling")) cal.thread_scaling = std::atof(v->c_str());
  auto model = ari::sim::BuildCostModelFromBench(texts, cal);
  if (!model) return Fail("cost", model.error().message);
  if (auto r = WriteFile(*out, ari::sim::CostModelToJson(*model)); !r)
    return Fail("cost", r.error().message);
  std::fprintf(stderr, "ari-sim cost: %zu entries -> %s\n", model->entries.size(), out->c_str());
  return kOk;
}

struct Command {
  std::string_view name;
  std::string_view usage;
  int (*run)(std::span<char* const> argv);  // arguments after the subcommand
};

constexpr Command kCommands[] = {
    {"gen",
     "gen --scenario NAME [--duration 1h|30m|90s] [--seed S] [-o OUT.pb] "
     "[--text OUT.textproto] [--prompts FILE]",
     CmdGen},
    {"cat", "cat LOG            print a log (binary or text) as text; reports corrupt records",
     CmdCat},
    {"stats", "stats LOG          event counts per kind/class, time span, value ranges", CmdStats},
    {"scenarios", "scenarios          list the scenario names", CmdScenarios},
    {"replay",
     "replay --log LOG [--mode model] [--policy P] [--cost C | --hardware H [--model M]]\n"
     "         [--json OUT] [--html OUT]\n"
     "                     simulate the log in virtual time (real scheduler + governor,\n"
     "                     cost model, RC thermal model)\n"
     "         [--nodes N [--ambient-offsets C1,C2,..] [--routing NAME=V,..]]\n"
     "                     N simulated nodes, each request routed by the client library's\n"
     "                     rule (docs/routing.md \"Simulated fleets\"); an ambient offset per\n"
     "                     node; routing weights as sim/tune.h names them\n"
     "  replay --log LOG --mode live [--time-scale X] [--domain D] [--cyclone-config F]\n"
     "         [--policy P] [--json OUT] [--html OUT] [--node-timeout MS] [--drain MS]\n"
     "         [--calibration CAL.json [--cost C] [--model-json OUT] [--tokenizer MODEL.gguf]]\n"
     "                     publish the log to a running ari-node over DDS (environment on\n"
     "                     ari/v2/sim_environment) and record every chunk; --calibration:\n"
     "                     also replay in model mode and report the prediction error",
     CmdReplay},
    {"compare",
     "compare --log LOG... [--policy NAME|FILE...] [--hardware NAME|FILE] [--model 1.5b]\n"
     "         [--quality TABLE.json] [--json OUT] [--html OUT] [--threads 2]\n"
     "                     replay the logs with several policies (default: default,\n"
     "                     static-performance, static-eco) on one hardware profile\n"
     "                     (default dev-vm; config/hardware/), side by side",
     CmdCompare},
    {"cost",
     "cost BENCH.json... -o COST.json [--layers N] [--isa T] [--efficiency-speed X]\n"
     "                     cost model from ari-perf/ari-bench --json output",
     CmdCost},
};

void PrintUsage(std::FILE* f) {
  std::fputs("usage: ari-sim COMMAND [ARGS]\n", f);
  for (const auto& c : kCommands) {
    std::fprintf(f, "  ari-sim %.*s\n", static_cast<int>(c.usage.size()), c.usage.data());
  }
  std::fputs("exit codes: 0 ok, 1 error, 2 usage, 3 log problems (corrupt records skipped)\n", f);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return kUsage;
  }
  const std::string_view cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    PrintUsage(stdout);
    return kOk;
  }
  for (const auto& c : kCommands) {
    if (c.name == cmd)
      return c.run(std::span<char* const>(argv + 2, static_cast<size_t>(argc - 2)));
  }
  std::fprintf(stderr, "ari-sim: unknown command '%s' (try: ari-sim help)\n", argv[1]);
  return kUsage;
}
