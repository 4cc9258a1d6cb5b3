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
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "qos/scheduler.h"
#include "qos/shipped_config.h"
#include "runtime/eval/perf_bench.h"
#include "runtime/model/model.h"
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

bool ParseArgs(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--json") {
      a.json = true;
      continue;
    }
    if (f == "-h" || f == "--help") return false;
    if (i + 1 >= argc) {
      std::fprintf(stderr, "ari-bench: %s needs a value\n", f.c_str());
      return false;
    }
    const char* v = argv[++i];
    if (f == "-m" || f == "--model")
      a.model = v;
    else if (f == "--precision")
      a.precision = v;
    else if (f == "--isa")
      a.isa = v;
    else if (f == "-t" || f == "--threads")
      a.threads = std::atoi(v);
    else if (f == "-n")
      a.n = std::atoi(v);
    else if (f == "-r" || f == "--reps")
      a.reps = std::max(1, std::atoi(v));
    else if (f == "--scenario")
      a.scenario = v;
    else if (f == "--policy")
      a.policy = v;
    else if (f == "--prompt")
      a.prompt = std::atoi(v);
    else if (f == "--duration")
      a.duration_s = std::atof(v);
    else if (f == "--speedup")
      a.speedup = std::atof(v);
    else if (f == "--celsius")
      a.celsius = std::atof(v);
    else if (f == "--busy-slots")
      a.busy_slots = std::max(0, std::atoi(v));
    else if (f == "--ambient")
      a.ambient = std::atof(v);
    else if (f == "--ambient-peak")
      a.ambient_peak = std::atof(v);
    else if (f == "-p") {
      a.prompts.clear();
      for (const char* s = v; *s;) {
        a.prompts.push_back(std::atoi(s));
        s = std::strchr(s, ',');
        if (!s) break;
        ++s;
      }
    } else {
      std::fprintf(stderr, "ari-bench: unknown flag %s\n", f.c_str());
      return false;
    }
  }
  if (a.model.empty()) {
    std::fprintf(stderr, "ari-bench: -m MODEL is required\n");
    return false;
  }
  if (a.precision != "w8a16" && a.precision != "w4a8") {
    std::fprintf(stderr, "ari-bench: --precision must be w8a16 or w4a8\n");
    return false;
  }
  return true;
}

struct Sink : qos::ChunkSink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<qos::StepInfo> steps;
  std::vector<qos::TerminalEvent> terms;
  std::vector<std::string> msgs;
  void OnChunk(const qos::ChunkEvent&) override {}
  void OnTerminal(const qos::TerminalEvent& t) override {
    std::lock_guard lk(mu);
    terms.push_back(t);
    msgs.emplace_back(t.message);
    cv.notify_all();
  }
  void OnDecision(const qos::Decision&, int64_t) override {}
  void OnStep(const qos::StepInfo& s) override {
    std::lock_guard lk(mu);
    steps.push_back(s);
    step_cpu_ns.push_back(cpu_src ? cpu_src->load() : 0);
    cv.notify_all();
  }
  std::vector<int64_t> step_cpu_ns;  // per step: process CPU time / threads (CpuTimedRunner)
  const std::atomic<int64_t>* cpu_src = nullptr;
  const qos::TerminalEvent* Term(uint64_t id) {
    for (auto& t : terms)
      if (t.id == id) return &t;
    return nullptr;
  }
};

int64_t ProcessCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Process CPU time of each chunk divided by its worker count: what the chunk would take
// on an otherwise idle machine (time spent descheduled by other processes is not CPU
// time). The pool's workers spin ~2k pauses before they block, so this is a slight
// overestimate.
struct CpuTimedRunner final : runtime::ChunkRunner {
  explicit CpuTimedRunner(runtime::ChunkRunner& e) : inner(e) {}
  int32_t num_slots() const override { return inner.num_slots(); }
  runtime::Result<void> StartTurn(int32_t slot, const runtime::TurnSpec& t) override {
    return inner.StartTurn(slot, t);
  }
  runtime::Result<runtime::ChunkResult> RunChunk(int32_t slot,
                                                 const runtime::ChunkKnobs& k) override {
    const int64_t t0 = ProcessCpuNs();
    auto r = inner.RunChunk(slot, k);
    last_cpu_ns.store((ProcessCpuNs() - t0) / std::max(1, k.threads));
    return r;
  }
  int32_t num_park_areas() const override { return inner.num_park_areas(); }
  runtime::Result<runtime::ParkId> ParkSlot(int32_t slot) override { return inner.ParkSlot(slot); }
  runtime::Result<void> ResumeParked(runtime::ParkId id, int32_t slot) override {
    return inner.ResumeParked(id, slot);
  }
  void DropParked(runtime::ParkId id) override { inner.DropParked(id); }
  runtime::ChunkRunner& inner;
  std::atomic<int64_t> last_cpu_ns{0};
};

