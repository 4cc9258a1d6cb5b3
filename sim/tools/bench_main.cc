// ari-bench: model benchmark and the scheduler scenarios.
//   (default)           -m MODEL [--precision w8a16|w4a8] [-t THREADS] [-p 64,128] [-n 64]
//                       [-r 5] [--isa TIER] [--json]: runtime/eval/perf_bench.h RunModelBench
//                       (prompt and decode t/s, TTFT, time to ready, peak RSS, medians + spread,
//                       bandwidth roofline fraction, resident embedding bytes), as a table
//                       or JSON;
//   --scenario preempt  CRITICAL time-to-first-token while a long NORMAL prefill runs,
//                       divided by its idle time-to-first-token (goal <= 1.25), median
//                       of -r repetitions;
//   --scenario thermal  the RC model heated by the engine's measured busy fraction in
//                       virtual time (sim/thermal_run.h); prints the decision timeline.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "qos/scheduler.h"
#include "qos/shipped_config.h"
#include "runtime/eval/perf_bench.h"
#include "runtime/model/model.h"
#include "sim/preempt_run.h"
#include "sim/thermal_run.h"
#include "thermal/rc_model.h"

namespace {

using namespace ari;

struct Args {
  std::string model, scenario, policy;  // policy empty: the shipped default
  std::string precision = "w8a16";
  std::string isa;  // empty: the best tier
  int threads = 0, n = 64, reps = 5, prompt = 1024;
  std::vector<int> prompts{64, 128};
  bool json = false;
  double duration_s = 60, speedup = 40, ambient = 45, ambient_peak = 65;
  double celsius = -1000;  // preempt: fixed temperature (thermal band); unset = no sensor
  int busy_slots = 0;      // preempt: N slots, all busy with NORMAL turns when CRITICAL arrives
};

void Usage(FILE* out = stderr) {
  std::fprintf(
      out,
      "usage: ari-bench -m MODEL [--precision w8a16|w4a8] [-t THREADS] [-p 64,128]\n"
      "                 [-n TOKENS] [-r REPS] [--isa TIER (ceiling: avx2, amx, ...)] [--json]\n"
      "       ari-bench -m MODEL --scenario preempt [--prompt 1024] [-r REPS]\n"
      "                 [--policy FILE] [--celsius C (default: no sensor, conservative)]\n"
      "                 [--busy-slots N (N slots, all busy: CRITICAL parks a turn)]\n"
      "       ari-bench -m MODEL --scenario thermal [--duration 60] [--speedup 40]\n"
      "                 [--ambient 45] [--ambient-peak 65] [--json]\n"
      "  thermal: RC model (thermal/rc_model.h) heated by the chunks the engine runs,\n"
      "  virtual time (chunk = its measured compute time, pauses free), heat\n"
      "  capacities / SPEEDUP (time constants that much shorter, same steady state),\n"
      "  ambient ramps to PEAK at mid-run and back; prints every decision.\n");
}

// A whole flag value as a number; false (said on stderr) for anything else.
template <class T>
bool Number(std::string_view flag, std::string_view v, T& out) {
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec == std::errc() && end == v.data() + v.size()) return true;
  std::fprintf(stderr, "ari-bench: %.*s needs a number, got '%.*s'\n",
               static_cast<int>(flag.size()), flag.data(), static_cast<int>(v.size()), v.data());
  return false;
}

// -p 64,128: the prompt sizes.
bool PromptSizes(std::string_view v, std::vector<int>& out) {
  out.clear();
  for (size_t pos = 0; pos <= v.size();) {
    const size_t comma = std::min(v.find(',', pos), v.size());
    int n = 0;
    if (!Number("-p", v.substr(pos, comma - pos), n)) return false;
    out.push_back(n);
    pos = comma + 1;
  }
  return true;
}

// One flag and its value into a; false for an unknown flag or a bad value (said).
bool SetFlag(std::string_view f, std::string_view v, Args& a) {
  if (f == "-m" || f == "--model") {
    a.model = v;
  } else if (f == "--precision") {
    a.precision = v;
  } else if (f == "--isa") {
    a.isa = v;
  } else if (f == "--scenario") {
    a.scenario = v;
  } else if (f == "--policy") {
    a.policy = v;
  } else if (f == "-p") {
    return PromptSizes(v, a.prompts);
  } else if (f == "-t" || f == "--threads") {
    return Number(f, v, a.threads);
  } else if (f == "-n") {
    return Number(f, v, a.n);
  } else if (f == "-r" || f == "--reps") {
    return Number(f, v, a.reps);
  } else if (f == "--prompt") {
    return Number(f, v, a.prompt);
  } else if (f == "--busy-slots") {
    return Number(f, v, a.busy_slots);
  } else if (f == "--duration") {
    return Number(f, v, a.duration_s);
  } else if (f == "--speedup") {
    return Number(f, v, a.speedup);
  } else if (f == "--celsius") {
    return Number(f, v, a.celsius);
  } else if (f == "--ambient") {
    return Number(f, v, a.ambient);
  } else if (f == "--ambient-peak") {
    return Number(f, v, a.ambient_peak);
  } else {
    std::fprintf(stderr, "ari-bench: unknown flag %.*s\n", static_cast<int>(f.size()), f.data());
    return false;
  }
  return true;
}

