#include "runtime/core/thread_pool.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ari::runtime {
namespace {

// About 30-60 us of pause instructions: long enough to bridge the serial gaps between the
// dispatches of one token, short enough not to burn a timeslice on a shared machine.
constexpr int kSpinIterations = 1 << 11;
// Generation word: bits 0-7 participants, bit 8 dynamic (RunUnits), bits 9+ counter.
constexpr uint32_t kDynamicBit = 1u << 8;
constexpr int kGenShift = 9;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Waits until a != old: spin, then block.
inline uint32_t WaitChange(const std::atomic<uint32_t>& a, uint32_t old) {
  for (int i = 0; i < kSpinIterations; ++i) {
    const uint32_t v = a.load(std::memory_order_acquire);
    if (v != old) return v;
    CpuRelax();
  }
  uint32_t v = a.load(std::memory_order_acquire);
  while (v == old) {
    a.wait(old, std::memory_order_acquire);
    v = a.load(std::memory_order_acquire);
  }
  return v;
}

}  // namespace

Result<std::unique_ptr<ThreadPool>> ThreadPool::Create(int max_participants,
                                                       std::span<const int> cpus) {
  if (max_participants < 1 || max_participants > 255) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "thread pool: participants " + std::to_string(max_participants));
  }
  std::unique_ptr<ThreadPool> pool(new ThreadPool());
  if (cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
      return MakeError(ErrorCode::kInternal, "thread pool: sched_getaffinity failed");
    }
    for (int c = 0; c < kMaxCpus && c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) pool->requested_[pool->n_requested_++] = c;
    }
  } else {
    for (int c : cpus) {
      if (c < 0 || c >= kMaxCpus) {
        return MakeError(ErrorCode::kInvalidArgument, "thread pool: cpu " + std::to_string(c));
      }
      pool->requested_[pool->n_requested_++] = c;
    }
  }
  pool->notes_ = std::make_unique<CpuNote[]>(static_cast<size_t>(max_participants));
  for (int i = 0; i + 1 < max_participants; ++i) {
    pool->workers_.push_back(std::make_unique<Worker>());
  }
  for (int i = 0; i + 1 < max_participants; ++i) {
    ThreadPool* p = pool.get();
    pool->workers_[static_cast<size_t>(i)]->thread = std::thread([p, i] { p->WorkerLoop(i); });
  }
  for (auto& w : pool->workers_) {
    while (w->tid.load(std::memory_order_acquire) == 0) std::this_thread::yield();
  }
  // A refused pinning does not fail Create (e.g. EPERM in a container): every worker's
  // errno is recorded, counted by pin_failures() and named by Pinning().
  const Result<void> pinned = pool->ApplyPinning();
  if (!pinned && pool->pin_failures() == 0) return std::unexpected(pinned.error());
  return pool;
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1u << kGenShift, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
}

void ThreadPool::WorkerLoop(int index) {
  // "ari-pool-<i>" in top -H, perf and the allocation tests' thread filter (best effort:
  // a name is diagnostics only).
  char name[16];
  std::snprintf(name, sizeof name, "ari-pool-%d", index);
  if (prctl(PR_SET_NAME, name, 0, 0, 0) != 0) name[0] = '\0';
  workers_[static_cast<size_t>(index)]->tid.store(static_cast<pid_t>(syscall(SYS_gettid)),
                                                  std::memory_order_release);
  uint32_t seen = 0;
  while (true) {
    seen = WaitChange(generation_, seen);
    if (stop_.load(std::memory_order_acquire)) return;
    const int me = index + 1;
    const int n = static_cast<int>(seen & 0xFFu);  // participants of this generation
    if (me >= n) continue;
    if (seen & kDynamicBit) {
      // Join only while this generation's slots are open (the caller may have closed them,
      // or already moved on to a later generation: then job fields are not ours to read).
      const uint64_t gen = seen >> kGenShift;
      uint64_t s = open_slots_.load(std::memory_order_acquire);
      bool joined = false;
      while ((s >> 32) == gen && (s & 0xFFFFFFFFu) != 0) {
        if (open_slots_.compare_exchange_weak(s, s - 1, std::memory_order_acq_rel)) {
          joined = true;
          break;
        }
      }
      if (!joined) continue;
      for (int64_t u = next_unit_.fetch_add(1, std::memory_order_relaxed); u < units_;
           u = next_unit_.fetch_add(1, std::memory_order_relaxed)) {
        unit_job_(ctx_, u, me);
      }
      NoteCpu(me);
      joined_done_.fetch_add(1, std::memory_order_acq_rel);
      joined_done_.notify_one();
      continue;
    }
    job_(ctx_, me, n);
    NoteCpu(me);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_one();
  }
}