qos::SchedRequest Req(uint64_t id, qos::Urgency u, int len, int vocab, int max_tokens) {
  qos::SchedRequest r;
  r.id = id;
  r.urgency = u;
  r.max_tokens = max_tokens;
  r.deadline_ns = 0;  // the policy's class default
  r.prompt.resize(static_cast<size_t>(len));
  for (int i = 0; i < len; ++i)
    r.prompt[static_cast<size_t>(i)] = 1 + (i * 37 + static_cast<int>(id)) % (vocab - 1);
  return r;
}

// Without --celsius there is no temperature source: the conservative knobs apply.
struct FixedSource : thermal::TemperatureSource {
  double c = 0;
  void ReadInto(thermal::Reading& out) override {
    out.celsius = c;
    out.state = thermal::SensorState::kOk;
    out.time_ns = thermal::SteadyClock::Instance().NowNs();
    out.source = "fixed";
  }
  std::string_view name() const override { return "fixed"; }
};

// The scenario's fixed figures: request sizes and the NORMAL class's knobs.
struct PreemptSetup {
  int vocab = 0;
  int normal_len = 0;
  int critical_len = 16;
  bool sensor = false;
  int64_t normal_pause_ns = 0;  // NORMAL's pacing pause per chunk
};

PreemptSetup SetUpPreempt(const Args& a, runtime::Engine& engine, const qos::Policy& policy) {
  PreemptSetup ps;
  const int ctx = engine.model().config().context_length;
  ps.vocab = engine.model().config().vocab_size;
  ps.normal_len = std::min(a.prompt, ctx - 80);
  ps.sensor = a.celsius > -273;
  const bool sensor = ps.sensor;
  size_t band = 0;
  for (size_t b = 1; b < policy.thermal_bands.size(); ++b) {
    if (a.celsius >= policy.thermal_bands[b].enter_c) band = b;
  }
  const size_t nr = static_cast<size_t>(qos::Rank(qos::Urgency::kNormal));
  ps.normal_pause_ns =
      int64_t{sensor ? policy.knobs[band][nr].pause_ms : policy.conservative[nr].pause_ms} *
      thermal::kNsPerMs;
  if (!a.json) {
    std::printf(
        "knobs: %s (NORMAL: %s)\n",
        sensor ? ("band " + policy.thermal_bands[band].name).c_str() : "conservative (no sensor)",
        qos::KnobsToString(sensor ? policy.knobs[band][nr] : policy.conservative[nr]).c_str());
  }
  return ps;
}

// Every repetition's figures, one entry per repetition.
struct PreemptSeries {
  std::vector<double> ratios, idle_ms, loaded_ms, normal_tps, normal_chunk_ms;
  std::vector<double> cpu_ratios, cpu_idle_ms, cpu_loaded_ms, cpu_normal_tps, cpu_chunk_ms;
};

// One repetition's requests and times.
struct RepRun {
  uint64_t c0 = 0, nid = 0, cid = 0;  // idle CRITICAL, NORMAL, loaded CRITICAL
  double idle = 0, loaded = 0;        // CRITICAL time to first token, ms
  int64_t period_ns = 0, offset_ns = 0, arrival_ns = 0;
};

