// Prefaulting and locking the engine's memory; see engine_memory.h.
#include "runtime/engine/engine_memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
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

void PrefaultOnPool(ThreadPool& pool, void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return;
  struct Span {
    std::byte* p;
    size_t bytes;
  } span{static_cast<std::byte*>(p), bytes};
  const auto units = static_cast<int64_t>((bytes + kPrefaultUnit - 1) / kPrefaultUnit);
  pool.RunUnits(
      [](void* ctx, int64_t unit, int) {
        const auto& s = *static_cast<const Span*>(ctx);
        const size_t off = static_cast<size_t>(unit) * kPrefaultUnit;
        Prefault(s.p + off, std::min(kPrefaultUnit, s.bytes - off));
      },
      &span, units, pool.max_participants());
}

PoolBuffer::PoolBuffer(size_t bytes, size_t align) : bytes_(bytes) {
  if (bytes == 0) return;
  const bool big = bytes >= kHugePage;
  align_ = big ? std::max(align, kHugePage) : align;
  p_ = static_cast<std::byte*>(::operator new(bytes, std::align_val_t(align_)));
  // Only the whole 2 MiB pages inside the buffer can be huge: advise those.
  huge_ = big && ::madvise(p_, bytes & ~(kHugePage - 1), MADV_HUGEPAGE) == 0;
}

PoolBuffer::~PoolBuffer() { Free(); }

PoolBuffer& PoolBuffer::operator=(PoolBuffer&& o) noexcept {
  if (this != &o) {
    Free();
    p_ = std::exchange(o.p_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    align_ = std::exchange(o.align_, 0);
    huge_ = std::exchange(o.huge_, false);
  }
  return *this;
}

void PoolBuffer::Free() {
  if (p_ != nullptr) ::operator delete(p_, std::align_val_t(align_));
  p_ = nullptr;
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
