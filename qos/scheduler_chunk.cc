// One chunk of the scheduler loop (Step, scheduler.cc): claim the slot, run the chunk on
// the engine (spilling and restoring conversations as planned), report what ran and
// account for it. See scheduler.h and docs/scheduler.md.
#include <algorithm>
#include <string>
#include <utility>

#include "qos/scheduler.h"
#include "qos/scheduler_live.h"

namespace ari::qos {

namespace {
std::string_view StopText(runtime::StopReason r) { return runtime::StopReasonName(r); }
}  // namespace

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

}  // namespace ari::qos
