// Private to the engine (engine_setup.cc, engine_park.cc, engine_memory.cc): the memory the
// real-time path touches, prefaulted at Create (no first-touch page fault inside the chunk
// loop) and, on request, locked in RAM (Engine::LockMemory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/core/thread_pool.h"
#include "runtime/engine/engine.h"

namespace ari::runtime::engine_internal {

struct MemoryRegion {
  void* begin = nullptr;
  size_t bytes = 0;
};

// Whether this kernel reports free memory to a hypervisor: a virtio-balloon device with
// VIRTIO_BALLOON_F_REPORTING (feature bit 5) under root/sys/bus/virtio/drivers/
// virtio_balloon. There, 2 MiB pages freshly allocated after another process freed memory
// took 10-80 ms each to back (hypervisor faults), 4 kB pages ~0.3 ms per 2 MiB
// (docs/memory.md). root: "/" or a test tree.
bool FreePageReportingActive(const std::string& root);
// The policy resolved on this machine (sys_root: "/" or a test tree): huge pages or not,
// with a line saying which and why appended to `notes`.
bool ChooseHugePages(HugePages policy, const std::string& sys_root,
                     std::vector<std::string>& notes);

// Writes every page of [p, p + bytes) (zeros) so the kernel backs it now.
void Prefault(void* p, size_t bytes);

class PoolBuffer;

// What PrefaultOnPool did (the engine notes it in its plan).
struct PrefaultReport {
  int64_t units = 0;           // 2 MiB units written
  double slowest_unit_ms = 0;  // the slowest unit's population
};

// Prefaults the buffer on the pool's participants, 2 MiB at a time (units claimed from a
// shared counter), timing each unit. On a VM whose page-table updates trap to the
// hypervisor, backing a 16 MiB arena right after another process freed ~1 GiB took 15-30 ms
// on one thread.
PrefaultReport PrefaultOnPool(ThreadPool& pool, const PoolBuffer& buf);
// `into` plus `r` (units added, the slowest of both).
void AddPrefaultReport(const PrefaultReport& r, PrefaultReport& into);
// A line for the plan's notes: "<what> prefaulted: N x 2 MiB units, slowest X ms".
std::string DescribePrefault(std::string_view what, const PrefaultReport& r);

// One of the engine's pools (the arena, a park area): `align`-aligned anonymous memory.
// From kHugePage bytes up it is its own 2 MiB aligned mapping, advised MADV_HUGEPAGE before
// its first touch (huge): prefaulting then takes one page fault per 2 MiB instead of one
// per 4 kB, and the chunk loop fewer TLB misses. Transparent huge pages off or refused: 4 kB
// pages. Where the hypervisor backs fresh huge pages slowly, the engine asks for 4 kB pages
// (ChooseHugePages).
class PoolBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  PoolBuffer() = default;
  // align: a power of two. huge = false: advised MADV_NOHUGEPAGE instead (4 kB pages even
  // where transparent huge pages are "always"). Never throws: when the memory cannot be had,
  // allocated() is false and data() null (the engine reports kOutOfMemory).
  PoolBuffer(size_t bytes, size_t align, bool huge = true) noexcept;
  ~PoolBuffer();
  PoolBuffer(PoolBuffer&& o) noexcept { *this = std::move(o); }
  PoolBuffer& operator=(PoolBuffer&& o) noexcept;
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;

  bool allocated() const { return p_ != nullptr || bytes_ == 0; }
  std::byte* data() const { return p_; }
  size_t bytes() const { return bytes_; }
  // MADV_HUGEPAGE was asked for and accepted (the kernel may still use 4 kB pages).
  bool huge_pages_advised() const { return huge_; }

 private:
  void Free();
  std::byte* p_ = nullptr;
  size_t bytes_ = 0;
  size_t align_ = 0;
  size_t mapped_ = 0;  // from kHugePage up: the mapping's length (freed with munmap)
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