// One repetition on a fresh scheduler running in real time: CRITICAL alone, then
// CRITICAL arriving during a long NORMAL prefill. False when the scheduler could not
// be created (said on stderr).
bool RunRepetition(const Args& a, const PreemptSetup& ps, const qos::Policy& policy,
                   CpuTimedRunner& timed, FixedSource& fixed, int rep, uint64_t& id, Sink& sink,
                   RepRun& t) {
  const int vocab = ps.vocab;
  qos::SchedulerOptions o;
  o.policy = &policy;
  o.engine = &timed;
  o.clock = &thermal::SteadyClock::Instance();
  o.sink = &sink;
  o.max_prefill_chunk = 128;
  sink.cpu_src = &timed.last_cpu_ns;
  if (ps.sensor) o.temperature = &fixed;
  auto s = qos::Scheduler::Create(o);
  if (!s) {
    std::fprintf(stderr, "ari-bench: %s\n", s.error().ToString().c_str());
    return false;
  }
  std::jthread loop([&](const std::stop_token& st) { (*s)->Run(st); });
  auto wait_term = [&](uint64_t rid) {
    std::unique_lock lk(sink.mu);
    sink.cv.wait(lk, [&] { return sink.Term(rid) != nullptr; });
    return *sink.Term(rid);
  };
  // Idle TTFT.
  t.c0 = id++;
  (*s)->Submit(Req(t.c0, qos::Urgency::kCritical, ps.critical_len, vocab, 4));
  t.idle = static_cast<double>(wait_term(t.c0).first_token_ns) / 1e6;
  // --busy-slots N: N - 1 NORMAL turns take slots first, each with an earlier (far)
  // deadline than the last so it runs at the next boundary; the long NORMAL prefill
  // (earliest deadline) takes the last slot.
  const int64_t far = thermal::SteadyClock::Instance().NowNs() + 3600 * thermal::kNsPerMs * 1000;
  std::vector<uint64_t> fillers;
  for (int k = 0; k + 1 < a.busy_slots; ++k) {
    qos::SchedRequest f = Req(id++, qos::Urgency::kNormal, 8, vocab, 16);
    f.deadline_ns = far - k * thermal::kNsPerMs * 1000;
    fillers.push_back(f.id);
    if ((*s)->Submit(std::move(f)) != qos::SubmitStatus::kAdmitted) {
      std::fprintf(stderr, "ari-bench: a --busy-slots turn was not admitted\n");
      return false;
    }
    std::unique_lock lk(sink.mu);
    sink.cv.wait(lk, [&] { return !sink.steps.empty() && sink.steps.back().id == fillers.back(); });
  }
  // Loaded: NORMAL long prefill, CRITICAL after its second chunk.
  const uint64_t nid = id++, cid = id++;
  t.nid = nid;
  t.cid = cid;
  qos::SchedRequest normal = Req(nid, qos::Urgency::kNormal, ps.normal_len, vocab, 4);
  if (a.busy_slots > 0) normal.deadline_ns = far - a.busy_slots * thermal::kNsPerMs * 1000;
  (*s)->Submit(std::move(normal));
  {
    std::unique_lock lk(sink.mu);
    sink.cv.wait(lk, [&] {
      return std::count_if(sink.steps.begin(), sink.steps.end(),
                           [&](const qos::StepInfo& x) { return x.id == nid; }) >= 2;
    });
  }
  // Arrival phase: rep r submits at (r + 0.5) / reps of the NORMAL request's chunk period
  // (compute + pacing pause, from its first two steps) after its second step, so the
  // repetitions sample arrivals across the whole cycle, not only at chunk boundaries.
  {
    std::lock_guard lk(sink.mu);
    std::vector<int64_t> starts;
    for (const auto& x : sink.steps)
      if (x.id == nid) starts.push_back(x.start_ns);
    if (starts.size() >= 2) t.period_ns = starts[1] - starts[0];
  }
  t.offset_ns =
      static_cast<int64_t>(static_cast<double>(t.period_ns) * (rep + 0.5) / std::max(a.reps, 1));
  std::this_thread::sleep_for(std::chrono::nanoseconds(t.offset_ns));
  t.arrival_ns = thermal::SteadyClock::Instance().NowNs();
  (*s)->Submit(Req(cid, qos::Urgency::kCritical, ps.critical_len, vocab, 4));
  t.loaded = static_cast<double>(wait_term(cid).first_token_ns) / 1e6;
  wait_term(nid);
  for (uint64_t f : fillers) wait_term(f);
  loop.request_stop();
  loop.join();
  return true;
}

