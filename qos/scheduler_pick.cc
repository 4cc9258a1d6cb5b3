// The scheduler's choice of what runs next: cancels and deadlines, the priority order
// (aging like RequestQueue), slots (session reuse, eviction of idle slots) and so
// preemption at chunk boundaries; see scheduler.h and docs/scheduler.md.
#include <algorithm>

#include "qos/scheduler.h"
#include "qos/scheduler_live.h"

namespace ari::qos {

namespace {
constexpr int64_t kNever = kSchedNever;
}  // namespace

void Scheduler::ApplyCancelsAndDeadlines(int64_t now) {
  for (uint64_t id : cancels_) Finish(id, TerminalStatus::kCancelled, "cancelled");
  cancels_.clear();
  while (auto e = queue_.PopExpired(now)) {
    Live* r = Find(e->id);
    if (!r) continue;
    if (policy_.Class(r->req.urgency).deadline_miss == DeadlineMissAction::kStop) {
      Finish(e->id, TerminalStatus::kDeadlineMissed, "deadline passed while queued");
    } else {
      r->degraded = r->deadline_missed = true;
      r->deadline_ns = kNever;
      QueueEntry again = *e;
      again.deadline_ns = kNever;
      if (!queue_.Push(again).accepted()) {
        Finish(e->id, TerminalStatus::kDeadlineMissed, "deadline passed while queued");
      }
    }
  }
  for (size_t i = 0; i < live_.size();) {
    Live& r = *live_[i];
    if (r.started && r.deadline_ns < now) {
      if (policy_.Class(r.req.urgency).deadline_miss == DeadlineMissAction::kStop) {
        Finish(r.req.id, TerminalStatus::kDeadlineMissed,
               r.parked ? "deadline passed while parked" : "deadline passed while running");
        continue;  // live_[i] now holds another request
      }
      r.degraded = r.deadline_missed = true;
      r.deadline_ns = kNever;
    }
    ++i;
  }
}

Scheduler::OrderKey Scheduler::Key(const Live& r, int64_t now) const {
  // A parked turn ages from its admission like a queued request: it resumes before newer
  // work of its rank, so the park areas drain (docs/scheduler.md, "Slot parking").
  QueueEntry e{r.req.id, r.req.urgency, r.deadline_ns,
               r.started && !r.parked ? r.waiting_since_ns : r.admitted_ns, r.seq};
  return OrderKey{queue_.EffectiveRank(e, now), -Rank(r.req.urgency), r.parked ? 0 : 1,
                  r.deadline_ns, r.seq};
}

size_t Scheduler::ReservedFor(const Live& r, const std::vector<Slot>& slots) const {
  // Slots a non-CRITICAL turn leaves free for CRITICAL; never all of them.
  if (r.req.urgency == Urgency::kCritical || slots.empty()) return 0;
  return std::min<size_t>(policy_.critical_reserved_slots, slots.size() - 1);
}

int Scheduler::FindSlotFor(const Live& r, bool* keep_context) const {
  *keep_context = false;
  // A parked turn resumes on its own engine, into any slot (never "keeping" a context).
  const std::vector<Slot>& slots = SlotsOf(r.parked ? r.on_fallback : fallback_route_);
  if (const size_t reserve = ReservedFor(r, slots); reserve > 0) {
    size_t available = 0;
    for (const Slot& s : slots) available += s.running == 0 ? 1 : 0;
    if (available <= reserve) return -1;  // the free ones are kept for CRITICAL
  }
  if (r.req.session_id != 0 && !r.parked) {
    for (const auto& l : live_) {  // the session's previous turn is parked
      if (l->parked && l->req.session_id == r.req.session_id) return -1;
    }
    for (const Slot& s : slots_) {
      if (s.session == r.req.session_id && s.running != 0) return -1;  // previous turn runs
    }
    for (const Slot& s : fb_slots_) {
      if (s.session == r.req.session_id && s.running != 0) return -1;
    }
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].session == r.req.session_id) {
        *keep_context = true;
        return static_cast<int>(i);
      }
    }
  }
  int best = -1;
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    if (s.running != 0) continue;
    if (s.session == 0) return static_cast<int>(i);  // free
    if (best < 0) {
      best = static_cast<int>(i);
      continue;
    }
    const Slot& b = slots[static_cast<size_t>(best)];
    // Evict the lowest urgency first, then the least recently used.
    if (Rank(s.last_urgency) > Rank(b.last_urgency) ||
        (s.last_urgency == b.last_urgency && s.last_used_ns < b.last_used_ns)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

Scheduler::Live* Scheduler::Pick(int64_t now, int* slot, bool* keep_context) {
  Live* best = nullptr;
  OrderKey best_key{};
  for (const auto& lp : live_) {
    Live& r = *lp;
    if (not_before_[Rank(r.req.urgency)] > now) continue;  // paced
    if (HeldByStandby(r)) continue;
    bool keep = false;
    int s = r.started && !r.parked ? r.slot : FindSlotFor(r, &keep);
    if (s < 0) continue;  // waits for a slot
    const OrderKey k = Key(r, now);
    if (!best || k < best_key) {
      best = &r;
      best_key = k;
      *slot = s;
      *keep_context = keep;
    }
  }
  return best;
}

int64_t Scheduler::NextStep(int64_t now) const {
  // A commanded standby not yet carried out is due at once: the re-warm, or the release
  // once nothing may run (until then the turns' own steps come first).
  if (!standby_wanted_ && mem_released_) return now;
  if (standby_wanted_ && !mem_released_ && !release_failed_ &&
      std::all_of(live_.begin(), live_.end(),
                  [this](const auto& l) { return HeldByStandby(*l); })) {
    return now;
  }
  if (live_.empty()) return kNever;
  int64_t next = kNever;
  bool any_ready = false;
  for (const auto& lp : live_) {
    const Live& r = *lp;
    const int64_t nb = not_before_[Rank(r.req.urgency)];
    if (nb > now) {
      next = std::min(next, nb);
    } else if (!HeldByStandby(r)) {
      bool keep = false;
      if ((r.started && !r.parked) || FindSlotFor(r, &keep) >= 0) any_ready = true;
    }
    if (r.deadline_ns != kNever) next = std::min(next, r.deadline_ns + 1);
  }
  if (any_ready || FindPark(now).newcomer) return now;
  return std::max(next, now + 1);
}

}  // namespace ari::qos
