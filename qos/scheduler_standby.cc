// Memory yield on command: STANDBY holds new work, lets (or parks) the turns in flight,
// then hands the engine's memory back; RESUME re-warms it. See scheduler.h ("Memory yield
// on command") and docs/scheduler.md ("Standby").
#include <array>
#include <string>

#include "qos/scheduler.h"
#include "qos/scheduler_live.h"

namespace ari::qos {

std::string_view StandbyStateName(StandbyState s) {
  switch (s) {
    case StandbyState::kActive: return "active";
    case StandbyState::kEntering: return "entering";
    case StandbyState::kStandby: return "standby";
    case StandbyState::kResuming: return "resuming";
  }
  return "?";
}

std::string_view StandbyAnswerName(StandbyAnswer a) {
  switch (a) {
    case StandbyAnswer::kAccepted: return "accepted";
    case StandbyAnswer::kAlready: return "already";
    case StandbyAnswer::kInProgress: return "in progress";
    case StandbyAnswer::kShutdown: return "shutdown";
  }
  return "?";
}

std::string_view StandbyEventName(StandbyEventKind k) {
  switch (k) {
    case StandbyEventKind::kEntering: return "entering";
    case StandbyEventKind::kReleased: return "released";
    case StandbyEventKind::kReleaseFailed: return "release-failed";
    case StandbyEventKind::kResumed: return "resumed";
    case StandbyEventKind::kAutoResumed: return "auto-resumed";
    case StandbyEventKind::kRewarmFailed: return "rewarm-failed";
  }
  return "?";
}

StandbyAnswer Scheduler::RequestStandby() {
  {
    std::lock_guard lk(mu_);
    if (shutdown_) return StandbyAnswer::kShutdown;
    if (standby_wanted_) return StandbyAnswer::kAlready;
    standby_wanted_ = true;
    release_failed_ = false;
    standby_noted_ = false;
    wake_ = true;
  }
  cv_.notify_all();
  return StandbyAnswer::kAccepted;
}

StandbyAnswer Scheduler::RequestResume() {
  {
    std::lock_guard lk(mu_);
    if (shutdown_) return StandbyAnswer::kShutdown;
    if (resuming_) return StandbyAnswer::kInProgress;
    if (!standby_wanted_) return StandbyAnswer::kAlready;
    standby_wanted_ = false;
    wake_ = true;
  }
  cv_.notify_all();
  return StandbyAnswer::kAccepted;
}

StandbyState Scheduler::standby_state() const {
  std::lock_guard lk(mu_);
  if (resuming_) return StandbyState::kResuming;
  if (mem_released_ || (standby_wanted_ && release_failed_)) return StandbyState::kStandby;
  return standby_wanted_ ? StandbyState::kEntering : StandbyState::kActive;
}

bool Scheduler::HeldByStandby(const Live& r) const {
  if (!standby_wanted_) return false;
  if (r.started && !r.parked) return false;  // in flight: finishes (or is parked)
  return !(r.req.urgency == Urgency::kCritical && opt_.standby.critical == StandbyCritical::kServe);
}

void Scheduler::RefuseInStandby() {
  if (!standby_wanted_ || opt_.standby.critical != StandbyCritical::kRefuse) return;
  for (size_t i = 0; i < live_.size();) {
    const Live& r = *live_[i];
    if (r.req.urgency == Urgency::kCritical && !r.started) {
      Finish(r.req.id, TerminalStatus::kRejected,
             "node in standby (policy: CRITICAL refused while the node yields its memory)");
      continue;  // live_[i] now holds another request
    }
    ++i;
  }
}

void Scheduler::StandbyBoundary(std::unique_lock<std::mutex>& lk) {
  if (!standby_wanted_) {
    if (mem_released_) RewarmEngine(lk, 0);  // RESUME
    return;
  }
  int32_t parked = 0;
  if (!standby_noted_ && opt_.standby.in_flight == StandbyInFlight::kPark) {
    // Non-CRITICAL turns in flight on the main engine go to park areas (the rest finish).
    std::array<uint64_t, 64> victims{};
    size_t n = 0;
    for (const auto& lp : live_) {
      const Live& r = *lp;
      if (r.started && !r.parked && !r.on_fallback && r.req.urgency != Urgency::kCritical &&
          n < victims.size()) {
        victims[n++] = r.req.id;
      }
    }
    for (size_t i = 0; i < n; ++i) parked += ParkTurn(lk, victims[i], 0) ? 1 : 0;
  }
  // A CRITICAL request waiting while the memory is released: re-warm for it. The release
  // waits until nothing may run (no turn in flight on either engine, no CRITICAL waiting).
  const Live* critical = nullptr;
  bool in_flight = false;
  for (const auto& lp : live_) {
    const Live& r = *lp;
    if (r.started && !r.parked) in_flight = true;
    if (!critical && !HeldByStandby(r) && (!r.started || r.parked)) critical = &r;
  }
  if (mem_released_) {
    if (critical) RewarmEngine(lk, critical->req.id);
    return;
  }
  if (!standby_noted_) {
    standby_noted_ = true;
    StandbyEvent ev;
    ev.kind = StandbyEventKind::kEntering;
    ev.parked = parked;
    lk.unlock();
    sink_.OnStandby(ev);
    lk.lock();
  }
  if (!in_flight && !critical && !release_failed_) ReleaseForStandby(lk, parked);
}

void Scheduler::ReleaseForStandby(std::unique_lock<std::mutex>& lk, int32_t parked) {
  // No turn runs on the main engine and none may start: this thread owns its slots.
  lk.unlock();
  SpillIdleSessions();
  OffloadParkedTurns(false);  // parked turns' KV to disk too, when there is a spill folder
  const int64_t t0 = clock_.NowNs();
  runtime::Result<runtime::MemoryYield> y = engine_.ReleaseMemory(opt_.standby.drop_page_cache);
  StandbyEvent ev;
  ev.duration_ns = clock_.NowNs() - t0;
  ev.parked = parked;
  const bool released = engine_.memory_released();
  if (y) {
    ev.kind = StandbyEventKind::kReleased;
    ev.yield = *y;
  } else {
    ev.kind = StandbyEventKind::kReleaseFailed;
    ev.message = y.error().message;
  }
  sink_.OnStandby(ev);
  lk.lock();
  for (Slot& s : slots_) s.session = 0;  // every conversation left the slots
  mem_released_ = released;
  release_failed_ = !y;
}

void Scheduler::RewarmEngine(std::unique_lock<std::mutex>& lk, uint64_t for_id) {
  resuming_ = true;
  lk.unlock();
  const int64_t t0 = clock_.NowNs();
  runtime::Result<uint64_t> w = engine_.Rewarm();
  StandbyEvent ev;
  ev.duration_ns = clock_.NowNs() - t0;
  ev.id = for_id;
  ev.kind = for_id != 0 ? StandbyEventKind::kAutoResumed : StandbyEventKind::kResumed;
  if (w) ev.warmed_bytes = *w;
  sink_.OnStandby(ev);
  if (!w) {
    ev.kind = StandbyEventKind::kRewarmFailed;
    ev.message = w.error().message;
    sink_.OnStandby(ev);
  }
  lk.lock();
  mem_released_ = engine_.memory_released();
  resuming_ = false;
  // After a CRITICAL request the node yields again (kEntering is not reported twice).
}

}  // namespace ari::qos