void ThreadPool::Run(Job job, void* ctx, int n) {
  ++runs_;
  if (n < 1) n = 1;
  if (n > max_participants()) n = max_participants();
  if (n == 1) {
    job(ctx, 0, 1);
    NoteCpu(0);
    return;
  }
  job_ = job;
  ctx_ = ctx;
  remaining_.store(static_cast<uint32_t>(n - 1), std::memory_order_relaxed);
  // The generation word carries the participant count in its low byte.
  const uint32_t g = generation_.load(std::memory_order_relaxed);
  generation_.store(((g >> kGenShift) + 1) << kGenShift | static_cast<uint32_t>(n),
                    std::memory_order_release);
  generation_.notify_all();
  job(ctx, 0, n);
  NoteCpu(0);
  uint32_t left = remaining_.load(std::memory_order_acquire);
  for (int i = 0; i < kSpinIterations && left != 0; ++i) {
    CpuRelax();
    left = remaining_.load(std::memory_order_acquire);
  }
  while (left != 0) {
    remaining_.wait(left, std::memory_order_acquire);
    left = remaining_.load(std::memory_order_acquire);
  }
}

void ThreadPool::RunUnits(UnitJob job, void* ctx, int64_t units, int n) {
  ++runs_;
  if (n < 1) n = 1;
  if (n > max_participants()) n = max_participants();
  if (n > units) n = static_cast<int>(units < 1 ? 1 : units);
  if (n == 1) {
    for (int64_t u = 0; u < units; ++u) job(ctx, u, 0);
    NoteCpu(0);
    return;
  }
  unit_job_ = job;
  ctx_ = ctx;
  units_ = units;
  next_unit_.store(0, std::memory_order_relaxed);
  joined_done_.store(0, std::memory_order_relaxed);
  const uint32_t g = generation_.load(std::memory_order_relaxed);
  const uint32_t gen = ((g >> kGenShift) + 1) & (0xFFFFFFFFu >> kGenShift);  // wraps like g
  open_slots_.store(static_cast<uint64_t>(gen) << 32 | static_cast<uint32_t>(n - 1),
                    std::memory_order_release);
  generation_.store(gen << kGenShift | kDynamicBit | static_cast<uint32_t>(n),
                    std::memory_order_release);
  generation_.notify_all();
  for (int64_t u = next_unit_.fetch_add(1, std::memory_order_relaxed); u < units;
       u = next_unit_.fetch_add(1, std::memory_order_relaxed)) {
    job(ctx, u, 0);
  }
  NoteCpu(0);
  // Close the slots: workers that have not joined yet stay out of this dispatch.
  const uint64_t left =
      open_slots_.exchange(static_cast<uint64_t>(gen) << 32, std::memory_order_acq_rel);
  const uint32_t joined = static_cast<uint32_t>(n - 1) - static_cast<uint32_t>(left & 0xFFFFFFFFu);
  uint32_t done = joined_done_.load(std::memory_order_acquire);
  for (int i = 0; i < kSpinIterations && done != joined; ++i) {
    CpuRelax();
    done = joined_done_.load(std::memory_order_acquire);
  }
  while (done != joined) {
    joined_done_.wait(done, std::memory_order_acquire);
    done = joined_done_.load(std::memory_order_acquire);
  }
}

Result<void> ThreadPool::ApplyPinning() {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < n_requested_; ++i) CPU_SET(requested_[i], &set);
  int first_errno = 0;
  for (auto& w : workers_) {
    w->pin_errno = 0;
    if (sched_setaffinity(w->tid.load(), sizeof(set), &set) != 0) {
      w->pin_errno = errno;
      if (first_errno == 0) first_errno = errno;
    }
  }
  if (first_errno != 0) {
    return MakeError(ErrorCode::kUnsupported,
                     std::string("thread pool: pinning failed: ") + std::strerror(first_errno));
  }
  return {};
}

