// The scheduler loop; see scheduler.h and docs/scheduler.md.
#include "qos/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <utility>

#include "qos/scheduler_live.h"
#include "runtime/core/utf8.h"

namespace ari::qos {

namespace {
constexpr int64_t kNever = kSchedNever;

std::string_view StopText(runtime::StopReason r) { return runtime::StopReasonName(r); }
}  // namespace

Result<std::unique_ptr<Scheduler>> Scheduler::Create(SchedulerOptions options) {
  if (!options.policy || !options.engine || !options.clock || !options.sink) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "scheduler: policy, engine, clock and sink are required");
  }
  if (options.policy->thermal_bands.empty() ||
      options.policy->knobs.size() != options.policy->thermal_bands.size()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "scheduler: policy needs knobs for every thermal band");
  }
  if (options.engine->num_slots() < 1) {
    return MakeError(ErrorCode::kInvalidArgument, "scheduler: engine has no session slots");
  }
  thermal::CpuTopology topo;
  if (options.topology) {
    topo = *options.topology;
  } else {
    auto detected = thermal::DetectTopology();
    if (!detected) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "scheduler: CPU topology: " + detected.error().message);
    }
    topo = std::move(*detected);
  }
  if (topo.performance.empty() && topo.efficiency.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "scheduler: topology has no CPUs");
  }
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(options), std::move(topo)));
}

Scheduler::Scheduler(SchedulerOptions options, thermal::CpuTopology topology)
    : opt_(std::move(options)),
      topology_(std::move(topology)),
      policy_(*opt_.policy),
      engine_(*opt_.engine),
      clock_(*opt_.clock),
      sink_(*opt_.sink),
      queue_(QueueConfig::FromPolicy(*opt_.policy)),
      slots_(static_cast<size_t>(opt_.engine->num_slots())) {
  const size_t cap = queue_.storage() + slots_.size() + 8;
  live_.reserve(cap);
  cancels_.reserve(cap);
  pending_.reserve(cap);
  deliver_.reserve(cap);
  inputs_.reading.source.reserve(64);
}

Scheduler::~Scheduler() { Shutdown("scheduler destroyed"); }

Scheduler::Live* Scheduler::Find(uint64_t id) const {
  for (const auto& l : live_) {
    if (l->req.id == id) return l.get();
  }
  return nullptr;
}

SubmitStatus Scheduler::Submit(SchedRequest request) {
  if (request.id == 0 || request.prompt.empty() || request.max_tokens < 1 ||
      Rank(request.urgency) < 0 || Rank(request.urgency) >= kNumUrgencies) {
    return SubmitStatus::kInvalid;
  }
  {
    std::lock_guard lk(mu_);
    if (shutdown_) return SubmitStatus::kShutdown;
    if (Find(request.id)) return SubmitStatus::kDuplicate;
    const int64_t now = clock_.NowNs();
    auto live = std::make_unique<Live>();
    live->seq = next_seq_++;
    live->admitted_ns = now;
    live->waiting_since_ns = now;
    if (request.deadline_ns > 0) {
      live->deadline_ns = request.deadline_ns;
    } else {
      const uint32_t ms = policy_.Class(request.urgency).default_deadline_ms;
      live->deadline_ns = ms > 0 ? now + int64_t{ms} * thermal::kNsPerMs : kNever;
    }
    QueueEntry e{request.id, request.urgency, live->deadline_ns, now, 0};
    PushResult pr = queue_.Push(e);
    if (!pr.accepted()) {
      return pr.status == PushStatus::kDuplicate ? SubmitStatus::kDuplicate : SubmitStatus::kBusy;
    }
    live->req = std::move(request);
    live_.push_back(std::move(live));
    if (pr.evicted) {
      char msg[96];
      std::snprintf(msg, sizeof(msg), "evicted from the queue by CRITICAL request %llu",
                    static_cast<unsigned long long>(e.id));
      Finish(pr.evicted->id, TerminalStatus::kRejected, msg);
    }
    wake_ = true;
  }
  cv_.notify_all();
  return SubmitStatus::kAdmitted;
}

