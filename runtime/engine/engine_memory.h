// Private to the engine (engine.cc, engine_park.cc, engine_memory.cc): the memory the
// real-time path touches, prefaulted at Create (no first-touch page fault inside the chunk
// loop) and, on request, locked in RAM (Engine::LockMemory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/error.h"

namespace ari::runtime::engine_internal {

struct MemoryRegion {
  void* begin = nullptr;
  size_t bytes = 0;
};

// Writes every page of [p, p + bytes) (zeros) so the kernel backs it now.
void Prefault(void* p, size_t bytes);

// mlock()s every region. On a refusal, unlocks what it had locked and says why, naming
// RLIMIT_MEMLOCK (its soft limit and the bytes asked) and how to raise it. The bytes locked.
Result<uint64_t> LockRegions(std::span<const MemoryRegion> regions);
// munlock()s every region; the number that could not be unlocked (not locked: harmless).
int UnlockRegions(std::span<const MemoryRegion> regions);

// Sum of the regions' bytes.
uint64_t RegionBytes(std::span<const MemoryRegion> regions);

}  // namespace ari::runtime::engine_internal