bool ParseArgs(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view f = argv[i];
    if (f == "--json") {
      a.json = true;
      continue;
    }
    if (f == "-h" || f == "--help") return false;
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ari-bench: %s needs a value\n", argv[i]);
      return false;
    }
    if (!SetFlag(f, argv[++i], a)) return false;
  }
  if (a.model.empty()) {
    std::fprintf(stderr, "ari-bench: -m MODEL is required\n");
    return false;
  }
  if (a.precision != "w8a16" && a.precision != "w4a8") {
    std::fprintf(stderr, "ari-bench: --precision must be w8a16 or w4a8\n");
    return false;
  }
  if (!a.scenario.empty() && a.scenario != "preempt" && a.scenario != "thermal") {
    std::fprintf(stderr, "ari-bench: unknown scenario %s (preempt, thermal)\n", a.scenario.c_str());
    return false;
  }
  if (a.reps < 1 || a.busy_slots < 0 || a.threads < 0) {
    std::fprintf(stderr, "ari-bench: -r must be >= 1, --busy-slots and -t >= 0\n");
    return false;
  }
  return true;
}

// The preemption scenario lives in sim/preempt_run.h (tested there).
int Preempt(const Args& a, runtime::Engine& engine, const qos::Policy& policy) {
  sim::PreemptRunOptions o;
  o.policy = &policy;
  o.engine = &engine;
  o.vocab_size = engine.model().config().vocab_size;
  o.context_length = engine.model().config().context_length;
  o.normal_prompt = a.prompt;
  o.reps = a.reps;
  o.busy_slots = a.busy_slots;
  if (a.celsius > -273) o.celsius = a.celsius;
  o.max_prefill_chunk = 128;
  auto r = sim::RunPreempt(o);
  if (!r) {
    std::fprintf(stderr, "ari-bench: %s\n", r.error().ToString().c_str());
    return 1;
  }
  std::fputs((a.json ? sim::PreemptRunJson(*r) : sim::PreemptRunTable(*r)).c_str(), stdout);
  return 0;
}

// The closed-loop thermal run lives in sim/thermal_run.h (tested there).
int Thermal(const Args& a, runtime::Engine& engine, const qos::Policy& policy) {
  sim::ThermalRunOptions o;
  o.policy = &policy;
  o.engine = &engine;
  o.vocab_size = engine.model().config().vocab_size;
  o.max_prefill_chunk = 128;
  o.duration_s = a.duration_s;
  o.speedup = a.speedup;
  o.ambient_c = a.ambient;
  o.ambient_peak_c = a.ambient_peak;
  auto r = sim::RunThermal(o);
  if (!r) {
    std::fprintf(stderr, "ari-bench: %s\n", r.error().ToString().c_str());
    return 1;
  }
  std::fputs((a.json ? sim::ThermalRunJson(*r) : sim::ThermalRunTable(*r)).c_str(), stdout);
  return 0;
}

int ModelBench(const Args& a) {
  runtime::BenchOptions o;
  o.model = a.model;
  o.precision = a.precision == "w4a8" ? runtime::Precision::kW4A8 : runtime::Precision::kW8A16;
  if (!a.isa.empty()) {
    auto t = runtime::kernels::ParseIsaCeiling(a.isa);
    if (!t) {
      std::fprintf(stderr, "ari-bench: --isa: %s\n", t.error().ToString().c_str());
      return 2;
    }
    o.max_isa = *t;
  }
  o.threads = a.threads > 0 ? a.threads : 2;
  o.prompt_sizes = a.prompts;
  o.n_gen = a.n;
  o.reps = a.reps;
  for (int p : o.prompt_sizes) {
    if (p < 1) {
      std::fprintf(stderr, "ari-bench: -p sizes must be positive\n");
      return 2;
    }
  }
  if (o.n_gen < 0) {
    std::fprintf(stderr, "ari-bench: -n must be >= 0\n");
    return 2;
  }
  auto r = runtime::RunModelBench(o);
  if (!r) {
    std::fprintf(stderr, "ari-bench: %s\n", r.error().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", a.json ? r->ToJson().c_str() : r->ToTable().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "-h" || std::string_view(argv[i]) == "--help") {
      Usage(stdout);
      return 0;
    }
  }
  if (!ParseArgs(argc, argv, a)) {
    Usage();
    return 2;
  }
  if (a.scenario.empty()) return ModelBench(a);
  std::string policy_path = a.policy;
  if (policy_path.empty()) {
    auto shipped = qos::FindShippedConfig("policy_default.textproto");
    if (!shipped) {
      std::fprintf(stderr, "ari-bench: %s\n", shipped.error().message.c_str());
      return 1;
    }
    policy_path = shipped->string();
  }
  auto policy = qos::LoadPolicyFile(policy_path);
  if (!policy) {
    std::fprintf(stderr, "ari-bench: policy: %s\n", policy.error().ToString().c_str());
    return 1;
  }
  runtime::EngineOptions eo;
  eo.model_path = a.model;
  eo.slots = std::max(2, a.busy_slots);
  eo.context_length = 2048;
  eo.max_chunk = 128;
  eo.max_output = 256;
  eo.threads = a.threads;
  auto engine = runtime::Engine::Create(eo);
  if (!engine) {
    std::fprintf(stderr, "ari-bench: %s\n", engine.error().message.c_str());
    return 1;
  }
  return a.scenario == "preempt" ? Preempt(a, **engine, *policy) : Thermal(a, **engine, *policy);
}
