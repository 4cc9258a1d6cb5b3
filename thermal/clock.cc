#include "thermal/clock.h"

#include <chrono>

namespace ari::thermal {

int64_t SteadyClock::NowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

SteadyClock& SteadyClock::Instance() {
  static SteadyClock clock;
  return clock;
}

int64_t ManualClock::AdvanceNs(int64_t ns) {
  if (ns <= 0) return NowNs();
  return now_ns_.fetch_add(ns, std::memory_order_acq_rel) + ns;
}

bool ManualClock::SetNs(int64_t t_ns) {
  int64_t cur = now_ns_.load(std::memory_order_acquire);
  while (t_ns >= cur) {
    if (now_ns_.compare_exchange_weak(cur, t_ns, std::memory_order_acq_rel)) return true;
  }
  return false;
}

}  // namespace ari::thermal
