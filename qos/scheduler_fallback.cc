// The scheduler's fallback-model routing (memory ladder, last step); see scheduler.h.
#include <algorithm>
#include <string>

#include "qos/scheduler.h"

namespace ari::qos {

std::string_view FallbackEventName(FallbackEventKind k) {
  switch (k) {
    case FallbackEventKind::kEngaged: return "engaged";
    case FallbackEventKind::kFailed: return "failed";
    case FallbackEventKind::kDisengaged: return "disengaged";
    case FallbackEventKind::kReleased: return "released";
  }
  return "?";
}

int32_t Scheduler::RunningOnFallback() const {
  int32_t n = 0;
  for (const Slot& s : fb_slots_) n += s.running != 0 ? 1 : 0;
  return n + ParkedOn(true);  // a turn parked there resumes there
}

int64_t Scheduler::MemoryPoll(int64_t now, int64_t next) const {
  if (!opt_.memory || opt_.idle_memory_poll_ms <= 0) return next;
  if (gov_state_.memory_band < 0 && fallback_engine_ == nullptr) return next;
  return std::min(next, now + opt_.idle_memory_poll_ms * thermal::kNsPerMs);
}

bool Scheduler::fallback_mapped() const {
  std::lock_guard lk(mu_);
  return fallback_engine_ != nullptr;
}

bool Scheduler::fallback_routing() const {
  std::lock_guard lk(mu_);
  return fallback_route_;
}

void Scheduler::UpdateFallback(const Decision& preview) {
  FallbackEvent ev;
  ev.reason = preview.Reason();
  if (preview.memory.use_fallback_model) {
    bool mapped = false;
    {
      std::lock_guard lk(mu_);
      if (fallback_route_ || fallback_failed_) return;  // nothing changes
      mapped = fallback_engine_ != nullptr;
    }
    if (!mapped) {  // first need: map it (outside the lock: file I/O, arena)
      runtime::Result<runtime::ChunkRunner*> e = opt_.fallback->Acquire();
      std::string error;
      if (!e) {
        error = "fallback model: " + e.error().ToString();
      } else if (*e == nullptr || (*e)->num_slots() < 1) {
        error = "fallback model has no session slots";
        opt_.fallback->Release();
      }
      if (!error.empty()) {
        {
          std::lock_guard lk(mu_);
          fallback_failed_ = true;  // retried when the pressure comes back
        }
        ev.kind = FallbackEventKind::kFailed;
        ev.reason = error;
        sink_.OnFallback(ev);
        return;
      }
      std::lock_guard lk(mu_);
      fallback_engine_ = *e;
      fb_slots_.assign(static_cast<size_t>((*e)->num_slots()), Slot{});
      ev.mapped_now = true;
    }
    {
      std::lock_guard lk(mu_);
      fallback_route_ = true;
      ev.running = RunningOnFallback();
    }
    ev.kind = FallbackEventKind::kEngaged;
    sink_.OnFallback(ev);
    return;
  }
  bool disengaged = false;
  bool release = false;
  {
    std::lock_guard lk(mu_);
    fallback_failed_ = false;
    if (fallback_route_) {
      fallback_route_ = false;
      disengaged = true;
    }
    ev.running = RunningOnFallback();
    if (fallback_engine_ != nullptr && ev.running == 0) {
      fallback_engine_ = nullptr;
      fb_slots_.clear();  // the conversations kept there are forgotten
      release = true;
    }
  }
  if (disengaged) {
    ev.kind = FallbackEventKind::kDisengaged;
    sink_.OnFallback(ev);
  }
  if (release) {
    opt_.fallback->Release();
    ev.kind = FallbackEventKind::kReleased;
    sink_.OnFallback(ev);
  }
}

}  // namespace ari::qos