Result<void> ThreadPool::SetCpus(std::span<const int> cpus) {
  if (cpus.empty() || cpus.size() > static_cast<size_t>(kMaxCpus)) {
    return MakeError(ErrorCode::kInvalidArgument, "thread pool: empty cpu set");
  }
  for (int c : cpus) {
    if (c < 0 || c >= kMaxCpus) {
      return MakeError(ErrorCode::kInvalidArgument, "thread pool: cpu " + std::to_string(c));
    }
  }
  n_requested_ = 0;
  for (int c : cpus) requested_[n_requested_++] = c;
  return ApplyPinning();
}

Result<void> ThreadPool::SetCpuMask(uint64_t mask) {
  int cpus[64];
  int n = 0;
  for (int c = 0; c < 64; ++c) {
    if (mask & (uint64_t{1} << c)) cpus[n++] = c;
  }
  return SetCpus(std::span<const int>(cpus, static_cast<size_t>(n)));
}

void ThreadPool::NoteCpu(int participant) {
  const int cpu = sched_getcpu();
  if (cpu < 0) return;
  std::atomic<uint64_t>& word = notes_[static_cast<size_t>(participant)].cpus;
  const uint64_t bit = uint64_t{1} << (cpu < 63 ? cpu : 63);
  // Only this participant writes its word: a relaxed load/store, no read-modify-write.
  const uint64_t old = word.load(std::memory_order_relaxed);
  if ((old & bit) == 0) word.store(old | bit, std::memory_order_relaxed);
}

ThreadPool::Observed ThreadPool::TakeObserved() {
  // The dispatches' barriers (acquire) order the workers' notes before this read.
  Observed o;
  for (int i = 0; i < max_participants(); ++i) {
    const uint64_t m = notes_[static_cast<size_t>(i)].cpus.exchange(0, std::memory_order_acq_rel);
    o.cpus |= m;
    o.participants += m != 0 ? 1 : 0;
  }
  return o;
}

int ThreadPool::pin_failures() const {
  int n = 0;
  for (const auto& w : workers_) n += w->pin_errno != 0 ? 1 : 0;
  return n;
}

Result<void> ThreadPool::PinCaller() {
  caller_pinned_ = false;
  if (sched_getaffinity(0, sizeof(caller_saved_), &caller_saved_) != 0) {
    return MakeError(ErrorCode::kUnsupported,
                     std::string("thread pool: caller sched_getaffinity: ") + std::strerror(errno));
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i = 0; i < n_requested_; ++i) CPU_SET(requested_[i], &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return MakeError(
        ErrorCode::kUnsupported,
        std::string("thread pool: pinning the caller failed: ") + std::strerror(errno));
  }
  caller_pinned_ = true;
  return {};
}

Result<void> ThreadPool::RestoreCaller() {
  if (!caller_pinned_) return {};
  caller_pinned_ = false;
  if (sched_setaffinity(0, sizeof(caller_saved_), &caller_saved_) != 0) {
    return MakeError(ErrorCode::kUnsupported,
                     std::string("thread pool: restoring the caller's affinity failed: ") +
                         std::strerror(errno));
  }
  return {};
}

PoolPinning ThreadPool::Pinning() const {
  PoolPinning r;
  r.requested.assign(requested_, requested_ + n_requested_);
  for (size_t i = 0; i < workers_.size(); ++i) {
    const pid_t tid = workers_[i]->tid.load();
    r.tids.push_back(tid);
    std::vector<int> cpus;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(tid, sizeof(set), &set) == 0) {
      for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
      }
    } else {
      r.failures.push_back("worker " + std::to_string(i) +
                           ": sched_getaffinity: " + std::strerror(errno));
    }
    r.worker_cpus.push_back(std::move(cpus));
    if (workers_[i]->pin_errno != 0) {
      r.failures.push_back("worker " + std::to_string(i) + " (tid " + std::to_string(tid) +
                           "): sched_setaffinity: " + std::strerror(workers_[i]->pin_errno));
    }
  }
  return r;
}

}  // namespace ari::runtime
