// Prefaulting and locking the engine's memory; see engine_memory.h.
#include "runtime/engine/engine_memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>

namespace ari::runtime::engine_internal {
namespace {
#ifdef MADV_POPULATE_WRITE
constexpr int kMadvPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kMadvPopulateWrite = 23;  // Linux 5.14; older kernels answer EINVAL
#endif
constexpr size_t kPrefaultUnit = PoolBuffer::kHugePage;  // one huge page per pool unit
}  // namespace

void Prefault(void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return;
  // MADV_POPULATE_WRITE (Linux 5.14) first: the kernel backs every whole page of the range
  // in one call, without one page fault per page (on a VM whose faults are slow, 16 MiB in
  // ~2 ms instead of ~10-45). Refused (older kernel) or partial: the memset below faults in
  // the rest. The memset also leaves the memory in a defined state (zeros), and it writes,
  // so no shared zero page is left to copy-on-write later.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
  // A kernel without it answers EINVAL: not asked again in this process. Any other refusal
  // (ENOMEM, a range it cannot populate) leaves the pages to the memset.
  static std::atomic<bool> populate_unsupported{false};
  if (e > b && !populate_unsupported.load(std::memory_order_relaxed) &&
      ::madvise(reinterpret_cast<void*>(b), e - b, kMadvPopulateWrite) != 0 && errno == EINVAL) {
    populate_unsupported.store(true, std::memory_order_relaxed);
  }
  std::memset(p, 0, bytes);
}

namespace {
// The shared state of one PrefaultOnPool: the buffer, then the slowest unit's time.
struct PrefaultJob {
  std::byte* p = nullptr;
  size_t bytes = 0;
  std::atomic<int64_t> slowest_ns{0};
};

void PrefaultUnit(void* ctx, int64_t unit, int) {
  auto& j = *static_cast<PrefaultJob*>(ctx);
  const size_t off = static_cast<size_t>(unit) * kPrefaultUnit;
  const auto t0 = std::chrono::steady_clock::now();
  Prefault(j.p + off, std::min(kPrefaultUnit, j.bytes - off));
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  int64_t seen = j.slowest_ns.load(std::memory_order_relaxed);
  while (ns > seen && !j.slowest_ns.compare_exchange_weak(seen, ns)) {
  }
}
}  // namespace

PrefaultReport PrefaultOnPool(ThreadPool& pool, const PoolBuffer& buf) {
  PrefaultReport r;
  if (buf.data() == nullptr || buf.bytes() == 0) return r;
  PrefaultJob job;
  job.p = buf.data();
  job.bytes = buf.bytes();
  r.units = static_cast<int64_t>((buf.bytes() + kPrefaultUnit - 1) / kPrefaultUnit);
  pool.RunUnits(&PrefaultUnit, &job, r.units, pool.max_participants());
  r.slowest_unit_ms = static_cast<double>(job.slowest_ns.load()) / 1e6;
  return r;
}

void AddPrefaultReport(const PrefaultReport& r, PrefaultReport& into) {
  into.units += r.units;
  into.slowest_unit_ms = std::max(into.slowest_unit_ms, r.slowest_unit_ms);
}

std::string DescribePrefault(std::string_view what, const PrefaultReport& r) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%.*s prefaulted: %lld x 2 MiB units, slowest %.2f ms",
                static_cast<int>(what.size()), what.data(), static_cast<long long>(r.units),
                r.slowest_unit_ms);
  return buf;
}

bool FreePageReportingActive(const std::string& root) {
  constexpr size_t kReportingBit = 5;  // VIRTIO_BALLOON_F_REPORTING
  std::error_code ec;
  const std::filesystem::path dir =
      std::filesystem::path(root) / "sys/bus/virtio/drivers/virtio_balloon";
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::ifstream in(entry.path() / "features");
    std::string bits;
    if (in >> bits && bits.size() > kReportingBit && bits[kReportingBit] == '1') return true;
  }
  return false;  // no balloon driver, no device bound to it, or no reporting
}

bool ChooseHugePages(HugePages policy, const std::string& sys_root,
                     std::vector<std::string>& notes) {
  if (policy == HugePages::kOff) {
    notes.emplace_back("pools in 4 kB pages (huge pages off)");
    return false;
  }
  if (policy == HugePages::kAuto && FreePageReportingActive(sys_root)) {
    notes.emplace_back(
        "pools in 4 kB pages: this kernel reports free memory to its hypervisor "
        "(virtio-balloon free page reporting), where fresh 2 MiB pages are slow to back "
        "(docs/memory.md)");
    return false;
  }
  notes.emplace_back("pools advised transparent huge pages");
  return true;
}

