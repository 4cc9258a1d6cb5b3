// Memory yield on command; see engine_standby.h.
#include "runtime/engine/engine_standby.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older kernels answer EINVAL (then: reads)
#endif

namespace ari::runtime::engine_internal {

namespace {

ByteRange CoverOf(std::span<const std::byte> mapping) {
  auto cover = PageCover(reinterpret_cast<uintptr_t>(mapping.data()), mapping.size(), PageSize());
  return cover ? *cover : ByteRange{};
}

}  // namespace

Result<uint64_t> DropMapping(std::span<const std::byte> mapping) {
  const ByteRange cover = CoverOf(mapping);
  if (cover.empty()) return uint64_t{0};
  if (::madvise(reinterpret_cast<void*>(cover.begin), cover.size, MADV_DONTNEED) != 0) {
    const int err = errno;
    return MakeError(ErrorCode::kIo, "madvise(DONTNEED) of the model mapping (" +
                                         std::to_string(cover.size) +
                                         " bytes): " + std::strerror(err));
  }
  return static_cast<uint64_t>(cover.size);
}

Result<void> DropPageCache(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return MakeError(ErrorCode::kIo, path.string() + ": open: " + std::strerror(err));
  }
  const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  if (::close(fd) != 0 && rc == 0) {
    const int err = errno;
    return MakeError(ErrorCode::kIo, path.string() + ": close: " + std::strerror(err));
  }
  if (rc != 0) {
    return MakeError(ErrorCode::kIo,
                     path.string() + ": posix_fadvise(DONTNEED): " + std::strerror(rc));
  }
  return {};
}

uint64_t ReleaseRegions(std::span<const MemoryRegion> regions) {
  uint64_t released = 0;
  for (const MemoryRegion& r : regions) {
    if (r.begin == nullptr || r.bytes == 0) continue;
    const ByteRange in = PageInterior(reinterpret_cast<uintptr_t>(r.begin), r.bytes, PageSize());
    if (!in.empty() && ::madvise(reinterpret_cast<void*>(in.begin), in.size, MADV_DONTNEED) == 0) {
      released += in.size;
    }
  }
  return released;
}

Result<uint64_t> WarmMapping(std::span<const std::byte> mapping,
                             std::span<const ByteRange> ranges) {
  const ByteRange bounds = CoverOf(mapping);
  const size_t page = PageSize();
  uint64_t warmed = 0;
  for (const ByteRange& want : ranges) {
    auto cover = PageCover(want.begin, want.size, page);
    if (!cover) return std::unexpected(cover.error());
    const ByteRange r = Intersect(*cover, bounds);
    if (r.empty()) continue;
    void* p = reinterpret_cast<void*>(r.begin);
    if (::madvise(p, r.size, MADV_WILLNEED) != 0) {
      const int err = errno;
      return MakeError(ErrorCode::kIo, "madvise(WILLNEED) of the model mapping: " +
                                           std::string(std::strerror(err)));
    }
    if (::madvise(p, r.size, MADV_POPULATE_READ) != 0) {
      // An older kernel: one read per page faults the range in.
      const volatile std::byte* b = reinterpret_cast<const volatile std::byte*>(r.begin);
      std::byte sink{};
      for (size_t off = 0; off < r.size; off += page) sink ^= b[off];
      static_cast<void>(sink);
    }
    warmed += r.size;
  }
  return warmed;
}

}  // namespace ari::runtime::engine_internal
