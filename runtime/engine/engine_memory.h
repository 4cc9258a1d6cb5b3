// Private to the engine (engine.cc, engine_park.cc, engine_memory.cc): the memory the
// real-time path touches, prefaulted at Create (no first-touch page fault inside the chunk
// loop) and, on request, locked in RAM (Engine::LockMemory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/thread_pool.h"

namespace ari::runtime::engine_internal {

struct MemoryRegion {
  void* begin = nullptr;
  size_t bytes = 0;
};

// Writes every page of [p, p + bytes) (zeros) so the kernel backs it now.
void Prefault(void* p, size_t bytes);
// Prefault on the pool's participants, 2 MiB at a time (units claimed from a shared
// counter). On a VM whose page-table updates trap to the hypervisor, backing a 16 MiB arena
// right after another process freed ~1 GiB took 15-30 ms on one thread.
void PrefaultOnPool(ThreadPool& pool, void* p, size_t bytes);

// One of the engine's pools (the arena, a park area): `align`-aligned anonymous memory.
// From kHugePage bytes up it is 2 MiB aligned and advised MADV_HUGEPAGE before its first
// touch: prefaulting then takes one page fault per 2 MiB instead of one per 4 kB (16 MiB
// of arena: ~1.5 ms instead of ~45 ms on a VM whose page faults are slow), and the chunk
// loop fewer TLB misses. Transparent huge pages off or refused: 4 kB pages, as before.
class PoolBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  PoolBuffer() = default;
  PoolBuffer(size_t bytes, size_t align);  // align: a power of two
  ~PoolBuffer();
  PoolBuffer(PoolBuffer&& o) noexcept { *this = std::move(o); }
  PoolBuffer& operator=(PoolBuffer&& o) noexcept;
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;

  std::byte* data() const { return p_; }
  size_t bytes() const { return bytes_; }
  // MADV_HUGEPAGE was asked for and accepted (the kernel may still use 4 kB pages).
  bool huge_pages_advised() const { return huge_; }

 private:
  void Free();
  std::byte* p_ = nullptr;
  size_t bytes_ = 0;
  size_t align_ = 0;
  bool huge_ = false;
};

// mlock()s every region. On a refusal, unlocks what it had locked and says why, naming
// RLIMIT_MEMLOCK (its soft limit and the bytes asked) and how to raise it. The bytes locked.
Result<uint64_t> LockRegions(std::span<const MemoryRegion> regions);
// munlock()s every region; the number that could not be unlocked (not locked: harmless).
int UnlockRegions(std::span<const MemoryRegion> regions);

// Sum of the regions' bytes.
uint64_t RegionBytes(std::span<const MemoryRegion> regions);

}  // namespace ari::runtime::engine_internal