bool Scheduler::Cancel(uint64_t id) {
  {
    std::lock_guard lk(mu_);
    if (!Find(id)) return false;
    if (std::find(cancels_.begin(), cancels_.end(), id) == cancels_.end()) {
      cancels_.push_back(id);
    }
    wake_ = true;
  }
  cv_.notify_all();
  return true;
}

void Scheduler::Finish(uint64_t id, TerminalStatus status, std::string_view message) {
  auto it =
      std::find_if(live_.begin(), live_.end(), [id](const auto& l) { return l->req.id == id; });
  if (it == live_.end()) return;
  Live& r = **it;
  if (r.started) park_blocked_ = false;  // a slot or a park area frees: parking may work
  if (r.parked) {
    // The parked turn is abandoned, and with it the session's conversation.
    if (runtime::ChunkRunner* e = EngineOf(r.on_fallback)) e->DropParked(r.park_id);
  } else if (r.started) {
    Slot& s = SlotsOf(r.on_fallback)[static_cast<size_t>(r.slot)];
    s.running = 0;
    s.last_used_ns = clock_.NowNs();
    s.last_urgency = r.req.urgency;
    // Only a completed turn leaves a conversation worth continuing.
    if (status != TerminalStatus::kDone || r.req.session_id == 0) s.session = 0;
  } else {
    queue_.Cancel(id);  // no-op when the queue already removed it (eviction, expiry)
  }
  Pending p;
  p.message_len = runtime::Utf8Prefix(message, p.message.size());  // whole characters
  std::copy_n(message.data(), p.message_len, p.message.data());
  p.event.id = id;
  p.event.status = status;
  p.event.tokens_generated = r.generated;
  p.event.deadline_missed = r.deadline_missed;
  p.event.queue_wait_ns = r.first_chunk_ns < 0 ? -1 : r.first_chunk_ns - r.admitted_ns;
  p.event.first_token_ns = r.first_token_ns < 0 ? -1 : r.first_token_ns - r.admitted_ns;
  pending_.push_back(p);
  *it = std::move(live_.back());
  live_.pop_back();
}

void Scheduler::Deliver() {
  {
    std::lock_guard lk(mu_);
    deliver_.swap(pending_);
  }
  for (Pending& p : deliver_) {
    p.event.message = std::string_view(p.message.data(), p.message_len);
    sink_.OnTerminal(p.event);
  }
  deliver_.clear();
}

// What the step thread took from the picked request under the lock, to run its chunk
// without the lock.
struct Scheduler::ChunkPlan {
  int32_t slot = -1;
  bool start = false;   // the request starts its turn with this chunk
  bool resume = false;  // the request's parked turn is resumed into `slot` first
  runtime::ParkId park_id = -1;
  uint64_t parked_id = 0;  // the turn parked at this boundary to free `slot`
  int32_t max_tokens = 0;  // of the turn (capped by the memory ladder)
  Knobs knobs;             // the decision's, degraded to W4A8 for a degraded request
  runtime::ChunkKnobs engine_knobs;
  runtime::ChunkRunner* engine = nullptr;
  bool on_fallback = false;
  uint64_t evicted_session = 0;  // the idle conversation `slot` held (spilled first)
};

