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
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/compare_cli.h"
#include "sim/cost_model.h"
#include "sim/drive_log.h"
#include "sim/drive_log_stats.h"
#include "sim/prompts.h"
#include "sim/scenarios.h"
#include "sim/tools/sim_cli.h"

namespace {

namespace dl = ari::drivelog;
using ari::sim_cli::Args;
using ari::sim_cli::Fail;
using ari::sim_cli::kError;
using ari::sim_cli::kOk;
using ari::sim_cli::kProblems;
using ari::sim_cli::kUsage;
using ari::sim_cli::ParseArgs;
using ari::sim_cli::ReadFile;
using ari::sim_cli::WriteFile;

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
     ari::sim_cli::CmdReplay},
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
