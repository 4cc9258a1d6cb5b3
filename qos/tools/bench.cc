// ari-bench: model benchmark and the scheduler scenarios.
//   (default)           -m MODEL [--precision w8a16|w4a8] [-t THREADS] [-p 64,128] [-n 64]
//                       [-r 5] [--json]: runtime/perf_bench.h RunModelBench (prompt and
//                       decode t/s, TTFT, time to ready, peak RSS, medians + spread,
//                       bandwidth roofline fraction, resident embedding bytes), as a table
//                       or JSON;
//   --scenario preempt  CRITICAL time-to-first-token while a long NORMAL prefill runs,
//                       divided by its idle time-to-first-token (goal <= 1.25), median
//                       of -r repetitions;
//   --scenario thermal  the RC model heated by the engine's measured busy fraction in
//                       virtual time; prints the decision timeline.
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "qos/scheduler.h"
#include "runtime/model.h"
#include "runtime/perf_bench.h"
#include "thermal/rc_model.h"


namespace {

using namespace ari;

struct Args {
  std::string model, scenario, policy = "config/policy_default.textproto";
  std::string precision = "w8a16";
  int threads = 0, n = 64, reps = 5, prompt = 1024;
  std::vector<int> prompts{64, 128};
  bool json = false;
  double duration_s = 600, time_scale = 2000;
};

void Usage() {
  std::fprintf(stderr,
               "usage: ari-bench -m MODEL [--precision w8a16|w4a8] [-t THREADS] [-p 64,128]\n"
               "                 [-n TOKENS] [-r REPS] [--json]\n"
               "       ari-bench -m MODEL --scenario preempt [--prompt 1024] [-r REPS]\n"
               "                 [--policy FILE]\n"
               "       ari-bench -m MODEL --scenario thermal [--duration S] [--time-scale X]\n");
}

bool ParseArgs(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto val = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (f == "--json") { a.json = true; continue; }
    if (f == "-h" || f == "--help") return false;
    if (!(v = val())) { std::fprintf(stderr, "ari-bench: %s needs a value\n", f.c_str()); return false; }
    if (f == "-m" || f == "--model") a.model = v;
    else if (f == "--precision") a.precision = v;
    else if (f == "-t" || f == "--threads") a.threads = std::atoi(v);
    else if (f == "-n") a.n = std::atoi(v);
    else if (f == "-r" || f == "--reps") a.reps = std::max(1, std::atoi(v));
    else if (f == "--scenario") a.scenario = v;
    else if (f == "--policy") a.policy = v;
    else if (f == "--prompt") a.prompt = std::atoi(v);
    else if (f == "--duration") a.duration_s = std::atof(v);
    else if (f == "--time-scale") a.time_scale = std::atof(v);
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
  if (a.model.empty()) { std::fprintf(stderr, "ari-bench: -m MODEL is required\n"); return false; }
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
    cv.notify_all();
  }
  const qos::TerminalEvent* Term(uint64_t id) {
    for (auto& t : terms) if (t.id == id) return &t;
    return nullptr;
  }
};

qos::SchedRequest Req(uint64_t id, qos::Urgency u, int len, int vocab, int max_tokens) {
  qos::SchedRequest r;
  r.id = id;
  r.urgency = u;
  r.max_tokens = max_tokens;
  r.deadline_ns = 0;  // the policy's class default
  r.prompt.resize(static_cast<size_t>(len));
  for (int i = 0; i < len; ++i) r.prompt[static_cast<size_t>(i)] = 1 + (i * 37 + static_cast<int>(id)) % (vocab - 1);
  return r;
}