StepResult Scheduler::Step() {
  std::unique_lock lk(mu_);
  stepping_ = true;
  int64_t now = clock_.NowNs();
  ApplyCancelsAndDeadlines(now);
  RefuseInStandby();
  lk.unlock();
  Deliver();

  GovernorInputs& in = FreshInputs();
  ReadInputs(now, in);

  lk.lock();
  StandbyBoundary(lk);
  now = clock_.NowNs();
  uint64_t parked_id = 0;
  const uint64_t newcomer = ParkForNewcomer(lk, now, &parked_id);
  now = clock_.NowNs();  // after the park: the newcomer's chunk starts now
  int slot = -1;
  bool keep_context = false;
  Live* r = PickAfterPark(now, newcomer, &slot, &keep_context);
  in.queue_depths = queue_.Depths();
  if (r) in.active = r->req.urgency;
  in.now_ns = now;
  GovernorOutput out = Decide(policy_, gov_state_, in);
  gov_state_ = out.state;
  const Decision& d = out.decision;
  const bool changed = NoteDecision(d);

  const bool spill_idle = d.memory.spill_idle_sessions;
  const bool park_to_disk = d.memory.park_to_disk;
  const bool release_free_parks = park_to_disk && !park_to_disk_on_;
  park_to_disk_on_ = park_to_disk;
  if (!r) {
    StepResult res;
    res.next_step_ns = MemoryPoll(now, NextStep(now));
    res.idle = live_.empty();
    lk.unlock();
    if (changed) sink_.OnDecision(d, now);
    if (spill_idle) SpillIdleSessions();
    if (park_to_disk) OffloadParkedTurns(release_free_parks);
    EndStep();
    return res;
  }
  ChunkPlan plan = ClaimChunk(*r, slot, d);
  plan.parked_id = parked_id;
  lk.unlock();
  if (changed) sink_.OnDecision(d, now);

  // The engine runs without the lock: Submit/Cancel stay responsive.
  runtime::Result<runtime::ChunkResult> cr = RunPlannedChunk(*r, plan, keep_context);
  const int64_t end = clock_.NowNs();
  const StepInfo info = ReportChunk(*r, plan, now, cr);

  lk.lock();
  AccountChunk(*r, cr, now, end);  // may end the request: r is not used after this
  Pace(plan.knobs, info.urgency, end);
  StepResult res;
  res.ran = true;
  res.info = info;
  res.next_step_ns = MemoryPoll(end, NextStep(end));
  res.idle = live_.empty();
  lk.unlock();
  Deliver();
  if (spill_idle) SpillIdleSessions();
  if (park_to_disk) OffloadParkedTurns(release_free_parks);
  EndStep();
  return res;
}

