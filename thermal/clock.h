// Time for the thermal and QoS layers. Everything that needs "now" takes a
// Clock&, so the node runs on SteadyClock and the simulator/tests run the very
// same code on a ManualClock (virtual time that only moves when told to).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>

namespace ari::thermal {

inline constexpr int64_t kNsPerSecond = 1'000'000'000;
inline constexpr int64_t kNsPerMs = 1'000'000;

// Seconds -> nanoseconds, rounded to nearest (no overflow checks: |s| < ~292 years).
inline int64_t SecondsToNs(double s) { return static_cast<int64_t>(std::llround(s * 1e9)); }
inline double NsToSeconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds since an arbitrary epoch; never decreases.
  virtual int64_t NowNs() const = 0;
};

// std::chrono::steady_clock. Stateless; Instance() is a shared object for convenience.
class SteadyClock final : public Clock {
 public:
  int64_t NowNs() const override;
  static SteadyClock& Instance();
};

// Virtual time: starts at start_ns and moves only through Set/Advance. Thread-safe
// (an atomic), so a simulator thread may advance it while others read it.
// Moving it backwards is refused (Set to an earlier time keeps the current time).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ns = 0) : now_ns_(start_ns) {}

  int64_t NowNs() const override { return now_ns_.load(std::memory_order_acquire); }

  // Advances by ns (negative values are ignored). Returns the new time.
  int64_t AdvanceNs(int64_t ns);
  int64_t AdvanceSeconds(double s) { return AdvanceNs(SecondsToNs(s)); }
  // Jumps to t_ns when t_ns >= now; returns false (and does nothing) otherwise.
  bool SetNs(int64_t t_ns);

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace ari::thermal
