#include "runtime/engine/paging.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "runtime/gguf/gguf.h"

namespace ari::runtime {
namespace {

bool IsPowerOfTwo(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

std::string ErrnoText(int err) {
  return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
}

int ToMadvise(Advice a) {
  switch (a) {
    case Advice::kNormal: return MADV_NORMAL;
    case Advice::kRandom: return MADV_RANDOM;
    case Advice::kSequential: return MADV_SEQUENTIAL;
    case Advice::kWillNeed: return MADV_WILLNEED;
  }
  return MADV_NORMAL;
}

Result<void> AdviseCover(ByteRange cover, Advice advice) {
  if (cover.empty()) return {};
  if (::madvise(reinterpret_cast<void*>(cover.begin), cover.size, ToMadvise(advice)) != 0) {
    const int err = errno;
    return MakeError(ErrorCode::kIo, "madvise(" + std::string(AdviceName(advice)) + ", " +
                                         std::to_string(cover.size) + " bytes): " + ErrnoText(err));
  }
  return {};
}

// mlock/munlock as raw system calls: AddressSanitizer intercepts the libc functions and
// turns them into no-ops, which would make the hot set silently unlocked in ASan builds.
int SysMlock(uintptr_t addr, size_t len) {
  return static_cast<int>(::syscall(SYS_mlock, addr, len));
}
int SysMunlock(uintptr_t addr, size_t len) {
  return static_cast<int>(::syscall(SYS_munlock, addr, len));
}

// r minus s: up to two pieces, appended to out.
void Subtract(ByteRange r, ByteRange s, std::vector<ByteRange>& out) {
  if (s.end() <= r.begin || s.begin >= r.end()) {
    out.push_back(r);
    return;
  }
  if (s.begin > r.begin) out.push_back({r.begin, s.begin - r.begin});
  if (s.end() < r.end()) out.push_back({s.end(), r.end() - s.end()});
}

}  // namespace

size_t PageSize() {
  static const size_t page = [] {
    const long v = ::sysconf(_SC_PAGESIZE);
    return v > 0 ? static_cast<size_t>(v) : size_t{4096};
  }();
  return page;
}

Result<ByteRange> PageCover(uintptr_t ptr, size_t len, size_t page) {
  if (!IsPowerOfTwo(page)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "page size " + std::to_string(page) + " is not a power of two");
  }
  if (len == 0) return ByteRange{ptr & ~(page - 1), 0};
  const uintptr_t max = ~uintptr_t{0};
  if (len - 1 > max - ptr) {
    return MakeError(ErrorCode::kInvalidArgument, "range end overflows the address space");
  }
  const uintptr_t last = ptr + (len - 1);  // inclusive, no overflow
  const uintptr_t begin = ptr & ~(page - 1);
  const uintptr_t last_page = last & ~(page - 1);
  if (last_page > max - page) {  // last_page + page must stay representable
    return MakeError(ErrorCode::kInvalidArgument, "page-rounded end overflows");
  }
  return ByteRange{begin, last_page - begin + page};
}

ByteRange PageInterior(uintptr_t ptr, size_t len, size_t page) {
  if (!IsPowerOfTwo(page) || len == 0) return {};
  const uintptr_t max = ~uintptr_t{0};
  if (ptr > max - (page - 1)) return {};
  const uintptr_t begin = (ptr + page - 1) & ~(page - 1);
  const uintptr_t end = (len > max - ptr) ? (max & ~(page - 1)) : ((ptr + len) & ~(page - 1));
  if (end <= begin) return {begin, 0};
  return {begin, end - begin};
}

ByteRange Intersect(ByteRange r, ByteRange bounds) {
  const uintptr_t b = std::max(r.begin, bounds.begin);
  const uintptr_t e = std::min(r.end(), bounds.end());
  if (e <= b) return {};
  return {b, e - b};
}

std::string_view AdviceName(Advice a) {
  switch (a) {
    case Advice::kNormal: return "MADV_NORMAL";
    case Advice::kRandom: return "MADV_RANDOM";
    case Advice::kSequential: return "MADV_SEQUENTIAL";
    case Advice::kWillNeed: return "MADV_WILLNEED";
  }
  return "?";
}

Result<void> Advise(const void* ptr, size_t len, Advice advice) {
  auto cover = PageCover(reinterpret_cast<uintptr_t>(ptr), len, PageSize());
  if (!cover) return std::unexpected(cover.error());
  return AdviseCover(*cover, advice);
}

Result<uint64_t> ResidentBytes(const void* ptr, size_t len) {
  const size_t page = PageSize();
  const uintptr_t start = reinterpret_cast<uintptr_t>(ptr);
  auto cover = PageCover(start, len, page);
  if (!cover) return std::unexpected(cover.error());
  const uintptr_t end = start + len;
  std::array<unsigned char, 1024> vec{};  // pages per mincore call; no heap
  uint64_t resident = 0;
  for (uintptr_t p = cover->begin; p < cover->end();) {
    const size_t pages = std::min<size_t>(vec.size(), (cover->end() - p) / page);
    if (::mincore(reinterpret_cast<void*>(p), pages * page, vec.data()) != 0) {
      const int err = errno;
      return MakeError(ErrorCode::kIo,
                       "mincore(" + std::to_string(pages * page) + " bytes): " + ErrnoText(err));
    }
    for (size_t i = 0; i < pages; ++i, p += page) {
      if ((vec[i] & 1) == 0) continue;
      const uintptr_t b = std::max(p, start), e = std::min(p + page, end);
      resident += e - b;
    }
  }
  return resident;
}

std::vector<ByteRange> MergeRanges(std::vector<ByteRange> ranges) {
  std::erase_if(ranges, [](const ByteRange& r) { return r.empty(); });
  std::sort(ranges.begin(), ranges.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.begin < b.begin; });
  std::vector<ByteRange> out;
  for (const ByteRange& r : ranges) {
    if (!out.empty() && r.begin <= out.back().end()) {
      const uintptr_t e = std::max(out.back().end(), r.end());
      out.back().size = e - out.back().begin;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

ModelRegions RegionsFromTensorNames(const GgufFile& file) {
  ModelRegions regions;
  const auto bytes = file.bytes();
  regions.file = {reinterpret_cast<uintptr_t>(bytes.data()), bytes.size()};
  for (const TensorInfo& t : file.tensors()) {
    if (t.data == nullptr || t.nbytes == 0) continue;
    const ByteRange r{reinterpret_cast<uintptr_t>(t.data), static_cast<size_t>(t.nbytes)};
    const std::string_view name = t.name;
    if (name.starts_with("token_embd.")) {
      regions.embedding.push_back(r);
      continue;
    }
    if (name.starts_with("blk.")) {
      size_t i = 4;
      uint64_t layer = 0;
      bool digits = false;
      while (i < name.size() && name[i] >= '0' && name[i] <= '9' && layer < (1u << 20)) {
        layer = layer * 10 + static_cast<uint64_t>(name[i] - '0');
        digits = true;
        ++i;
      }
      if (digits && i < name.size() && name[i] == '.' && layer < (1u << 20)) {
        if (regions.layers.size() <= layer) regions.layers.resize(layer + 1);
        regions.layers[layer].push_back(r);
        continue;
      }
    }
    regions.other.push_back(r);
  }
  regions.embedding = MergeRanges(std::move(regions.embedding));
  regions.other = MergeRanges(std::move(regions.other));
  for (auto& l : regions.layers) l = MergeRanges(std::move(l));
  return regions;
}

PagingAdvisor::PagingAdvisor(const GgufFile& file, ModelRegions regions)
    : regions_(std::move(regions)) {
  const auto bytes = file.bytes();
  auto cover = PageCover(reinterpret_cast<uintptr_t>(bytes.data()), bytes.size(), PageSize());
  if (cover) file_pages_ = *cover;
}

PagingAdvisor::PagingAdvisor(const GgufFile& file)
    : PagingAdvisor(file, RegionsFromTensorNames(file)) {}

Result<void> PagingAdvisor::AdviseRanges(std::span<const ByteRange> ranges, Advice advice) const {
  for (const ByteRange& r : ranges) {
    auto cover = PageCover(r.begin, r.size, PageSize());
    if (!cover) return std::unexpected(cover.error());
    if (auto a = AdviseCover(Intersect(*cover, file_pages_), advice); !a) return a;
  }
  return {};
}

Result<void> PagingAdvisor::AdviseEmbedding() const {
  return AdviseRanges(regions_.embedding, Advice::kRandom);
}

Result<void> PagingAdvisor::AdviseWeightsSequential() const {
  for (const auto& layer : regions_.layers) {
    if (auto r = AdviseRanges(layer, Advice::kSequential); !r) return r;
  }
  return AdviseRanges(regions_.other, Advice::kSequential);
}

Result<void> PagingAdvisor::ReleaseCached(const std::filesystem::path& file_path,
                                          std::span<const ByteRange> ranges) const {
  const int fd = ::open(file_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return MakeError(ErrorCode::kIo, file_path.string() + ": open: " + ErrnoText(err));
  }
  Result<void> result;
  for (const ByteRange& r : ranges) {
    const ByteRange in = Intersect(r, regions_.file);
    if (in.empty()) continue;
    const off_t offset = static_cast<off_t>(in.begin - regions_.file.begin);
    const int rc = ::posix_fadvise(fd, offset, static_cast<off_t>(in.size), POSIX_FADV_DONTNEED);
    if (rc != 0) {
      result = MakeError(ErrorCode::kIo,
                         file_path.string() + ": posix_fadvise(DONTNEED): " + ErrnoText(rc));
      break;
    }
  }
  ::close(fd);
  return result;
}

Result<void> PagingAdvisor::PrefetchLayer(int32_t layer) const {
  if (layer < 0 || layer >= num_layers()) {
    return MakeError(ErrorCode::kInvalidArgument, "PrefetchLayer: layer " + std::to_string(layer) +
                                                      " is outside [0, " +
                                                      std::to_string(num_layers()) + ")");
  }
  return AdviseRanges(regions_.layers[static_cast<size_t>(layer)], Advice::kWillNeed);
}

PagingAdvisor::Residency PagingAdvisor::SampleLayerResidency(uint64_t stride) const {
  const uint64_t page = PageSize();
  Residency r;
  for (const auto& layer : regions_.layers) {
    for (const ByteRange& range : layer) {
      const ByteRange br = PageInterior(range.begin, range.size, page);
      for (uint64_t off = 0; off < br.size; off += std::max(stride, page)) {
        auto n = ResidentBytes(reinterpret_cast<const void*>(br.begin + off), 1);
        r.samples += 1;
        r.resident += (n && *n > 0) ? 1 : 0;
      }
    }
  }
  return r;
}

Result<uint64_t> PagingAdvisor::Resident(std::span<const ByteRange> ranges) const {
  uint64_t total = 0;
  for (const ByteRange& r : ranges) {
    auto n = ResidentBytes(reinterpret_cast<const void*>(r.begin), r.size);
    if (!n) return std::unexpected(n.error());
    total += *n;
  }
  return total;
}

uint64_t PagingAdvisor::TotalBytes(std::span<const ByteRange> ranges) {
  uint64_t total = 0;
  for (const ByteRange& r : ranges) total += r.size;
  return total;
}

std::string LockReport::ToString() const {
  std::string s = "mlock: " + std::to_string(locked_bytes) + " of budget " +
                  std::to_string(budget_bytes) + " bytes locked (" + std::to_string(ranges_locked) +
                  " ranges), " + std::to_string(skipped_bytes) + " bytes skipped (" +
                  std::to_string(ranges_skipped) + " ranges)";
  if (first_errno != 0) s += ", first error: " + ErrnoText(first_errno);
  return s;
}

HotSetLock HotSetLock::Lock(std::span<const ByteRange> ranges, uint64_t budget_bytes) {
  HotSetLock lock;
  lock.report_.budget_bytes = budget_bytes;
  const size_t page = PageSize();
  bool failed = false;
  std::vector<ByteRange> pieces, next;
  for (const ByteRange& r : ranges) {
    auto cover = PageCover(r.begin, r.size, page);
    if (!cover || cover->empty()) continue;
    // Pages already locked (shared with an earlier range) are not locked or counted twice.
    pieces.assign(1, *cover);
    for (const ByteRange& l : lock.locked_) {
      next.clear();
      for (const ByteRange& p : pieces) Subtract(p, l, next);
      pieces.swap(next);
    }
    uint64_t need = 0;
    for (const ByteRange& p : pieces) need += p.size;
    if (need == 0) continue;
    if (failed || need > budget_bytes - lock.report_.locked_bytes) {
      lock.report_.skipped_bytes += need;
      ++lock.report_.ranges_skipped;
      continue;
    }
    bool ok = true;
    for (const ByteRange& p : pieces) {
      if (!ok) {
        lock.report_.skipped_bytes += p.size;
        continue;
      }
      if (SysMlock(p.begin, p.size) != 0) {
        lock.report_.first_errno = errno;
        failed = ok = false;
        lock.report_.skipped_bytes += p.size;
        continue;
      }
      lock.locked_.push_back(p);
      lock.report_.locked_bytes += p.size;
    }
    if (ok) {
      ++lock.report_.ranges_locked;
    } else {
      ++lock.report_.ranges_skipped;
    }
  }
  return lock;
}

HotSetLock::HotSetLock(HotSetLock&& other) noexcept
    : locked_(std::move(other.locked_)), report_(other.report_) {
  other.locked_.clear();
}

HotSetLock& HotSetLock::operator=(HotSetLock&& other) noexcept {
  if (this != &other) {
    Release();
    locked_ = std::move(other.locked_);
    report_ = other.report_;
    other.locked_.clear();
  }
  return *this;
}

void HotSetLock::Release() {
  for (const ByteRange& r : locked_) SysMunlock(r.begin, r.size);
  locked_.clear();
}

}  // namespace ari::runtime
