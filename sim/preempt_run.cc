#include "sim/preempt_run.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "qos/scheduler.h"
#include "thermal/clock.h"
#include "thermal/source.h"

namespace ari::sim {
namespace {

// Collects the scheduler's steps (with the process CPU time of each) and terminal events.
struct Sink : qos::ChunkSink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<qos::StepInfo> steps;
  std::vector<int64_t> step_cpu_ns;  // per step: process CPU time / threads (CpuTimedRunner)
  // Terminal events with their own copy of the message (the scheduler's may not outlive
  // the call); a deque never moves its elements.
  struct Term {
    qos::TerminalEvent event;
    std::string message;
  };
  std::deque<Term> terms;
  const std::atomic<int64_t>* cpu_src = nullptr;

  void OnChunk(const qos::ChunkEvent&) override {}
  void OnDecision(const qos::Decision&, int64_t) override {}
  void OnTerminal(const qos::TerminalEvent& t) override {
    const std::lock_guard lk(mu);
    Term& added = terms.emplace_back(Term{t, std::string(t.message)});
    added.event.message = added.message;
    cv.notify_all();
  }
  void OnStep(const qos::StepInfo& s) override {
    const std::lock_guard lk(mu);
    steps.push_back(s);
    step_cpu_ns.push_back(cpu_src ? cpu_src->load() : 0);
    cv.notify_all();
  }
  const qos::TerminalEvent* TermOf(uint64_t id) const {
    for (const auto& t : terms) {
      if (t.event.id == id) return &t.event;
    }
    return nullptr;
  }
  int64_t StepsOf(uint64_t id) const {
    return std::count_if(steps.begin(), steps.end(),
                         [&](const qos::StepInfo& x) { return x.id == id; });
  }
};

int64_t ProcessCpuNs() {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
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

// A fixed temperature (PreemptRunOptions::celsius).
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

qos::SchedRequest Req(uint64_t id, qos::Urgency u, int len, int vocab, int max_tokens) {
  qos::SchedRequest r;
  r.id = id;
  r.urgency = u;
  r.max_tokens = max_tokens;
  r.deadline_ns = 0;  // the policy's class default
  r.prompt.resize(static_cast<size_t>(len));
  for (int i = 0; i < len; ++i) {
    r.prompt[static_cast<size_t>(i)] = 1 + (i * 37 + static_cast<int>(id)) % (vocab - 1);
  }
  return r;
}

// The NORMAL class's knobs (fixed temperature: its band's cell; else conservative).
struct Setup {
  int normal_len = 0;
  int normal_chunk = 0;         // NORMAL's prompt tokens per prefill chunk
  int64_t normal_pause_ns = 0;  // NORMAL's pacing pause per chunk
  std::string knobs;
};

Setup MakeSetup(const PreemptRunOptions& o) {
  const qos::Policy& policy = *o.policy;
  Setup s;
  s.normal_len = std::min(o.normal_prompt, o.context_length - 80);
  size_t band = 0;
  for (size_t b = 1; b < policy.thermal_bands.size(); ++b) {
    if (o.celsius && *o.celsius >= policy.thermal_bands[b].enter_c) band = b;
  }
  const auto nr = static_cast<size_t>(qos::Rank(qos::Urgency::kNormal));
  const qos::Knobs& k = o.celsius ? policy.knobs[band][nr] : policy.conservative[nr];
  s.normal_pause_ns = int64_t{k.pause_ms} * thermal::kNsPerMs;
  s.normal_chunk = std::min(static_cast<int>(k.prefill_chunk), o.max_prefill_chunk);
  s.knobs = (o.celsius ? "band " + policy.thermal_bands[band].name : "conservative (no sensor)") +
            " (NORMAL: " + qos::KnobsToString(k) + ")";
  return s;
}

// The requests and times of one repetition.
struct RepRun {
  uint64_t c0 = 0, nid = 0, cid = 0;  // idle CRITICAL, NORMAL, loaded CRITICAL
  std::vector<uint64_t> fillers;      // the --busy-slots NORMAL turns
  double idle = 0, loaded = 0;        // CRITICAL time to first token, ms
  int64_t period_ns = 0, offset_ns = 0, arrival_ns = 0;
};

// A running scheduler of one repetition, and the waits on its sink.
class RepRunner {
 public:
  RepRunner(const PreemptRunOptions& o, Sink& sink) : o_(o), sink_(sink) {}

  Result<void> Submit(qos::SchedRequest r) {
    const uint64_t id = r.id;
    const qos::SubmitStatus st = sched_->Submit(std::move(r));
    if (st == qos::SubmitStatus::kAdmitted) return {};
    return MakeError(ErrorCode::kInternal, "preempt run: request " + std::to_string(id) +
                                               " not admitted (" +
                                               std::string(qos::SubmitStatusName(st)) + ")");
  }
  // Waits until pred() holds under the sink's lock, at most wait_timeout_ms.
  template <class Pred>
  Result<void> Wait(const char* what, Pred pred) {
    std::unique_lock lk(sink_.mu);
    if (sink_.cv.wait_for(lk, std::chrono::milliseconds(o_.wait_timeout_ms), pred)) return {};
    return MakeError(ErrorCode::kInternal, std::string("preempt run: no ") + what + " within " +
                                               std::to_string(o_.wait_timeout_ms) + " ms");
  }
  // The request's terminal event; an error unless it ended DONE.
  Result<qos::TerminalEvent> WaitDone(uint64_t id) {
    auto w = Wait("terminal event", [&] { return sink_.TermOf(id) != nullptr; });
    if (!w) return std::unexpected(w.error());
    const std::lock_guard lk(sink_.mu);
    const qos::TerminalEvent& t = *sink_.TermOf(id);
    if (t.status == qos::TerminalStatus::kDone && t.first_token_ns >= 0) return t;
    return MakeError(ErrorCode::kInternal, "preempt run: request " + std::to_string(id) +
                                               " ended " +
                                               std::string(qos::TerminalStatusName(t.status)) +
                                               ": " + std::string(t.message));
  }
  Result<void> Start(CpuTimedRunner& timed, FixedSource& fixed);
  void Stop() {
    if (loop_.joinable()) {
      loop_.request_stop();
      loop_.join();
    }
  }
  ~RepRunner() { Stop(); }
  RepRunner(const RepRunner&) = delete;
  RepRunner& operator=(const RepRunner&) = delete;

 private:
  const PreemptRunOptions& o_;
  Sink& sink_;
  std::unique_ptr<qos::Scheduler> sched_;
  std::jthread loop_;
};

Result<void> RepRunner::Start(CpuTimedRunner& timed, FixedSource& fixed) {
  qos::SchedulerOptions so;
  so.policy = o_.policy;
  so.engine = &timed;
  so.clock = &thermal::SteadyClock::Instance();
  so.sink = &sink_;
  so.max_prefill_chunk = o_.max_prefill_chunk;
  sink_.cpu_src = &timed.last_cpu_ns;
  if (o_.celsius) so.temperature = &fixed;
  auto s = qos::Scheduler::Create(so);
  if (!s) return MakeError(ErrorCode::kInvalidArgument, "preempt run: " + s.error().ToString());
  sched_ = std::move(*s);
  loop_ = std::jthread([this](const std::stop_token& st) { sched_->Run(st); });
  return {};
}

// The arrival phase: rep r of n waits (r + 0.5) / n of the NORMAL chunk period after the
// NORMAL request's second step.
void SetArrivalPhase(const Sink& sink, int rep, int reps, RepRun& t) {
  std::vector<int64_t> starts;
  for (const auto& x : sink.steps) {
    if (x.id == t.nid) starts.push_back(x.start_ns);
  }
  if (starts.size() >= 2) t.period_ns = starts[1] - starts[0];
  t.offset_ns = static_cast<int64_t>(static_cast<double>(t.period_ns) * (rep + 0.5) / reps);
}

// One repetition (header comment, steps 1-3).
Result<void> RunRepetition(const PreemptRunOptions& o, const Setup& setup, CpuTimedRunner& timed,
                           FixedSource& fixed, int rep, uint64_t& id, Sink& sink, RepRun& t) {
  const int vocab = o.vocab_size;
  RepRunner run(o, sink);
  if (auto s = run.Start(timed, fixed); !s) return s;
  // 1. Idle TTFT.
  t.c0 = id++;
  if (auto s = run.Submit(Req(t.c0, qos::Urgency::kCritical, o.critical_prompt, vocab, 4)); !s) {
    return s;
  }
  auto idle = run.WaitDone(t.c0);
  if (!idle) return std::unexpected(idle.error());
  t.idle = static_cast<double>(idle->first_token_ns) / 1e6;
  // 2. busy_slots - 1 NORMAL turns take slots first, each with an earlier (far) deadline
  // than the last so it runs at the next boundary; the long NORMAL prefill (earliest
  // deadline) takes the last slot.
  const int64_t far = thermal::SteadyClock::Instance().NowNs() + 3600 * thermal::kNsPerMs * 1000;
  for (int k = 0; k + 1 < o.busy_slots; ++k) {
    qos::SchedRequest f = Req(id++, qos::Urgency::kNormal, 8, vocab, 16);
    f.deadline_ns = far - k * thermal::kNsPerMs * 1000;
    const uint64_t fid = f.id;
    t.fillers.push_back(fid);
    if (auto s = run.Submit(std::move(f)); !s) return s;
    auto w = run.Wait("first step of a --busy-slots turn",
                      [&] { return !sink.steps.empty() && sink.steps.back().id == fid; });
    if (!w) return w;
  }
  // 3. The long NORMAL prefill; CRITICAL after its second chunk, at the repetition's phase.
  t.nid = id++;
  t.cid = id++;
  qos::SchedRequest normal = Req(t.nid, qos::Urgency::kNormal, setup.normal_len, vocab, 4);
  if (o.busy_slots > 0) normal.deadline_ns = far - o.busy_slots * thermal::kNsPerMs * 1000;
  if (auto s = run.Submit(std::move(normal)); !s) return s;
  auto w = run.Wait("second NORMAL chunk", [&] { return sink.StepsOf(t.nid) >= 2; });
  if (!w) return w;
  {
    const std::lock_guard lk(sink.mu);
    SetArrivalPhase(sink, rep, o.reps, t);
  }
  std::this_thread::sleep_for(std::chrono::nanoseconds(t.offset_ns));
  t.arrival_ns = thermal::SteadyClock::Instance().NowNs();
  if (auto s = run.Submit(Req(t.cid, qos::Urgency::kCritical, o.critical_prompt, vocab, 4)); !s) {
    return s;
  }
  auto loaded = run.WaitDone(t.cid);
  if (!loaded) return std::unexpected(loaded.error());
  t.loaded = static_cast<double>(loaded->first_token_ns) / 1e6;
  if (auto n = run.WaitDone(t.nid); !n) return std::unexpected(n.error());
  for (const uint64_t f : t.fillers) {
    if (auto e = run.WaitDone(f); !e) return std::unexpected(e.error());
  }
  run.Stop();
  return {};
}

// CRITICAL's CPU time up to its first token.
double CpuToFirstToken(const Sink& sink, uint64_t rid) {
  int64_t sum = 0;
  for (size_t i = 0; i < sink.steps.size(); ++i) {
    if (sink.steps[i].id != rid) continue;
    sum += sink.step_cpu_ns[i];
    if (sink.steps[i].new_tokens > 0) break;
  }
  return static_cast<double>(sum) / 1e6;
}

// The repetition's figures from its steps (PreemptRep's comments).
PreemptRep Figures(const Sink& sink, const RepRun& t, int64_t normal_pause_ns) {
  PreemptRep r;
  r.idle_ms = t.idle;
  r.loaded_ms = t.loaded;
  r.ratio = t.idle > 0 ? t.loaded / t.idle : 0.0;
  r.arrival_offset_ms = static_cast<double>(t.offset_ns) / 1e6;
  r.period_ms = static_cast<double>(t.period_ns) / 1e6;
  int64_t tok = 0, comp = 0, first = -1, last = 0, last_start = 0, other = 0, chunks = 0;
  int64_t critical_token_ns = -1;
  double ncpu = 0, residual = 0;
  for (size_t i = 0; i < sink.steps.size(); ++i) {
    const auto& x = sink.steps[i];
    r.parked += x.parked_id != 0 ? 1 : 0;
    if (x.id == t.cid && x.new_tokens > 0 && critical_token_ns < 0) {
      critical_token_ns = x.start_ns + x.compute_ns;
    }
    if (x.id != t.nid || x.phase != runtime::ChunkPhase::kPrefill) continue;
    tok += x.prompt_tokens;
    comp += x.compute_ns;
    ++chunks;
    if (first < 0) first = x.start_ns;
    last = x.start_ns + x.compute_ns;
    last_start = x.start_ns;
    ncpu += static_cast<double>(sink.step_cpu_ns[i]) / 1e6;
    // The unfinished part of the NORMAL chunk CRITICAL arrived in (by wall-time share).
    if (x.start_ns <= t.arrival_ns && t.arrival_ns < x.start_ns + x.compute_ns &&
        x.compute_ns > 0) {
      residual = static_cast<double>(sink.step_cpu_ns[i]) / 1e6 *
                 (1.0 - static_cast<double>(t.arrival_ns - x.start_ns) /
                            static_cast<double>(x.compute_ns));
    }
  }
  for (const auto& x : sink.steps) {
    if (x.id == t.cid && x.start_ns >= first && x.start_ns < last) other += x.compute_ns;
  }
  r.critical_first = critical_token_ns >= 0 && critical_token_ns <= last_start;
  const double wall_s = static_cast<double>(last - first - other) / 1e9;
  r.normal_tok_s = wall_s > 0 ? static_cast<double>(tok) / wall_s : 0.0;
  r.normal_chunk_ms = chunks ? static_cast<double>(comp) / 1e6 / static_cast<double>(chunks) : 0.0;
  r.cpu_idle_ms = CpuToFirstToken(sink, t.c0);
  r.cpu_loaded_ms = CpuToFirstToken(sink, t.cid) + residual;
  r.cpu_ratio = r.cpu_idle_ms > 0 ? r.cpu_loaded_ms / r.cpu_idle_ms : 0.0;
  r.cpu_normal_chunk_ms = chunks ? ncpu / static_cast<double>(chunks) : 0.0;
  const double paced_s = ncpu / 1e3 + static_cast<double>(normal_pause_ns * chunks) / 1e9;
  r.cpu_normal_tok_s = paced_s > 0 ? static_cast<double>(tok) / paced_s : 0.0;
  return r;
}

}  // namespace

Result<PreemptRunResult> RunPreempt(const PreemptRunOptions& o) {
  if (!o.policy || !o.engine) {
    return MakeError(ErrorCode::kInvalidArgument, "preempt run: policy and engine are required");
  }
  if (o.vocab_size < 2 || o.reps < 1 || o.critical_prompt < 1 || o.max_prefill_chunk < 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "preempt run: needs vocab_size >= 2, reps >= 1, critical_prompt >= 1 and "
                     "max_prefill_chunk >= 1");
  }
  if (o.busy_slots > o.engine->num_slots()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "preempt run: busy_slots " + std::to_string(o.busy_slots) + " above the " +
                         std::to_string(o.engine->num_slots()) + " slots of the engine");
  }
  const Setup setup = MakeSetup(o);
  if (setup.normal_len <= 2 * setup.normal_chunk) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "preempt run: the NORMAL prompt (" + std::to_string(setup.normal_len) +
                         " tokens after the context cut) needs more than two chunks of " +
                         std::to_string(setup.normal_chunk));
  }
  CpuTimedRunner timed(*o.engine);
  FixedSource fixed;
  fixed.c = o.celsius.value_or(0.0);
  PreemptRunResult result;
  result.normal_prompt = setup.normal_len;
  result.busy_slots = o.busy_slots;
  result.knobs = setup.knobs;
  uint64_t id = 1;
  for (int rep = 0; rep < o.reps; ++rep) {
    Sink sink;
    RepRun t;
    if (auto s = RunRepetition(o, setup, timed, fixed, rep, id, sink, t); !s) {
      return std::unexpected(s.error());
    }
    const std::lock_guard lk(sink.mu);
    result.reps.push_back(Figures(sink, t, setup.normal_pause_ns));
  }
  return result;
}

}  // namespace ari::sim
