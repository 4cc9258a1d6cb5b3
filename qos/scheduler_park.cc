// Slot parking: a higher-class request takes the slot of the lowest-class turn in progress
// when every slot is busy; the turn moves to a park area and resumes later. See scheduler.h
// ("Slot parking") and docs/scheduler.md.
#include <array>
#include <string>

#include "qos/scheduler.h"
#include "qos/scheduler_live.h"

namespace ari::qos {

std::string_view ParkEventName(ParkEventKind k) {
  switch (k) {
    case ParkEventKind::kParked: return "parked";
    case ParkEventKind::kResumed: return "resumed";
    case ParkEventKind::kRefused: return "refused";
    case ParkEventKind::kSpilled: return "spilled";
    case ParkEventKind::kSpillFailed: return "spill-failed";
    case ParkEventKind::kRestored: return "restored";
    case ParkEventKind::kSpillRejected: return "spill-rejected";
    case ParkEventKind::kOffloaded: return "offloaded";
    case ParkEventKind::kOffloadFailed: return "offload-failed";
  }
  return "?";
}

int32_t Scheduler::ParkedOn(bool fallback) const {
  int32_t n = 0;
  for (const auto& l : live_) n += l->parked && l->on_fallback == fallback ? 1 : 0;
  return n;
}

Scheduler::ParkPlan Scheduler::FindPark(int64_t now) const {
  ParkPlan none;
  if (park_blocked_) return none;
  // The most urgent waiting request (queued or parked, not paced) by CLASS, then by rank:
  // requests aged up the ranks go first to free slots, never to parked ones.
  const Live* w = nullptr;
  OrderKey wk{};
  for (const auto& lp : live_) {
    const Live& r = *lp;
    if ((r.started && !r.parked) || not_before_[Rank(r.req.urgency)] > now) continue;
    if (HeldByStandby(r)) continue;
    const OrderKey k = Key(r, now);
    if (!w || Rank(r.req.urgency) < Rank(w->req.urgency) ||
        (r.req.urgency == w->req.urgency && k < wk)) {
      w = &r;
      wk = k;
    }
  }
  if (!w) return none;
  bool keep = false;
  if (FindSlotFor(*w, &keep) >= 0) return none;  // it gets a slot without parking
  const bool fb = w->parked ? w->on_fallback : fallback_route_;
  const runtime::ChunkRunner* engine = fb ? fallback_engine_ : &engine_;
  if (!engine || ParkedOn(fb) >= engine->num_park_areas()) return none;
  // Not every usable slot is busy (the reserved ones count as busy for a non-CRITICAL
  // newcomer): it waits for its session, not for a slot.
  size_t free_slots = 0;
  for (const Slot& s : SlotsOf(fb)) free_slots += s.running == 0 ? 1 : 0;
  if (free_slots > ReservedFor(*w, SlotsOf(fb))) return none;
  for (const Slot& s : SlotsOf(fb)) {
    if (!w->parked && w->req.session_id != 0 && s.session == w->req.session_id) {
      return none;  // its own session's previous turn runs: it waits for it
    }
  }
  // The victim: the lowest class in progress on that engine, most recently started.
  const Live* v = nullptr;
  for (const auto& lp : live_) {
    const Live& r = *lp;
    if (!r.started || r.parked || r.on_fallback != fb) continue;
    if (!v || Rank(r.req.urgency) > Rank(v->req.urgency) ||
        (r.req.urgency == v->req.urgency && r.first_chunk_ns > v->first_chunk_ns)) {
      v = &r;
    }
  }
  if (!v || Rank(w->req.urgency) >= Rank(v->req.urgency)) return none;  // strictly higher
  return ParkPlan{w, v};
}

uint64_t Scheduler::ParkForNewcomer(std::unique_lock<std::mutex>& lk, int64_t now,
                                    uint64_t* victim) {
  *victim = 0;
  const ParkPlan pp = FindPark(now);
  if (!pp.newcomer) return 0;
  const uint64_t w_id = pp.newcomer->req.id;
  const uint64_t v_id = pp.victim->req.id;
  if (!ParkTurn(lk, v_id, w_id)) return 0;
  *victim = v_id;
  return w_id;
}

bool Scheduler::ParkTurn(std::unique_lock<std::mutex>& lk, uint64_t v_id, uint64_t for_id) {
  Live* v = Find(v_id);
  if (!v || !v->started || v->parked) return false;
  const int32_t slot = v->slot;
  const bool fb = v->on_fallback;
  runtime::ChunkRunner* engine = EngineOf(fb);
  // Started requests end only on this thread: the victim stays live while unlocked.
  lk.unlock();
  const int64_t t0 = clock_.NowNs();
  runtime::Result<runtime::ParkId> pid = engine->ParkSlot(slot);
  const int64_t t1 = clock_.NowNs();
  ParkEvent ev;
  ev.kind = pid ? ParkEventKind::kParked : ParkEventKind::kRefused;
  ev.id = v_id;
  ev.for_id = for_id;
  ev.slot = slot;
  ev.duration_ns = t1 - t0;
  ev.on_fallback = fb;
  if (!pid) ev.message = pid.error().message;
  sink_.OnPark(ev);
  lk.lock();
  v = Find(v_id);
  if (!pid || !v) {
    park_blocked_ = true;  // retried once a turn ends or a park area frees
    return false;
  }
  v->parked = true;
  v->park_id = *pid;
  v->slot = -1;
  v->waiting_since_ns = t1;
  Slot& s = SlotsOf(fb)[static_cast<size_t>(slot)];
  s.running = 0;
  s.session = 0;  // the conversation moved to the park area with the turn
  s.last_used_ns = t1;
  s.last_urgency = v->req.urgency;
  return true;
}

void Scheduler::OffloadParkedTurns(bool release_free) {
  // The step thread: parked turns change only here and in Step, so the ids stay valid.
  std::array<std::pair<uint64_t, runtime::ParkId>, 64> todo{};
  size_t n = 0;
  {
    std::lock_guard lk(mu_);
    for (const auto& lp : live_) {
      const Live& r = *lp;
      if (r.parked && !r.offloaded && !r.on_fallback && n < todo.size()) {
        todo[n++] = {r.req.id, r.park_id};
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const int64_t t0 = clock_.NowNs();
    runtime::Result<uint64_t> w = engine_.OffloadParked(todo[i].second);
    ParkEvent ev;
    ev.kind = w ? ParkEventKind::kOffloaded : ParkEventKind::kOffloadFailed;
    ev.id = todo[i].first;
    ev.duration_ns = clock_.NowNs() - t0;
    if (!w) ev.message = w.error().message;
    sink_.OnPark(ev);
    std::lock_guard lk(mu_);
    if (Live* r = Find(todo[i].first)) r->offloaded = true;  // a failure is not retried
  }
  if (release_free) released_slot_bytes_ += engine_.ReleaseFreeParkAreas();
}

Scheduler::Live* Scheduler::PickAfterPark(int64_t now, uint64_t newcomer, int* slot,
                                          bool* keep_context) {
  if (newcomer != 0) {
    // A CRITICAL Submit may have evicted a queued newcomer meanwhile: then the normal pick.
    if (Live* w = Find(newcomer); w && (!w->started || w->parked)) {
      const int s = FindSlotFor(*w, keep_context);
      if (s >= 0) {
        *slot = s;
        return w;
      }
    }
  }
  return Pick(now, slot, keep_context);
}

}  // namespace ari::qos