// NORMAL prefill throughput (without the CRITICAL request's steps) + chunk compute, in
// wall time and in CPU time.
void AddPrefillFigures(const Sink& sink, const RepRun& t, int64_t normal_pause_ns,
                       PreemptSeries& out) {
  const uint64_t nid = t.nid, cid = t.cid;
  int64_t tok = 0, comp = 0, first = -1, last = 0, other = 0, chunks = 0;
  for (const auto& x : sink.steps) {
    if (x.id == nid && x.phase == runtime::ChunkPhase::kPrefill) {
      tok += x.prompt_tokens;
      comp += x.compute_ns;
      ++chunks;
      if (first < 0) first = x.start_ns;
      last = x.start_ns + x.compute_ns;
    }
  }
  for (const auto& x : sink.steps) {
    if (x.id == cid && x.start_ns >= first && x.start_ns < last) other += x.compute_ns;
  }
  const double wall_s = static_cast<double>(last - first - other) / 1e9;
  out.normal_tps.push_back(wall_s > 0 ? static_cast<double>(tok) / wall_s : 0.0);
  out.normal_chunk_ms.push_back(
      chunks ? static_cast<double>(comp) / 1e6 / static_cast<double>(chunks) : 0.0);
  // The same in CPU time: CRITICAL's chunks up to its first token (idle and loaded),
  // plus the unfinished part of the NORMAL chunk it arrived in (by wall-time share).
  auto cpu_to_first_token = [&](uint64_t rid) {
    int64_t sum = 0;
    for (size_t i = 0; i < sink.steps.size(); ++i) {
      if (sink.steps[i].id != rid) continue;
      sum += sink.step_cpu_ns[i];
      if (sink.steps[i].new_tokens > 0) break;
    }
    return static_cast<double>(sum) / 1e6;
  };
  double residual = 0, ncpu = 0;
  int64_t pause_ns = 0;
  const int64_t arrival_ns = t.arrival_ns;
  for (size_t i = 0; i < sink.steps.size(); ++i) {
    const auto& x = sink.steps[i];
    if (x.id != nid || x.phase != runtime::ChunkPhase::kPrefill) continue;
    ncpu += static_cast<double>(sink.step_cpu_ns[i]) / 1e6;
    if (x.start_ns <= arrival_ns && arrival_ns < x.start_ns + x.compute_ns && x.compute_ns > 0) {
      residual =
          static_cast<double>(sink.step_cpu_ns[i]) / 1e6 *
          (1.0 - static_cast<double>(arrival_ns - x.start_ns) / static_cast<double>(x.compute_ns));
    }
  }
  for (const auto& x : sink.steps) {
    if (x.id == nid && x.phase == runtime::ChunkPhase::kPrefill) pause_ns += normal_pause_ns;
  }
  const double ci = cpu_to_first_token(t.c0), cl = cpu_to_first_token(cid) + residual;
  out.cpu_idle_ms.push_back(ci);
  out.cpu_loaded_ms.push_back(cl);
  out.cpu_ratios.push_back(ci > 0 ? cl / ci : 0.0);
  out.cpu_chunk_ms.push_back(chunks ? ncpu / static_cast<double>(chunks) : 0.0);
  const double paced_s = ncpu / 1e3 + static_cast<double>(pause_ns) / 1e9;
  out.cpu_normal_tps.push_back(paced_s > 0 ? static_cast<double>(tok) / paced_s : 0.0);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

void PrintPreemptSummary(const Args& a, int normal_len, const PreemptSeries& r) {
  const double m = Median(r.ratios);
  const double worst = r.ratios.empty() ? 0.0 : *std::max_element(r.ratios.begin(), r.ratios.end());
  if (a.json) {
    std::printf(
        "{\"scenario\":\"preempt\",\"busy_slots\":%d,\"normal_prompt\":%d,\"reps\":%d,"
        "\"idle_ttft_ms\":%.4f,"
        "\"loaded_ttft_ms\":%.4f,\"ratio_median\":%.4f,\"ratio_max\":%.4f,\"goal\":1.25,"
        "\"normal_prefill_tok_s\":%.2f,\"normal_chunk_compute_ms\":%.3f,"
        "\"cpu_idle_ttft_ms\":%.4f,\"cpu_loaded_ttft_ms\":%.4f,\"cpu_ratio_median\":%.4f,"
        "\"cpu_ratio_max\":%.4f,\"cpu_normal_chunk_ms\":%.3f,"
        "\"cpu_normal_prefill_tok_s\":%.2f}\n",
        a.busy_slots, normal_len, a.reps, Median(r.idle_ms), Median(r.loaded_ms), m, worst,
        Median(r.normal_tps), Median(r.normal_chunk_ms), Median(r.cpu_idle_ms),
        Median(r.cpu_loaded_ms), Median(r.cpu_ratios),
        *std::max_element(r.cpu_ratios.begin(), r.cpu_ratios.end()), Median(r.cpu_chunk_ms),
        Median(r.cpu_normal_tps));
  } else {
    std::printf(
        "preempt: median idle TTFT %.3f ms, loaded %.3f ms, ratio %.3f (worst arrival "
        "phase %.3f; goal <= 1.25) %s; NORMAL prefill %.1f tok/s (pauses included, "
        "CRITICAL steps excluded), %.1f ms compute per chunk\n",
        Median(r.idle_ms), Median(r.loaded_ms), m, worst, m <= 1.25 ? "OK" : "ABOVE GOAL",
        Median(r.normal_tps), Median(r.normal_chunk_ms));
    const double cm = Median(r.cpu_ratios);
    std::printf(
        "preempt (CPU time per worker, immune to other processes' load): idle TTFT %.3f "
        "ms, loaded %.3f ms, ratio %.3f (worst phase %.3f) %s; NORMAL %.1f ms per "
        "chunk, prefill %.1f tok/s with pacing\n",
        Median(r.cpu_idle_ms), Median(r.cpu_loaded_ms), cm,
        *std::max_element(r.cpu_ratios.begin(), r.cpu_ratios.end()),
        cm <= 1.25 ? "OK" : "ABOVE GOAL", Median(r.cpu_chunk_ms), Median(r.cpu_normal_tps));
  }
}

int Preempt(const Args& a, runtime::Engine& engine, const qos::Policy& policy) {
  CpuTimedRunner timed(engine);
  FixedSource fixed;
  fixed.c = a.celsius;
  const PreemptSetup ps = SetUpPreempt(a, engine, policy);
  PreemptSeries r;
  uint64_t id = 1;
  for (int rep = 0; rep < a.reps; ++rep) {
    Sink sink;
    RepRun t;
    if (!RunRepetition(a, ps, policy, timed, fixed, rep, id, sink, t)) return 1;
    AddPrefillFigures(sink, t, ps.normal_pause_ns, r);
    const double idle = t.idle, loaded = t.loaded;
    if (a.busy_slots > 0 && !a.json) {
      int parks = 0;
      for (const auto& x : sink.steps) parks += x.parked_id != 0 ? 1 : 0;
      std::printf("rep %d: %d slots busy, %d turn(s) parked for the CRITICAL request\n", rep,
                  a.busy_slots, parks);
    }
    r.idle_ms.push_back(idle);
    r.loaded_ms.push_back(loaded);
    r.ratios.push_back(loaded / idle);
    if (!a.json)
      std::printf(
          "rep %d: idle TTFT %.3f ms, during %d-token NORMAL prefill (arrival "
          "%.1f ms into a %.1f ms chunk period) %.3f ms, ratio %.3f; NORMAL "
          "prefill %.1f tok/s, %.1f ms compute per chunk | CPU time: idle %.1f "
          "ms, loaded %.1f ms, ratio %.3f, NORMAL %.1f ms/chunk, %.1f tok/s paced\n",
          rep, idle, ps.normal_len, t.offset_ns / 1e6, t.period_ns / 1e6, loaded, loaded / idle,
          r.normal_tps.back(), r.normal_chunk_ms.back(), r.cpu_idle_ms.back(),
          r.cpu_loaded_ms.back(), r.cpu_ratios.back(), r.cpu_chunk_ms.back(),
          r.cpu_normal_tps.back());
  }
  PrintPreemptSummary(a, ps.normal_len, r);
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
  if (a.scenario == "preempt") return Preempt(a, **engine, *policy);
  if (a.scenario == "thermal") return Thermal(a, **engine, *policy);
  std::fprintf(stderr, "ari-bench: unknown scenario %s (preempt, thermal)\n", a.scenario.c_str());
  return 2;
}