int Preempt(const Args& a, runtime::Engine& engine, const qos::Policy& policy) {
  const int ctx = engine.model().config().context_length;
  const int vocab = engine.model().config().vocab_size;
  const int normal_len = std::min(a.prompt, ctx - 80);
  const int critical_len = 16;
  std::vector<double> ratios, idle_ms, loaded_ms;
  uint64_t id = 1;
  for (int rep = 0; rep < a.reps; ++rep) {
    Sink sink;
    qos::SchedulerOptions o;
    o.policy = &policy;
    o.engine = &engine;
    o.clock = &thermal::SteadyClock::Instance();
    o.sink = &sink;
    o.max_prefill_chunk = 128;
    auto s = qos::Scheduler::Create(o);
    if (!s) { std::fprintf(stderr, "ari-bench: %s\n", s.error().ToString().c_str()); return 1; }
    std::jthread loop([&](std::stop_token st) { (*s)->Run(st); });
    auto wait_term = [&](uint64_t rid) {
      std::unique_lock lk(sink.mu);
      sink.cv.wait(lk, [&] { return sink.Term(rid) != nullptr; });
      return *sink.Term(rid);
    };
    // Idle TTFT.
    const uint64_t c0 = id++;
    (*s)->Submit(Req(c0, qos::Urgency::kCritical, critical_len, vocab, 4));
    const double idle = static_cast<double>(wait_term(c0).first_token_ns) / 1e6;
    // Loaded: NORMAL long prefill, CRITICAL after its second chunk.
    const uint64_t nid = id++, cid = id++;
    (*s)->Submit(Req(nid, qos::Urgency::kNormal, normal_len, vocab, 4));
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
    int64_t period_ns = 0;
    {
      std::lock_guard lk(sink.mu);
      std::vector<int64_t> starts;
      for (const auto& x : sink.steps) if (x.id == nid) starts.push_back(x.start_ns);
      if (starts.size() >= 2) period_ns = starts[1] - starts[0];
    }
    const int64_t offset_ns = static_cast<int64_t>(static_cast<double>(period_ns) * (rep + 0.5) /
                                                   std::max(a.reps, 1));
    std::this_thread::sleep_for(std::chrono::nanoseconds(offset_ns));
    (*s)->Submit(Req(cid, qos::Urgency::kCritical, critical_len, vocab, 4));
    const double loaded = static_cast<double>(wait_term(cid).first_token_ns) / 1e6;
    wait_term(nid);
    loop.request_stop();
    loop.join();
    idle_ms.push_back(idle);
    loaded_ms.push_back(loaded);
    ratios.push_back(loaded / idle);
    if (!a.json) std::printf("rep %d: idle TTFT %.3f ms, during %d-token NORMAL prefill (arrival "
                             "%.1f ms into a %.1f ms chunk period) %.3f ms, ratio %.3f\n",
                             rep, idle, normal_len, offset_ns / 1e6, period_ns / 1e6, loaded,
                             loaded / idle);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  const double m = median(ratios);
  const double worst = ratios.empty() ? 0.0 : *std::max_element(ratios.begin(), ratios.end());
  if (a.json) {
    std::printf("{\"scenario\":\"preempt\",\"normal_prompt\":%d,\"reps\":%d,\"idle_ttft_ms\":%.4f,"
                "\"loaded_ttft_ms\":%.4f,\"ratio_median\":%.4f,\"ratio_max\":%.4f,\"goal\":1.25}\n",
                normal_len, a.reps, median(idle_ms), median(loaded_ms), m, worst);
  } else {
    std::printf("preempt: median idle TTFT %.3f ms, loaded %.3f ms, ratio %.3f (worst arrival "
                "phase %.3f; goal <= 1.25) %s\n",
                median(idle_ms), median(loaded_ms), m, worst, m <= 1.25 ? "OK" : "ABOVE GOAL");
  }
  return 0;
}

int Thermal(const Args& a, runtime::Engine& engine, const qos::Policy& policy) {
  thermal::ManualClock clock;
  auto model = thermal::RcModel::Create(thermal::RcParams{});
  if (!model) { std::fprintf(stderr, "ari-bench: %s\n", model.error().message.c_str()); return 1; }
  thermal::RcModelSource source(std::move(*model), clock);
  struct TimelineSink : Sink {
    thermal::RcModelSource* src = nullptr;
    const qos::Policy* policy = nullptr;
    bool json = false;
    void OnDecision(const qos::Decision& d, int64_t now) override {
      const char* band = policy->thermal_bands[static_cast<size_t>(d.thermal_band)].name.c_str();
      const std::string knobs = qos::KnobsToString(d.knobs);
      if (json) {
        std::printf("{\"t_s\":%.1f,\"temp_c\":%.2f,\"band\":\"%s\",\"class\":\"%s\",\"knobs\":\"%s\"}\n",
                    thermal::NsToSeconds(now), src->model().die_celsius(), band,
                    std::string(qos::UrgencyName(d.urgency)).c_str(), knobs.c_str());
      } else {
        std::printf("%8.1f s  %6.2f C  %-8s  %-10s  %s | %.*s\n", thermal::NsToSeconds(now),
                    src->model().die_celsius(), band, std::string(qos::UrgencyName(d.urgency)).c_str(),
                    knobs.c_str(), static_cast<int>(d.Reason().size()), d.Reason().data());
      }
    }
  } sink;
  sink.src = &source;
  sink.policy = &policy;
  sink.json = a.json;
  qos::SchedulerOptions o;
  o.policy = &policy;
  o.engine = &engine;
  o.clock = &clock;
  o.sink = &sink;
  o.temperature = &source;
  o.max_prefill_chunk = 128;
  auto s = qos::Scheduler::Create(o);
  if (!s) { std::fprintf(stderr, "ari-bench: %s\n", s.error().ToString().c_str()); return 1; }
  const int vocab = engine.model().config().vocab_size;
  const int64_t end = thermal::SecondsToNs(a.duration_s);
  uint64_t id = 1;
  if (!a.json) std::printf("time        die temp  band      class       knobs | reason\n");
  while (clock.NowNs() < end) {
    // Steady load: a NORMAL chat always waiting, a CRITICAL request every ~20 s.
    if ((*s)->QueueDepths()[2] == 0) (*s)->Submit(Req(id++, qos::Urgency::kNormal, 64, vocab, 64));
    if (clock.NowNs() / (20 * thermal::kNsPerSecond) != (clock.NowNs() + 1) / (20 * thermal::kNsPerSecond) ||
        id % 50 == 0) {
      (*s)->Submit(Req(id++, qos::Urgency::kCritical, 32, vocab, 16));
    }
    const qos::StepResult r = (*s)->Step();
    int64_t busy = 0;
    if (r.ran) busy = static_cast<int64_t>(static_cast<double>(r.info->compute_ns) * a.time_scale);
    const int64_t next = std::max(r.next_step_ns == INT64_MAX ? clock.NowNs() + thermal::kNsPerMs
                                                               : r.next_step_ns,
                                  clock.NowNs());
    const int64_t wait = std::min<int64_t>(next - clock.NowNs(), 100 * thermal::kNsPerMs);
    const int64_t span = std::max<int64_t>(busy + wait, thermal::kNsPerMs);
    thermal::RcLoad load;
    load.busy_fraction = static_cast<double>(busy) / static_cast<double>(span);
    load.active_cores = r.ran ? r.info->knobs.threads : 0;
    load.precision = r.ran && r.info->knobs.precision == runtime::Precision::kW4A8
                         ? thermal::PowerPrecision::kW4A8 : thermal::PowerPrecision::kW8A16;
    source.SetLoad(load);
    clock.AdvanceNs(span);
  }
  (*s)->Shutdown("bench over");
  std::printf("thermal: %.0f s virtual, final die %.2f C, %llu requests\n", a.duration_s,
              source.model().die_celsius(), static_cast<unsigned long long>(id - 1));
  return 0;
}

int ModelBench(const Args& a) {
  runtime::BenchOptions o;
  o.model = a.model;
  o.precision = a.precision == "w4a8" ? runtime::Precision::kW4A8 : runtime::Precision::kW8A16;
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
  if (!ParseArgs(argc, argv, a)) {
    Usage();
    return 2;
  }
  if (a.scenario.empty()) return ModelBench(a);
  auto policy = qos::LoadPolicyFile(a.policy);
  if (!policy) {
    std::fprintf(stderr, "ari-bench: policy: %s\n", policy.error().ToString().c_str());
    return 1;
  }
  runtime::EngineOptions eo;
  eo.model_path = a.model;
  eo.slots = 2;
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
