// Paging of the mapped model file: madvise hints per region, an optional mlock'ed hot set
// with a byte budget, and residency measurement (mincore).
//
// The model is mapped read-only (MAP_PRIVATE, never written), so every page of it is a
// clean file page: the kernel may drop it under pressure and fault it back in later. The
// hints shape which pages are resident:
//   - token embedding table: MADV_RANDOM. Rows are read one per token; without the hint
//     every fault reads ahead/around (128 KiB on most systems), so a few hundred tokens
//     would pull most of the table in. With it, only the touched rows' pages come in.
//   - the next layer's weights: MADV_WILLNEED while the current layer computes, so the
//     kernel starts reading them and the page faults overlap compute.
// All ranges are rounded outward to whole pages and clipped to the pages of the file's
// own bytes, so a hint never touches memory outside the mapping. Failures are values
// (Result / LockReport), never aborts: a hint that fails only costs speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "runtime/core/error.h"

namespace ari::runtime {

class GgufFile;

// The system page size (sysconf(_SC_PAGESIZE)), cached.
size_t PageSize();

// A byte range [begin, begin + size) as integer addresses.
struct ByteRange {
  uintptr_t begin = 0;
  size_t size = 0;
  uintptr_t end() const { return begin + size; }
  bool empty() const { return size == 0; }
};

// The smallest page-aligned range covering [ptr, ptr + len): begin rounded down, end rounded
// up to `page` (a power of two). Empty when len == 0. kInvalidArgument when page is not a
// power of two or the end would overflow the address space.
Result<ByteRange> PageCover(uintptr_t ptr, size_t len, size_t page);
// The largest page-aligned range inside [ptr, ptr + len) (possibly empty).
ByteRange PageInterior(uintptr_t ptr, size_t len, size_t page);
// `r` cut to `bounds` (empty when they do not overlap).
ByteRange Intersect(ByteRange r, ByteRange bounds);

enum class Advice : uint8_t { kNormal, kRandom, kSequential, kWillNeed };
std::string_view AdviceName(Advice a);

// madvise over the page cover of [ptr, ptr + len). Only non-destructive advice exists here
// (no DONTNEED: on anonymous memory that would zero data). kIo with errno text on failure
// (e.g. ENOMEM: part of the range is not mapped), kInvalidArgument on bad ranges.
Result<void> Advise(const void* ptr, size_t len, Advice advice);

// Bytes of [ptr, ptr + len) whose pages are resident (mincore), counted exactly over the
// range (a partial first/last page counts only its overlap). No heap allocation. kIo with
// errno text when mincore fails (ENOMEM: not mapped).
Result<uint64_t> ResidentBytes(const void* ptr, size_t len);

// Which tensors make up each part of the model, as byte ranges of the file. Tensors named
// "blk.<N>.*" belong to layer N, "token_embd.*" to the embedding, everything else to
// `other` (output head, final norm...). Adjacent or overlapping ranges are merged.
struct ModelRegions {
  std::vector<ByteRange> embedding;
  std::vector<std::vector<ByteRange>> layers;
  std::vector<ByteRange> other;
  ByteRange file;  // the whole file's bytes
};
ModelRegions RegionsFromTensorNames(const GgufFile& file);
// Sorts and merges touching/overlapping ranges; drops empty ones.
std::vector<ByteRange> MergeRanges(std::vector<ByteRange> ranges);

// Per-region madvise hints for one mapped model file (the file must outlive the advisor).
class PagingAdvisor {
 public:
  PagingAdvisor(const GgufFile& file, ModelRegions regions);
  explicit PagingAdvisor(const GgufFile& file);  // regions from tensor names

  const ModelRegions& regions() const { return regions_; }
  int32_t num_layers() const { return static_cast<int32_t>(regions_.layers.size()); }

  // MADV_RANDOM on the embedding table (call once after loading).
  Result<void> AdviseEmbedding() const;
  // MADV_SEQUENTIAL on every other region (layers, head): their faults then read ahead
  // forward only, never "around" into the embedding table. Needed where read_ahead_kb is
  // large (8 MiB on some virtio disks): one fault next to the table would read it all.
  Result<void> AdviseWeightsSequential() const;
  // Drops the page-cache copies of `ranges` (posix_fadvise DONTNEED on `file_path`, which
  // must be the mapped file): clean pages not mapped by anyone leave memory. Use once after
  // loading for the embedding table, which the header parse's read-ahead may have pulled in.
  Result<void> ReleaseCached(const std::filesystem::path& file_path,
                             std::span<const ByteRange> ranges) const;
  // MADV_WILLNEED on layer i's weights (call for layer i + 1 before computing layer i).
  // Out-of-range i is kInvalidArgument.
  Result<void> PrefetchLayer(int32_t layer) const;
  // Any advice over a whole region list, clipped to the file's pages.
  Result<void> AdviseRanges(std::span<const ByteRange> ranges, Advice advice) const;
  // Resident bytes of a region list (mincore; exact over the ranges).
  Result<uint64_t> Resident(std::span<const ByteRange> ranges) const;
  // Page-cache residency of the layer regions, sampled: one page per `stride` bytes of
  // every range, pages inside the range only (an edge page may hold a neighbour's bytes).
  // One mincore per sample, no allocation; a sample mincore refuses counts as not
  // resident. Every page of a 1.1B pack: ~67 ms; one per MiB: ~0.5 ms per precision.
  struct Residency {
    uint64_t resident = 0;
    uint64_t samples = 0;
  };
  Residency SampleLayerResidency(uint64_t stride = uint64_t{1} << 20) const;
  static uint64_t TotalBytes(std::span<const ByteRange> ranges);

 private:
  ModelRegions regions_;
  ByteRange file_pages_;  // page cover of the file's bytes: no hint goes beyond it
};

// What an mlock attempt did. Errors are values: EPERM (no CAP_IPC_LOCK and RLIMIT_MEMLOCK
// is 0), ENOMEM/EAGAIN (over RLIMIT_MEMLOCK or out of memory) stop locking and are reported.
struct LockReport {
  uint64_t budget_bytes = 0;
  uint64_t locked_bytes = 0;   // page-rounded bytes actually locked (<= budget)
  uint64_t skipped_bytes = 0;  // page-rounded bytes of ranges not locked (budget/errors)
  int32_t ranges_locked = 0;
  int32_t ranges_skipped = 0;
  int first_errno = 0;  // 0 when no mlock call failed
  std::string ToString() const;
};

// RAII mlock of a hot set: ranges are locked in the order given (priority first) while
// their page-rounded size fits the remaining budget; a range that does not fit is skipped
// and later smaller ones are still tried. Pages shared by two ranges are counted once.
// Everything locked is unlocked by the destructor (or Release()).
class HotSetLock {
 public:
  HotSetLock() = default;
  static HotSetLock Lock(std::span<const ByteRange> ranges, uint64_t budget_bytes);
  HotSetLock(HotSetLock&& other) noexcept;
  HotSetLock& operator=(HotSetLock&& other) noexcept;
  HotSetLock(const HotSetLock&) = delete;
  HotSetLock& operator=(const HotSetLock&) = delete;
  ~HotSetLock() { Release(); }

  const LockReport& report() const { return report_; }
  const std::vector<ByteRange>& locked() const { return locked_; }  // page-aligned
  void Release();

 private:
  std::vector<ByteRange> locked_;
  LockReport report_;
};

}  // namespace ari::runtime
