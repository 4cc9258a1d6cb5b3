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