void Scheduler::SpillIdleSessions() {
  // Memory ladder action spill_idle_sessions: every idle conversation kept in a slot of the
  // main engine goes to the spill folder (or is dropped without one) and the slot's KV
  // pages are handed back. The scheduler thread runs every step: no slot is claimed
  // between the collection and the engine calls.
  std::array<std::pair<int32_t, uint64_t>, 64> todo{};
  size_t n = 0;
  {
    std::lock_guard lk(mu_);
    for (size_t i = 0; i < slots_.size() && n < todo.size(); ++i) {
      Slot& s = slots_[i];
      if (s.running != 0 || s.session == 0) continue;
      todo[n++] = {static_cast<int32_t>(i), s.session};
      s.session = 0;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const auto [slot, session] = todo[i];
    ParkEvent ev;
    ev.slot = slot;
    ev.session = session;
    const int64_t t0 = clock_.NowNs();
    runtime::Result<uint64_t> w = engine_.SpillSlot(slot, session);
    ev.kind = w ? ParkEventKind::kSpilled : ParkEventKind::kSpillFailed;
    if (!w) ev.message = w.error().message;
    released_slot_bytes_ += engine_.ReleaseSlotPages(slot);
    ev.duration_ns = clock_.NowNs() - t0;
    sink_.OnPark(ev);
  }
}

GovernorInputs& Scheduler::FreshInputs() {
  thermal::Reading reading = std::move(inputs_.reading);  // moves: no allocation
  inputs_ = GovernorInputs{};
  inputs_.reading = std::move(reading);
  return inputs_;
}

void Scheduler::ReadInputs(int64_t now, GovernorInputs& in) {
  // Inputs: temperature and memory (outside the lock: sources may do I/O). The reading is
  // filled in place: its source string keeps its capacity from step to step.
  if (opt_.temperature) {
    opt_.temperature->ReadInto(in.reading);
  } else {
    in.reading.state = thermal::SensorState::kNoSensor;
    in.reading.time_ns = now;
  }
  if (opt_.memory) {
    if (auto m = opt_.memory()) {
      in.mem_available_bytes = m->available_bytes;
      if (m->has_psi) in.psi_some_avg10 = m->psi_some_avg10;
    }
  }
  if (opt_.fallback) {
    // The memory part of the decision does not depend on the class: preview it to
    // route the requests that start in this step (mapping the fallback may do I/O).
    in.now_ns = clock_.NowNs();
    UpdateFallback(Decide(policy_, gov_state_, in).decision);
  }
}

bool Scheduler::NoteDecision(const Decision& d) {
  const bool changed = !decision_emitted_ || d.knobs != last_decision_.knobs ||
                       d.urgency != last_decision_.urgency || d.idle != last_decision_.idle ||
                       d.thermal_band != last_decision_.thermal_band ||
                       d.memory_band != last_decision_.memory_band ||
                       d.conservative != last_decision_.conservative;
  last_decision_ = d;
  decision_emitted_ = true;
  return changed;
}

Scheduler::ChunkPlan Scheduler::ClaimChunk(Live& r, int slot, const Decision& d) {
  // Claim the slot under the lock; the request is no longer queued.
  ChunkPlan plan;
  plan.slot = slot;
  plan.start = !r.started;
  plan.max_tokens = r.req.max_tokens;
  if (r.parked) {  // resumes into this slot: the session's conversation now lives here
    plan.resume = true;
    plan.park_id = r.park_id;
    r.parked = false;
    r.offloaded = false;
    r.park_id = -1;
    r.slot = slot;
    Slot& s = SlotsOf(r.on_fallback)[static_cast<size_t>(slot)];
    s.running = r.req.id;
    s.session = r.req.session_id;
  }
  if (plan.start) {
    queue_.Cancel(r.req.id);
    r.started = true;
    r.slot = slot;
    r.on_fallback = fallback_route_;
    Slot& s = SlotsOf(r.on_fallback)[static_cast<size_t>(slot)];
    if (s.session != 0 && s.session != r.req.session_id) plan.evicted_session = s.session;
    s.running = r.req.id;
    s.session = r.req.session_id;
    if (s.session != 0) {  // the conversation now lives on this engine only
      for (Slot& o : SlotsOf(!r.on_fallback)) {
        if (o.session == s.session) o.session = 0;
      }
    }
    if (d.memory.output_cap > 0) {
      plan.max_tokens =
          std::min<int32_t>(plan.max_tokens, static_cast<int32_t>(d.memory.output_cap));
    }
  }
  plan.knobs = d.knobs;
  if (r.degraded) plan.knobs.precision = WeightPrecision::kW4A8;
  plan.engine_knobs =
      MapKnobs(plan.knobs, d.memory, topology_, opt_.base_kv, opt_.max_prefill_chunk);
  plan.engine = r.on_fallback ? fallback_engine_ : &engine_;
  plan.on_fallback = r.on_fallback;
  // A model that cannot drop layers (no layer importance) is decided drop 0: the decision
  // is what runs (docs/scheduler.md, "Knob mapping").
  plan.engine_knobs.layer_drop =
      std::min(plan.engine_knobs.layer_drop, plan.engine->MaxLayerDrop());
  plan.knobs.layer_drop = static_cast<uint32_t>(plan.engine_knobs.layer_drop);
  return plan;
}

runtime::Result<runtime::ChunkResult> Scheduler::RunPlannedChunk(const Live& r,
                                                                 const ChunkPlan& plan,
                                                                 bool keep_context) {
  runtime::ChunkRunner& engine = *plan.engine;
  runtime::Result<void> started{};
  if (plan.resume) {
    const int64_t t0 = clock_.NowNs();
    started = engine.ResumeParked(plan.park_id, plan.slot);
    ParkEvent ev;
    ev.kind = ParkEventKind::kResumed;
    ev.id = r.req.id;
    ev.slot = plan.slot;
    ev.duration_ns = clock_.NowNs() - t0;
    ev.on_fallback = plan.on_fallback;
    if (!started) ev.message = started.error().message;
    sink_.OnPark(ev);
  } else if (plan.start) {
    const bool keep = keep_context || SpillAndRestore(r, plan);
    runtime::TurnSpec turn;
    turn.prompt = r.req.prompt;
    turn.sampling = r.req.sampling;
    turn.max_tokens = plan.max_tokens;
    turn.keep_context = keep;
    turn.masked = r.req.masked || r.req.sampling.constraint != nullptr;
    started = engine.StartTurn(plan.slot, turn);
  }
  return started ? engine.RunChunk(plan.slot, plan.engine_knobs)
                 : runtime::Result<runtime::ChunkResult>(std::unexpected(started.error()));
}

bool Scheduler::SpillAndRestore(const Live& r, const ChunkPlan& plan) {
  // Parked sessions on disk: the idle conversation this turn evicts goes to the spill folder;
  // the turn's own session comes back from it (docs/memory.md "Parked sessions on disk").
  runtime::ChunkRunner& engine = *plan.engine;
  ParkEvent ev;
  ev.id = r.req.id;
  ev.slot = plan.slot;
  ev.on_fallback = plan.on_fallback;
  if (plan.evicted_session != 0) {
    const int64_t t0 = clock_.NowNs();
    runtime::Result<uint64_t> n = engine.SpillSlot(plan.slot, plan.evicted_session);
    if (n || n.error().code != runtime::ErrorCode::kUnsupported) {
      ev.kind = n ? ParkEventKind::kSpilled : ParkEventKind::kSpillFailed;
      ev.session = plan.evicted_session;
      ev.duration_ns = clock_.NowNs() - t0;
      if (!n) ev.message = n.error().message;
      sink_.OnPark(ev);
    }
  }
  if (r.req.session_id == 0) return false;
  const int64_t t0 = clock_.NowNs();
  runtime::Result<bool> ok = engine.RestoreSession(plan.slot, r.req.session_id, &spill_reason_);
  ev.session = r.req.session_id;
  ev.duration_ns = clock_.NowNs() - t0;
  if (ok && *ok) {
    ev.kind = ParkEventKind::kRestored;
    sink_.OnPark(ev);
    return true;
  }
  if (!ok || !spill_reason_.empty()) {
    ev.kind = ParkEventKind::kSpillRejected;
    ev.message = ok ? std::string_view(spill_reason_) : std::string_view(ok.error().message);
    sink_.OnPark(ev);
  }
  return false;
}

ChunkRan RanOf(const runtime::ChunkResult& r) {
  ChunkRan ran;
  ran.precision = r.precision;
  ran.isa = r.isa;
  ran.threads = r.threads;
  ran.threads_observed = r.threads_ran;
  ran.cpus = r.cpus_ran;
  ran.tile_gemms = r.tile_gemms;
  ran.gemv_tiers = r.gemv_tiers;
  ran.gemm_tiers = r.gemm_tiers;
  ran.layers_dropped = r.layers_dropped;
  ran.kv_type = r.kv_type;
  ran.masked_tokens = r.masked_tokens;
  ran.mask_ns = r.mask_ns;
  ran.prefix_tokens = r.prefix_tokens;
  ran.pin_failures = r.pin_failures;
  ran.isa_refused = r.isa_refused;
  return ran;
}

StepInfo Scheduler::ReportChunk(Live& r, const ChunkPlan& plan, int64_t start_ns,
                                const runtime::Result<runtime::ChunkResult>& cr) {
  StepInfo info;
  info.id = r.req.id;
  info.urgency = r.req.urgency;
  info.slot = plan.slot;
  info.start_ns = start_ns;
  info.knobs = plan.engine_knobs;
  info.fallback = plan.on_fallback;
  info.parked_id = plan.parked_id;
  info.resumed = plan.resume;
  if (cr) {
    info.phase = cr->phase;
    info.prompt_tokens = cr->prompt_tokens;
    info.prompt_remaining = cr->prompt_remaining;
    info.new_tokens = static_cast<int32_t>(cr->tokens.size());
    info.compute_ns = cr->compute_ns;
    info.finished = cr->finished;
    info.ran = RanOf(*cr);
    if (!cr->tokens.empty()) {
      ChunkEvent ev;
      ev.id = r.req.id;
      ev.seq = r.chunk_seq++;
      ev.text = cr->text;
      ev.tokens = cr->tokens;
      ev.compute_ns = cr->compute_ns;
      ev.precision = cr->precision;
      ev.decided = plan.engine_knobs;
      ev.ran = info.ran;
      ev.on_fallback = plan.on_fallback;
      sink_.OnChunk(ev);
    }
  }
  sink_.OnStep(info);
  return info;
}

void Scheduler::AccountChunk(Live& r, const runtime::Result<runtime::ChunkResult>& cr,
                             int64_t start_ns, int64_t end_ns) {
  if (r.first_chunk_ns < 0) r.first_chunk_ns = start_ns;
  r.waiting_since_ns = end_ns;
  if (!cr) {
    Finish(r.req.id, TerminalStatus::kFailed, cr.error().message);
    return;
  }
  if (!cr->tokens.empty() && r.first_token_ns < 0) r.first_token_ns = end_ns;
  r.generated += static_cast<int32_t>(cr->tokens.size());
  const bool capped = last_decision_.memory.output_cap > 0 &&
                      r.generated >= static_cast<int32_t>(last_decision_.memory.output_cap);
  if (cr->finished) {
    Finish(r.req.id, TerminalStatus::kDone,
           r.deadline_missed ? "finished degraded after its deadline" : StopText(cr->stop_reason));
  } else if (capped) {
    Finish(r.req.id, TerminalStatus::kDone, "output capped (memory)");
  }
}

void Scheduler::Pace(const Knobs& knobs, Urgency urgency, int64_t end_ns) {
  // Pacing: this class and less urgent ones wait; more urgent ones may run.
  if (knobs.pause_ms > 0) {
    const int64_t until = end_ns + int64_t{knobs.pause_ms} * thermal::kNsPerMs;
    for (int k = Rank(urgency); k < kNumUrgencies; ++k) {
      not_before_[k] = std::max(not_before_[k], until);
    }
  }
}

void Scheduler::EndStep() {
  {
    std::lock_guard lk(mu_);
    stepping_ = false;
  }
  cv_.notify_all();
}

void Scheduler::Run(const std::stop_token& stop) {
  std::unique_lock lk(mu_);
  while (!stop.stop_requested() && !shutdown_) {
    wake_ = false;
    lk.unlock();
    const StepResult r = Step();
    lk.lock();
    if (wake_ || stop.stop_requested()) continue;
    const int64_t now = clock_.NowNs();
    if (r.next_step_ns <= now) continue;
    if (r.next_step_ns == kNever) {
      cv_.wait(lk, stop, [this] { return wake_ || shutdown_; });
    } else {
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::nanoseconds(r.next_step_ns - now);
      cv_.wait_until(lk, stop, until, [this] { return wake_ || shutdown_; });
    }
  }
}

void Scheduler::Shutdown(std::string_view message) {
  {
    std::unique_lock lk(mu_);
    shutdown_ = true;
    cv_.wait(lk, [this] { return !stepping_; });
    while (!live_.empty()) Finish(live_.back()->req.id, TerminalStatus::kShutdown, message);
    cancels_.clear();
  }
  cv_.notify_all();
  Deliver();
}

size_t Scheduler::live_requests() const {
  std::lock_guard lk(mu_);
  return live_.size();
}

std::array<uint32_t, kNumUrgencies> Scheduler::QueueDepths() const {
  std::lock_guard lk(mu_);
  return queue_.Depths();
}

}  // namespace ari::qos