PoolBuffer::PoolBuffer(size_t bytes, size_t align, bool huge) noexcept : bytes_(bytes) {
  if (bytes == 0) return;
  if (bytes < kHugePage) {
    align_ = align;
    p_ = static_cast<std::byte*>(::operator new(bytes, std::align_val_t(align_), std::nothrow));
    return;
  }
  // Its own mapping, 2 MiB aligned (2 MiB more mapped, the slack unmapped): fresh pages and
  // advice of its own, never heap memory that an earlier buffer left in 4 kB pages or advised
  // otherwise, and munmap gives it back when freed.
  align_ = std::max(align, kHugePage);
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t len = (bytes + page - 1) / page * page;
  const size_t span = len + align_;
  void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return;  // allocated() is false
  const auto base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t a = (base + align_ - 1) & ~(uintptr_t{align_} - 1);
  // Unmapping the slack cannot fail on a range just mapped; if it did, it stays mapped.
  if (a > base && ::munmap(m, a - base) != 0) std::perror("PoolBuffer: munmap (head slack)");
  if (base + span > a + len &&
      ::munmap(reinterpret_cast<void*>(a + len), base + span - a - len) != 0)
    std::perror("PoolBuffer: munmap (tail slack)");
  p_ = reinterpret_cast<std::byte*>(a);
  mapped_ = len;
  // Only the whole 2 MiB pages inside the buffer can be huge: advise those. Without huge
  // pages, MADV_NOHUGEPAGE keeps even THP "always" off it (a refusal: the kernel's default).
  if (huge) {
    huge_ = ::madvise(p_, bytes & ~(kHugePage - 1), MADV_HUGEPAGE) == 0;
  } else if (::madvise(p_, len, MADV_NOHUGEPAGE) != 0) {
    std::perror("PoolBuffer: madvise(MADV_NOHUGEPAGE)");
  }
}

PoolBuffer::~PoolBuffer() { Free(); }

PoolBuffer& PoolBuffer::operator=(PoolBuffer&& o) noexcept {
  if (this != &o) {
    Free();
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    align_ = std::exchange(o.align_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
    huge_ = std::exchange(o.huge_, false);
  }
  return *this;
}

void PoolBuffer::Free() {
  if (p_ != nullptr && mapped_ > 0) {
    if (::munmap(p_, mapped_) != 0) std::perror("PoolBuffer: munmap");
  } else if (p_ != nullptr) {
    ::operator delete(p_, std::align_val_t(align_));
  }
  p_ = nullptr;
  mapped_ = 0;
}

uint64_t RegionBytes(std::span<const MemoryRegion> regions) {
  uint64_t n = 0;
  for (const MemoryRegion& r : regions) n += r.bytes;
  return n;
}

int UnlockRegions(std::span<const MemoryRegion> regions) {
  int failed = 0;
  for (const MemoryRegion& r : regions) {
    if (r.begin != nullptr && r.bytes > 0 && ::munlock(r.begin, r.bytes) != 0) ++failed;
  }
  return failed;
}

Result<uint64_t> LockRegions(std::span<const MemoryRegion> regions) {
  for (size_t i = 0; i < regions.size(); ++i) {
    const MemoryRegion& r = regions[i];
    if (r.begin == nullptr || r.bytes == 0) continue;
    if (::mlock(r.begin, r.bytes) == 0) continue;
    const int err = errno;
    if (UnlockRegions(regions.first(i)) != 0) errno = err;  // keep mlock's reason
    rlimit lim{};
    std::string limit = "unknown";
    if (::getrlimit(RLIMIT_MEMLOCK, &lim) == 0) {
      limit = lim.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                            : std::to_string(lim.rlim_cur) + " bytes";
    }
    return MakeError(ErrorCode::kOutOfMemory,
                     "mlock of " + std::to_string(RegionBytes(regions)) +
                         " bytes (engine arena, park areas, slot buffers) refused: " +
                         std::strerror(err) + "; RLIMIT_MEMLOCK is " + limit +
                         " (raise it: LimitMEMLOCK= in the systemd unit, ulimit -l, "
                         "or grant CAP_IPC_LOCK)");
  }
  return RegionBytes(regions);
}

}  // namespace ari::runtime::engine_internal
