// Private to the engine (engine_setup.cc): memory yield on command (ChunkRunner::ReleaseMemory /
// Rewarm, docs/memory.md "Memory yield"). The model is a read-only MAP_PRIVATE mapping, so
// every page of it is a clean file page: MADV_DONTNEED drops it from the process and the
// next touch reads it back from the page cache (or the disk once the cache dropped it).
// The slots' KV and the free park areas are anonymous memory whose content is not needed
// any more once their conversations are spilled or forgotten: MADV_DONTNEED frees them and
// the next touch gets zero-filled pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

#include "runtime/core/error.h"
#include "runtime/engine/engine_memory.h"
#include "runtime/engine/paging.h"

namespace ari::runtime::engine_internal {

// MADV_DONTNEED over the page cover of a read-only file mapping: the bytes advised.
// kIo with errno text when madvise refuses (e.g. EINVAL on locked pages).
Result<uint64_t> DropMapping(std::span<const std::byte> mapping);
// posix_fadvise(POSIX_FADV_DONTNEED) over the whole file: its clean pages that nobody maps
// leave the page cache.
Result<void> DropPageCache(const std::filesystem::path& path);
// MADV_DONTNEED over each region's page interior (anonymous memory whose content may be
// lost): the bytes released. A region madvise refuses is skipped (its pages stay).
uint64_t ReleaseRegions(std::span<const MemoryRegion> regions);
// Reads `ranges` of the mapping `mapping` back in: MADV_WILLNEED (the kernel starts reading
// ahead), then MADV_POPULATE_READ (Linux 5.14+) or, where refused, one read per page. Ranges
// are clipped to the mapping's pages. The bytes warmed.
Result<uint64_t> WarmMapping(std::span<const std::byte> mapping, std::span<const ByteRange> ranges);

}  // namespace ari::runtime::engine_internal
