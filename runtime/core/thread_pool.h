// A persistent, pinned worker pool for the forward pass.
//
// Workers are created once (Create) and live until destruction. Run(job, ctx, n) executes
// job(ctx, i, n) for i = 0 .. n-1: i = 0 on the calling thread, i >= 1 on pool worker i-1,
// and returns when all are done (a barrier). The work split is the job's business (static:
// each index takes its fixed share of rows). Waits spin briefly (about 30-60 us of pause
// instructions) and then block on a futex (std::atomic wait/notify), so back-to-back
// dispatches of one token stay hot and idle workers sleep.
//
// Pinning: every worker thread is pinned with sched_setaffinity(tid) to the whole CPU set
// given to Create/SetCpus; the set can change between Runs without re-creating threads
// (same TIDs). The calling thread (index 0) is pinned only on request: PinCaller() pins it
// to the same set and saves its previous affinity, RestoreCaller() puts that back (the
// engine brackets every chunk with them, so the scheduler thread's own work between
// chunks keeps the affinity its owner gave it). Failures (offline CPU, EPERM in a
// container...) are recorded per worker, counted (pin_failures()) and reported by
// Pinning(), whose CPU lists are read back from the OS with sched_getaffinity(tid).
//
// Observed CPUs: every participant of every dispatch (Run, RunUnits, the caller included,
// n = 1 included) calls sched_getcpu() after its share and ORs bit min(cpu, 63) into its
// own cache-line padded word. TakeObserved() returns the union since the last call (and
// how many participants computed) and clears it: what the compute really ran on, seen from
// inside it, not the affinity read back from an idle thread.
//
// Run, SetCpus, PinCaller/RestoreCaller and TakeObserved do not allocate (errors excepted).
// One thread drives the pool at a time.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/error.h"

namespace ari::runtime {

struct PoolPinning {
  std::vector<int> requested;
  std::vector<pid_t> tids;                    // per worker
  std::vector<std::vector<int>> worker_cpus;  // per worker, read back from the OS
  std::vector<std::string> failures;
};

class ThreadPool {
 public:
  using Job = void (*)(void* ctx, int index, int count);
  static constexpr int kMaxCpus = 1024;

  // 1 <= max_participants <= 255 (the caller counts as one: max_participants - 1 workers).
  // Empty cpus: all CPUs the process may use (sched_getaffinity of the process).
  static Result<std::unique_ptr<ThreadPool>> Create(int max_participants,
                                                    std::span<const int> cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int max_participants() const { return static_cast<int>(workers_.size()) + 1; }
  // n is clamped to [1, max_participants()].
  void Run(Job job, void* ctx, int n);
  // Dynamic variant for jobs made of `units` independent pieces: job(ctx, unit, who) runs
  // once for every unit in [0, units); `who` in [0, n) is unique per participant (e.g. for
  // per-participant scratch). Participants claim units from a shared counter, so a worker
  // that is slow, preempted or not yet awake simply does fewer units. A worker that has
  // not joined by the time the caller runs out of units is left out of this dispatch (the
  // caller closes it without waiting for it to be scheduled); the caller waits only for
  // workers that joined. Which participant ran a unit must not change the result.
  using UnitJob = void (*)(void* ctx, int64_t unit, int who);
  void RunUnits(UnitJob job, void* ctx, int64_t units, int n);
  // Re-pins every worker to `cpus` (ids < kMaxCpus). Returns kInvalidArgument for an
  // empty/out-of-range set; per-worker OS failures are recorded (see Pinning) and also
  // make it return kUnsupported with the first errno, after trying every worker.
  Result<void> SetCpus(std::span<const int> cpus);
  Result<void> SetCpuMask(uint64_t mask);  // bit i = CPU i
  PoolPinning Pinning() const;             // allocates (not for the hot path)
  // Workers whose last re-pin failed (0 after a fully successful Create/SetCpus).
  int pin_failures() const;
  // Pins the calling thread to the pool's current CPU set, after saving its affinity.
  // kUnsupported when the OS refuses (the thread then keeps its affinity; nothing to
  // restore). Not nested: one PinCaller, then one RestoreCaller.
  Result<void> PinCaller();
  // Restores the affinity PinCaller saved; a no-op when PinCaller did not pin.
  Result<void> RestoreCaller();
  // The caller notes its CPU too (work it does outside Run/RunUnits, e.g. sampling).
  void NoteCallerCpu() { NoteCpu(0); }
  struct Observed {
    uint64_t cpus = 0;     // bit i = CPU i; bit 63 also stands for every CPU id >= 63
    int participants = 0;  // participants (caller included) that noted a CPU
  };
  Observed TakeObserved();
  // Run() calls so far (each one a dispatch + barrier when n > 1); for profiling figures.
  uint64_t runs() const { return runs_; }

 private:
  struct Worker {
    std::thread thread;
    std::atomic<pid_t> tid{0};
    int pin_errno = 0;
  };
  struct alignas(64) CpuNote {
    std::atomic<uint64_t> cpus{0};
  };
  ThreadPool() = default;
  void NoteCpu(int participant);
  void WorkerLoop(int index);
  Result<void> ApplyPinning();

  std::vector<std::unique_ptr<Worker>> workers_;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<uint32_t> remaining_{0};
  alignas(64) Job job_ = nullptr;
  UnitJob unit_job_ = nullptr;
  int64_t units_ = 0;
  void* ctx_ = nullptr;
  alignas(64) std::atomic<int64_t> next_unit_{0};
  // Dynamic dispatch: (generation << 32) | workers still allowed to join.
  alignas(64) std::atomic<uint64_t> open_slots_{0};
  alignas(64) std::atomic<uint32_t> joined_done_{0};
  std::atomic<bool> stop_{false};
  int requested_[kMaxCpus] = {};
  int n_requested_ = 0;
  uint64_t runs_ = 0;                 // written by the driving thread only
  std::unique_ptr<CpuNote[]> notes_;  // [max_participants]: each written by its participant
  cpu_set_t caller_saved_{};
  bool caller_pinned_ = false;
};

}  // namespace ari::runtime
